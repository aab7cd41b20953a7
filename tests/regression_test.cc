// Regression tests for bugs a review found (each failed before its fix), run
// on every backend: the simulator (plain and under a fault plan) and a real
// device through verbs. Where the simulator runs a fixed number of rounds of
// virtual time, the verbs instance waits in real time with a bound
// (tests/bounded_wait.h), so a regression fails instead of hanging.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/bounded_wait.h"
#include "tests/conformance_fixture.h"

namespace {
using ::softfab::testing::Fixture;
using ::softfab::testing::kDeviceWaitMs;
using ::softfab::testing::Pattern;
using ::softfab::testing::Readable;
using ::softfab::testing::WaitUntil;

class RegressionTest : public ::softfab::testing::PerBackendTest {
 protected:
  bool verbs() const { return backend().backend == SF_BACKEND_VERBS; }

  // Drives `step` for a while: `rounds` times (on the simulator these run
  // virtual time), and on verbs for at least `ms` of real time too, so that
  // what the device does by then (datagrams, messages, acks) has happened.
  template <typename Step>
  void Settle(Step step, int rounds = 2000, int ms = 300) {
    for (int r = 0; r < rounds; ++r) step();
    if (!verbs()) return;
    const ::softfab::testing::Deadline until(ms);
    while (!until.passed()) step();
  }
};

// Reads one entry from peer i while driving every peer, within the bound of
// tests/bounded_wait.h. Returns what sf_cq_read returned last: 1, -SF_EAVAIL
// or -SF_EAGAIN.
ssize_t Await(Fixture& f, int i, sf_cq_tagged_entry* e) {
  ssize_t n = -SF_EAGAIN;
  WaitUntil([&] { return (n = sf_cq_read(f.peers[i].cq, e, 1)) != -SF_EAGAIN; },
            [&] { f.Progress(); });
  return n;
}

// R1: rendezvous + FI_MATCH_COMPLETE to a buffered receiver.
TEST_P(RegressionTest, BufferedRendezvousMatchCompleteWaitsForTheClaim) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2, 0, 0, 7, SF_EP_RDM, SF_BUFFERED_RECV));
  const std::vector<uint8_t> large = Pattern(100 * 1024, 3);
  iovec siov{const_cast<uint8_t*>(large.data()), large.size()};
  sf_msg smsg{&siov, nullptr, 1, f.peers[0].addr[1], nullptr, 0};
  ASSERT_EQ(sf_sendmsg(f.peers[0].ep, &smsg, SF_MATCH_COMPLETE), 0)
      << sf_last_error();
  sf_cq_tagged_entry e{};
  ASSERT_EQ(Await(f, 1, &e), 1);
  EXPECT_NE(e.flags & SF_MORE, 0u);
  auto* rc = static_cast<sf_recv_context*>(e.op_context);
  // Nothing claimed yet: the sender must not have completed.
  Settle([&] { f.Progress(); });
  sf_cq_tagged_entry s{};
  const ssize_t sn = sf_cq_read(f.peers[0].cq, &s, 1);
  EXPECT_EQ(sn, -SF_EAGAIN) << "sender completed before the claim's READ";
  // Now claim.
  std::vector<uint8_t> in(large.size());
  iovec iov{in.data(), in.size()};
  sf_msg msg{&iov, nullptr, 1, 0, rc, 0};
  int ctx = 0;
  rc->context = &ctx;
  ASSERT_EQ(sf_recvmsg(f.peers[1].ep, &msg, SF_CLAIM), 0) << sf_last_error();
  ssize_t n = Await(f, 1, &e);
  if (n == -SF_EAVAIL) {
    sf_cq_err_entry x{};
    ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
    ADD_FAILURE() << "claim failed with err " << x.err;
  } else {
    EXPECT_EQ(n, 1);
    EXPECT_EQ(in, large);
  }
}

