#include <gtest/gtest.h>
#include <poll.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

// Regression tests for bugs a review found (each failed before its fix).
namespace {
using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// R1: rendezvous + FI_MATCH_COMPLETE to a buffered receiver.
TEST(RegressionTest, BufferedRendezvousMatchCompleteWaitsForTheClaim) {
  Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 2, 0, 0, 7, SF_EP_RDM, SF_BUFFERED_RECV));
  const std::vector<uint8_t> large = Pattern(100 * 1024, 3);
  iovec siov{const_cast<uint8_t*>(large.data()), large.size()};
  sf_msg smsg{&siov, nullptr, 1, f.peers[0].addr[1], nullptr, 0};
  ASSERT_EQ(sf_sendmsg(f.peers[0].ep, &smsg, SF_MATCH_COMPLETE), 0)
      << sf_last_error();
  sf_cq_tagged_entry e{};
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_NE(e.flags & SF_MORE, 0u);
  auto* rc = static_cast<sf_recv_context*>(e.op_context);
  // Nothing claimed yet: the sender must not have completed.
  for (int r = 0; r < 2000; ++r) f.Progress();
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
  ssize_t n = f.ReadOne(1, &e);
  if (n == -SF_EAVAIL) {
    sf_cq_err_entry x{};
    ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
    ADD_FAILURE() << "claim failed with err " << x.err;
  } else {
    EXPECT_EQ(n, 1);
    EXPECT_EQ(in, large);
  }
}

// fi_cancel writes an entry: the wait fd must become readable.
TEST(RegressionTest, CancelSignalsTheWaitFd) {
  Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 2));
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(f.AddEndpoint(0, SF_EP_RDM, {&f.peers[0].av->fid}, true, &cq, &ep,
                            SF_WAIT_FD));
  int fd = -1;
  ASSERT_EQ(sf_control(&cq->fid, SF_GETWAIT, &fd), 0);
  char buf[16];
  int ctx = 0;
  ASSERT_EQ(sf_recv(ep, buf, sizeof buf, nullptr, SF_ADDR_UNSPEC, &ctx), 0);
  EXPECT_FALSE(Readable(fd));
  ASSERT_EQ(sf_cancel(&ep->fid, &ctx), 0);
  EXPECT_TRUE(Readable(fd)) << "ECANCELED entry queued but fd not readable";
  sf_cq_tagged_entry e{};
  EXPECT_EQ(sf_cq_read(cq, &e, 1), -SF_EAVAIL);
  sf_cq_err_entry x{};
  ASSERT_EQ(sf_cq_readerr(cq, &x, 0), 1);
  EXPECT_EQ(x.err, SF_ECANCELED);
  EXPECT_FALSE(Readable(fd));
  EXPECT_EQ(sf_close(&ep->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
}

// A shared context with receives posted keeps its CQ open; once idle and
// without endpoints it lets go of it.
TEST(RegressionTest, SharedContextHoldsItsCq) {
  Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 2));
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
TEST(RegressionTest, ClosedEndpointLeavesNoEvents) {
  Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 2));
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
  ASSERT_GT(sf_eq_sread(leq, &event, buf, sizeof buf, 1000, 0), 0);
  auto* entry = reinterpret_cast<sf_eq_cm_entry*>(buf);
  ASSERT_EQ(sf_reject(pep, entry->info, nullptr, 0), 0);
  sf_freeinfo(entry->info);
  // Let the rejection arrive, then close the endpoint before reading its EQ.
  for (int r = 0; r < 1000; ++r) {
    f.Progress();
    sf_cq_read(cq, nullptr, 0);
    sf_eq_read(leq, &event, buf, sizeof buf, SF_PEEK);
  }
  // The rejection is waiting (an error event) before the close.
  EXPECT_EQ(sf_eq_read(eq, &event, buf, sizeof buf, SF_PEEK), -SF_EAVAIL);
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
TEST(RegressionTest, FullListenerQueueStrandsNoConnector) {
  Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 3));
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
  for (int r = 0; r < 3000; ++r) {
    for (int i = 0; i < 2; ++i) {
      sf_cq_read(cq[i], nullptr, 0);
      sf_eq_read(eq[i], &event, buf, sizeof buf, SF_PEEK);
    }
    sf_eq_read(leq, &event, buf, sizeof buf, SF_PEEK);
  }
  int reqs = 0;
  while (sf_eq_read(leq, &event, buf, sizeof buf, 0) > 0) {
    ++reqs;
    EXPECT_EQ(sf_reject(pep, reinterpret_cast<sf_eq_cm_entry*>(buf)->info,
                        nullptr, 0),
              0);
    sf_freeinfo(reinterpret_cast<sf_eq_cm_entry*>(buf)->info);
  }
  EXPECT_GE(reqs, 1);
  // Now long virtual time: every connector should get some event (connected
  // or an error) eventually; the one whose request was dropped gets nothing.
  int events[2] = {0, 0};
  for (int r = 0; r < 200000; ++r) {
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
  }
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

}  // namespace