// fi_cancel writes an entry: a waiter must learn of it. On the simulator the
// wait fd is readable while there is work, so it becomes readable; on verbs
// the fd is the domain's completion channel, which only a device completion
// signals, so the promise is fi_trywait's: -SF_EAGAIN (read the CQ first)
// while the entry waits, on both backends.
TEST_P(RegressionTest, CancelSignalsTheWaitFd) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(f.AddEndpoint(0, SF_EP_RDM, {&f.peers[0].av->fid}, true, &cq, &ep,
                            SF_WAIT_FD));
  int fd = -1;
  ASSERT_EQ(sf_control(&cq->fid, SF_GETWAIT, &fd), 0);
  char buf[16];
  int ctx = 0;
  ASSERT_EQ(sf_recv(ep, buf, sizeof buf, nullptr, SF_ADDR_UNSPEC, &ctx), 0);
  sf_fid* fids[] = {&cq->fid};
  EXPECT_FALSE(Readable(fd));
  ASSERT_EQ(sf_cancel(&ep->fid, &ctx), 0);
  if (!verbs()) {
    EXPECT_TRUE(Readable(fd)) << "ECANCELED entry queued but fd not readable";
  }
  EXPECT_EQ(sf_trywait(f.fabric, fids, 1), -SF_EAGAIN)
      << "ECANCELED entry queued but sf_trywait says it is safe to sleep";
  sf_cq_tagged_entry e{};
  EXPECT_EQ(sf_cq_read(cq, &e, 1), -SF_EAVAIL);
  sf_cq_err_entry x{};
  ASSERT_EQ(sf_cq_readerr(cq, &x, 0), 1);
  EXPECT_EQ(x.err, SF_ECANCELED);
  EXPECT_EQ(x.op_context, &ctx);
  // Read: nothing left to wait for.
  EXPECT_EQ(sf_trywait(f.fabric, fids, 1), 0) << sf_last_error();
  EXPECT_FALSE(Readable(fd));
  EXPECT_EQ(sf_close(&ep->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
}

// A shared context with receives posted keeps its CQ open; once idle and
// without endpoints it lets go of it.
TEST_P(RegressionTest, SharedContextHoldsItsCq) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* srx = nullptr;
  ASSERT_EQ(sf_srx_context(f.peers[0].domain, nullptr, &srx, nullptr), 0);
  sf_cq* cq1 = nullptr;
  sf_ep* ep1 = nullptr;
  ASSERT_TRUE(f.AddEndpoint(0, SF_EP_RDM, {&f.peers[0].av->fid, &srx->fid},
                            true, &cq1, &ep1));
  char buf[16];
  int ctx = 0;
  ASSERT_EQ(sf_recv(srx, buf, sizeof buf, nullptr, SF_ADDR_UNSPEC, &ctx), 0);
  ASSERT_EQ(sf_close(&ep1->fid), 0);
  EXPECT_EQ(sf_close(&cq1->fid), -SF_EBUSY)
      << "CQ closed while the shared context still reports to it";
  // A new endpoint with a new CQ.
  sf_cq* cq2 = nullptr;
  sf_ep* ep2 = nullptr;
  ASSERT_TRUE(f.AddEndpoint(0, SF_EP_RDM, {&f.peers[0].av->fid, &srx->fid},
                            false, &cq2, &ep2));
  // The context still reports to cq1: another CQ is refused.
  EXPECT_EQ(sf_enable(ep2), -SF_EINVAL);
  EXPECT_EQ(sf_close(&ep2->fid), 0);
  // Cancel runs through an enabled endpoint, and there is none now.
  ASSERT_EQ(sf_cancel(&srx->fid, &ctx), -SF_ENOENT);
  EXPECT_EQ(sf_close(&srx->fid), 0);  // Its posted receive goes with it.
  EXPECT_EQ(sf_close(&cq1->fid), 0);
  EXPECT_EQ(sf_close(&cq2->fid), 0);
}

// Closing an endpoint takes its events out of the EQ (their fid would
// dangle).
TEST_P(RegressionTest, ClosedEndpointLeavesNoEvents) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_eq* eq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &eq, nullptr), 0);
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(f.AddEndpoint(1, SF_EP_MSG, {&eq->fid}, true, &cq, &ep));
  // A listener that rejects.
  sf_pep* pep = nullptr;
  sf_eq* leq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &leq, nullptr), 0);
  ASSERT_EQ(sf_passive_ep(f.peers[0].domain, &pep, nullptr), 0);
  ASSERT_EQ(sf_pep_bind(pep, &leq->fid, 0), 0);
  ASSERT_EQ(sf_listen(pep), 0);
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&pep->fid, name, &len), 0);
  ASSERT_EQ(sf_connect(ep, name, nullptr, 0), 0);
  alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  ASSERT_GT(sf_eq_sread(leq, &event, buf, sizeof buf, kDeviceWaitMs, 0), 0)
      << sf_last_error();
  auto* entry = reinterpret_cast<sf_eq_cm_entry*>(buf);
  ASSERT_EQ(sf_reject(pep, entry->info, nullptr, 0), 0);
  sf_freeinfo(entry->info);
  // Let the rejection arrive, then close the endpoint before reading its EQ:
  // the rejection is waiting (an error event) before the close.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return sf_eq_read(eq, &event, buf, sizeof buf, SF_PEEK) == -SF_EAVAIL;
      },
      [&] {
        f.Progress();
        sf_cq_read(cq, nullptr, 0);
        sf_eq_read(leq, &event, buf, sizeof buf, SF_PEEK);
      }));
  ASSERT_EQ(sf_close(&ep->fid), 0);
  sf_eq_err_entry x{};
  EXPECT_EQ(sf_eq_readerr(eq, &x, 0), -SF_EAGAIN);
  EXPECT_EQ(sf_close(&pep->fid), 0);
  EXPECT_EQ(sf_close(&leq->fid), 0);
  EXPECT_EQ(sf_close(&eq->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
}

// A listener whose EQ is full does not take a request: its connector retries
// and is answered later (before the fix it waited forever).
TEST_P(RegressionTest, FullListenerQueueStrandsNoConnector) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 3));
  sf_eq_attr qa{};
  qa.size = 1;
  sf_eq* leq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, &qa, &leq, nullptr), 0);
  sf_pep* pep = nullptr;
  ASSERT_EQ(sf_passive_ep(f.peers[0].domain, &pep, nullptr), 0);
  ASSERT_EQ(sf_pep_bind(pep, &leq->fid, 0), 0);
  ASSERT_EQ(sf_listen(pep), 0);
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&pep->fid, name, &len), 0);
  sf_eq* eq[2] = {};
  sf_cq* cq[2] = {};
  sf_ep* ep[2] = {};
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &eq[i], nullptr), 0);
    ASSERT_TRUE(
        f.AddEndpoint(i + 1, SF_EP_MSG, {&eq[i]->fid}, true, &cq[i], &ep[i]));
    ASSERT_EQ(sf_connect(ep[i], name, nullptr, 0), 0);
  }
  alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  // Drive everything without reading the listener EQ, so both requests land.
  Settle(
      [&] {
        for (int i = 0; i < 2; ++i) {
          sf_cq_read(cq[i], nullptr, 0);
          sf_eq_read(eq[i], &event, buf, sizeof buf, SF_PEEK);
        }
        sf_eq_read(leq, &event, buf, sizeof buf, SF_PEEK);
      },
      3000);
  int reqs = 0;
  while (sf_eq_read(leq, &event, buf, sizeof buf, 0) > 0) {
    ++reqs;
    EXPECT_EQ(sf_reject(pep, reinterpret_cast<sf_eq_cm_entry*>(buf)->info,
                        nullptr, 0),
              0);
    sf_freeinfo(reinterpret_cast<sf_eq_cm_entry*>(buf)->info);
  }
  EXPECT_GE(reqs, 1);
  // Now a long time: every connector gets some event (connected or an error)
  // eventually; before the fix, the one whose request was dropped got nothing.
  int events[2] = {0, 0};
  auto drive = [&] {
    for (int i = 0; i < 2; ++i) {
      sf_cq_read(cq[i], nullptr, 0);
      ssize_t n = sf_eq_read(eq[i], &event, buf, sizeof buf, 0);
      if (n > 0 || n == -SF_EAVAIL) {
        ++events[i];
        if (n == -SF_EAVAIL) {
          sf_eq_err_entry x;
          ASSERT_EQ(sf_eq_readerr(eq[i], &x, 0),
                    static_cast<ssize_t>(sizeof x));
          // Refused, or timed out while the listener had no room (as an
          // overloaded IB listener drops REQs).
          EXPECT_TRUE(x.err == SF_ECONNREFUSED || x.err == SF_ETIMEDOUT)
              << x.err;
        }
      }
    }
    // Requests that come back once there is room are rejected too.
    if (sf_eq_read(leq, &event, buf, sizeof buf, 0) > 0) {
      ++reqs;
      auto* entry = reinterpret_cast<sf_eq_cm_entry*>(buf);
      EXPECT_EQ(sf_reject(pep, entry->info, nullptr, 0), 0);
      sf_freeinfo(entry->info);
    }
  };
  WaitUntil([&] { return events[0] > 0 && events[1] > 0; }, drive, 200000);
  EXPECT_GE(reqs, 1);
  EXPECT_GT(events[0], 0);
  EXPECT_GT(events[1], 0);
  for (int i = 0; i < 2; ++i) {
    sf_close(&ep[i]->fid);
    sf_close(&cq[i]->fid);
    sf_close(&eq[i]->fid);
  }
  sf_close(&pep->fid);
  sf_close(&leq->fid);
}

// A plain receive may use the CQ slot it reserves for a message that has
// already arrived, even when that slot was the CQ's last (before, the
// message waited for some other receive).
TEST_P(RegressionTest, ReceiveTakesArrivedMessageWithItsOwnSlot) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  sf_cq_attr ca{};
  ca.size = 2;
  ca.format = SF_CQ_FORMAT_TAGGED;
  ASSERT_EQ(sf_cq_open(f.peers[1].domain, &ca, &cq, nullptr), 0);
  sf_ep_attr ea{};
  ea.type = SF_EP_RDM;
  ea.caps = SF_MSG | SF_TAGGED;
  ASSERT_EQ(sf_endpoint(f.peers[1].domain, &ea, &ep, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(ep, &cq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_ep_bind(ep, &f.peers[1].av->fid, 0), 0);
  ASSERT_EQ(sf_enable(ep), 0);
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&ep->fid, name, &len), 0);
  sf_addr_t to = 0;
  ASSERT_EQ(sf_av_insert(f.peers[0].av, name, 1, &to, 0, nullptr), 1);
  // One receive holds one of the two slots; a message for another tag
  // arrives and waits.
  char a[8] = {}, b[8] = {}, out[8] = "late";
  int actx = 0, bctx = 0;
  ASSERT_EQ(sf_trecv(ep, a, sizeof a, nullptr, SF_ADDR_UNSPEC, 1, 0, &actx), 0);
  int sctx = 0;
  ASSERT_EQ(sf_tsend(f.peers[0].ep, out, sizeof out, nullptr, to, 2, &sctx), 0);
  auto drive = [&] {
    f.Progress();
    ASSERT_EQ(sf_cq_read(cq, nullptr, 0), 0);
  };
  // The send completes once the target's device has taken the message; then
  // the target's progress takes it off the wire.
  sf_cq_tagged_entry sent{};
  ASSERT_TRUE(WaitUntil(
      [&] { return sf_cq_read(f.peers[0].cq, &sent, 1) == 1; }, drive));
  EXPECT_EQ(sent.op_context, &sctx);
  Settle(drive);
  // This receive takes the last slot and must match the waiting message.
  ASSERT_EQ(sf_trecv(ep, b, sizeof b, nullptr, SF_ADDR_UNSPEC, 2, 0, &bctx), 0);
  sf_cq_tagged_entry e{};
  ASSERT_EQ(sf_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(e.op_context, &bctx);
  EXPECT_STREQ(b, "late");
  ASSERT_EQ(sf_cancel(&ep->fid, &actx), 0);
  EXPECT_EQ(sf_close(&ep->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
}

// Binding an endpoint to a second CQ takes it off the first one's progress
// list: closing the endpoint and then reading the first CQ is safe (ASan
// caught the use after free before).
TEST_P(RegressionTest, RebindingTheCqForgetsTheOldOne) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_cq *cq1 = nullptr, *cq2 = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(f.AddEndpoint(0, SF_EP_RDM, {}, false, &cq1, &ep));
  sf_cq_attr ca{};
  ca.format = SF_CQ_FORMAT_TAGGED;
  ASSERT_EQ(sf_cq_open(f.peers[0].domain, &ca, &cq2, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(ep, &cq2->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_close(&ep->fid), 0);
  sf_cq_tagged_entry e{};
  EXPECT_EQ(sf_cq_read(cq1, &e, 1), -SF_EAGAIN);
  EXPECT_EQ(sf_close(&cq1->fid), 0);
  EXPECT_EQ(sf_close(&cq2->fid), 0);
}

// One decision per connection request: accepted, it cannot be rejected.
TEST_P(RegressionTest, AcceptedRequestCannotBeRejected) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2, 0, 0, 7, SF_EP_MSG));
  // The fixture accepted node 1's request through its listener; a new
  // request is needed to hold on to its info.
  sf_eq* eq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &eq, nullptr), 0);
  sf_cq* cq = nullptr;
  sf_ep* client = nullptr;
  ASSERT_TRUE(f.AddEndpoint(1, SF_EP_MSG, {&eq->fid}, true, &cq, &client));
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&f.pep->fid, name, &len), 0);
  ASSERT_EQ(sf_connect(client, name, nullptr, 0), 0);
  alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  ASSERT_GT(
      sf_eq_sread(f.peers[0].eq, &event, buf, sizeof buf, kDeviceWaitMs, 0), 0)
      << sf_last_error();
  ASSERT_EQ(event, static_cast<uint32_t>(SF_CONNREQ));
  sf_info* info = reinterpret_cast<sf_eq_cm_entry*>(buf)->info;
  sf_ep_attr ea{};
  ea.type = SF_EP_MSG;
  ea.info = info;
  sf_ep* server = nullptr;
  sf_cq* scq = nullptr;
  sf_cq_attr ca{};
  ca.format = SF_CQ_FORMAT_TAGGED;
  ASSERT_EQ(sf_cq_open(f.peers[0].domain, &ca, &scq, nullptr), 0);
  ASSERT_EQ(sf_endpoint(f.peers[0].domain, &ea, &server, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(server, &scq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_ep_bind(server, &f.peers[0].eq->fid, 0), 0);
  ASSERT_EQ(sf_enable(server), 0);
  ASSERT_EQ(sf_accept(server, nullptr, 0), 0) << sf_last_error();
  EXPECT_EQ(sf_reject(f.pep, info, nullptr, 0), -SF_EINVAL);
  sf_freeinfo(info);
  EXPECT_EQ(sf_close(&server->fid), 0);
  EXPECT_EQ(sf_close(&scq->fid), 0);
  EXPECT_EQ(sf_close(&client->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
  EXPECT_EQ(sf_close(&eq->fid), 0);
}

// A buffered message reported to the application stays claimable after the
// endpoint it arrived at closes (before, it was freed under the
// application's feet and its context slot reused).
TEST_P(RegressionTest, ReportedBufferedMessageOutlivesItsEndpoint) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_rx_attr ra{};
  ra.mode = SF_BUFFERED_RECV;
  sf_ep* srx = nullptr;
  ASSERT_EQ(sf_srx_context(f.peers[1].domain, &ra, &srx, nullptr), 0);
  sf_cq* cq = nullptr;
  sf_cq_attr ca{};
  ca.format = SF_CQ_FORMAT_TAGGED;
  ASSERT_EQ(sf_cq_open(f.peers[1].domain, &ca, &cq, nullptr), 0);
  sf_ep* eps[2] = {};
  sf_addr_t to[2] = {};
  for (int i = 0; i < 2; ++i) {
    sf_ep_attr ea{};
    ea.type = SF_EP_RDM;
    ea.caps = SF_MSG;
    ea.mode = SF_BUFFERED_RECV;
    ASSERT_EQ(sf_endpoint(f.peers[1].domain, &ea, &eps[i], nullptr), 0);
    ASSERT_EQ(sf_ep_bind(eps[i], &cq->fid, SF_TRANSMIT | SF_RECV), 0);
    ASSERT_EQ(sf_ep_bind(eps[i], &f.peers[1].av->fid, 0), 0);
    ASSERT_EQ(sf_ep_bind(eps[i], &srx->fid, 0), 0) << sf_last_error();
    ASSERT_EQ(sf_enable(eps[i]), 0) << sf_last_error();
    uint8_t name[SF_NAME_BYTES];
    size_t len = sizeof name;
    ASSERT_EQ(sf_getname(&eps[i]->fid, name, &len), 0);
    ASSERT_EQ(sf_av_insert(f.peers[0].av, name, 1, &to[i], 0, nullptr), 1);
  }
  // M1 to endpoint 0, reported; endpoint 0 closes; M2 to endpoint 1.
  const std::vector<uint8_t> m1 = Pattern(100, 1), m2 = Pattern(200, 2);
  auto report = [&](const std::vector<uint8_t>& m, sf_addr_t dest) {
    EXPECT_EQ(
        sf_send(f.peers[0].ep, m.data(), m.size(), nullptr, dest, nullptr), 0);
    sf_cq_tagged_entry e{};
    EXPECT_TRUE(WaitUntil([&] { return sf_cq_read(cq, &e, 1) == 1; },
                          [&] { f.Progress(); }));
    EXPECT_EQ(e.len, m.size());
    return static_cast<sf_recv_context*>(e.op_context);
  };
  sf_recv_context* rc1 = report(m1, to[0]);
  ASSERT_NE(rc1, nullptr);
  ASSERT_EQ(sf_close(&eps[0]->fid), 0);
  sf_recv_context* rc2 = report(m2, to[1]);
  ASSERT_NE(rc2, nullptr);
  EXPECT_NE(rc1, rc2);  // Its context slot was not reused.
  // M1 is still there to claim, with its bytes.
  std::vector<uint8_t> in(m1.size());
  iovec iov{in.data(), in.size()};
  int ctx = 0;
  rc1->context = &ctx;
  sf_msg msg{&iov, nullptr, 1, 0, rc1, 0};
  ASSERT_EQ(sf_recvmsg(srx, &msg, SF_CLAIM), 0) << sf_last_error();
  sf_cq_tagged_entry e{};
  ASSERT_EQ(sf_cq_read(cq, &e, 1), 1);
  EXPECT_EQ(e.op_context, &ctx);
  EXPECT_EQ(in, m1);
  msg.context = rc2;
  ASSERT_EQ(sf_recvmsg(srx, &msg, SF_DISCARD), 0);
  EXPECT_EQ(sf_close(&eps[1]->fid), 0);
  EXPECT_EQ(sf_close(&srx->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(RegressionTest);

}  // namespace
