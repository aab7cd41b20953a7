// Peers that go away. On a real device (verbs only) faults are real faults:
// a peer process SIGKILLed in the middle of a stream gives the survivor
// error completions within the RC retry time, each send completing exactly
// once and never a hang, and the survivor's endpoint keeps serving its other
// peers. The peer is a forked child (tests/peer_process.h); the other peer
// is a second domain in the test's process. Without a device those cases
// are skipped with the reason (never counted as a pass). On every backend:
// sends to an endpoint closed under them fail the same way, and closing an
// endpoint discards its posted receives.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/bounded_wait.h"
#include "tests/conformance_fixture.h"
#include "tests/peer_process.h"

namespace {

using ::softfab::testing::Backend;
using ::softfab::testing::Deadline;
using ::softfab::testing::FillStreamMessage;
using ::softfab::testing::Fixture;
using ::softfab::testing::kDeviceWaitMs;
using ::softfab::testing::kStreamMessageBytes;
using ::softfab::testing::Pattern;
using ::softfab::testing::PeerProcess;
using ::softfab::testing::WaitUntil;
using Clock = std::chrono::steady_clock;

// The RC retry time the core sets up (core/wireup.cc): the ack timeout is
// 4.096 us * 2^14 (EndpointAttr::rc_timeout) and a packet is tried 6 + 1
// times before the QP fails: about 0.47 s. rxe under emulation is slow, so
// the bound allows a lot more; the measured time is printed.
constexpr double kRcRetrySeconds = 4.096e-6 * (1 << 14) * (6 + 1);
constexpr int kErrorBoundMs = 30000;
// Sends to the child in flight at once (below the core's 64 credits).
constexpr int kWindow = 16;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// "" when a verbs fabric opens here, else why not.
std::string NoVerbsDevice() {
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_VERBS;
  sf_fabric* f = nullptr;
  if (sf_fabric_open(&fa, &f, nullptr) != 0) return sf_last_error();
  sf_close(&f->fid);
  return "";
}

// The survivor's sends to one destination, each with an Op as its context
// so that every completion is checked to come exactly once.
class Stream {
 public:
  struct Op {
    std::vector<uint8_t> buf = std::vector<uint8_t>(kStreamMessageBytes);
    bool done = false;
    bool after_kill = false;  // Posted after the peer was killed.
    int err = 0;
  };

  Stream(sf_ep* ep, sf_cq* cq, sf_addr_t dest)
      : ep_(ep), cq_(cq), dest_(dest) {}

  // Posts one send (sf_sendmsg with `flags`) if the window has room;
  // returns the call's result (1 when the window is full and nothing was
  // posted).
  ssize_t Post(bool after_kill, uint64_t flags = 0) {
    if (in_flight_ >= kWindow) return 1;
    Op& op = ops_.emplace_back();
    op.after_kill = after_kill;
    FillStreamMessage(next_seq_, op.buf.data());
    iovec iov{op.buf.data(), op.buf.size()};
    const sf_msg msg{&iov, nullptr, 1, dest_, &op, 0};
    const ssize_t rc = sf_sendmsg(ep_, &msg, flags);
    if (rc == 0) {
      ++next_seq_;
      ++in_flight_;
    } else {
      ops_.pop_back();
    }
    return rc;
  }

  // Reads every completion waiting on the CQ (the survivor's only traffic
  // while the stream runs).
  void Reap() {
    while (true) {
      sf_cq_tagged_entry e;
      const ssize_t n = sf_cq_read(cq_, &e, 1);
      if (n == 1) {
        Complete(e.op_context, 0, 0);
      } else if (n == -SF_EAVAIL) {
        sf_cq_err_entry x{};
        ASSERT_EQ(sf_cq_readerr(cq_, &x, 0), 1);
        Complete(x.op_context, x.err, x.prov_errno);
      } else {
        ASSERT_EQ(n, -SF_EAGAIN) << sf_last_error();
        return;
      }
    }
  }

  int in_flight() const { return in_flight_; }
  int ok() const { return ok_; }
  int errors() const { return errors_; }
  int ok_after_kill() const { return ok_after_kill_; }
  uint32_t posted() const { return next_seq_; }
  // When the first error completion was read.
  Clock::time_point first_error() const { return first_error_; }

 private:
  void Complete(void* context, int err, int prov_errno) {
    Op* op = nullptr;
    for (Op& o : ops_) {
      if (&o == context) op = &o;
    }
    ASSERT_NE(op, nullptr) << "a completion for no send of this stream";
    ASSERT_FALSE(op->done) << "a send completed twice";
    op->done = true;
    op->err = err;
    --in_flight_;
    if (err == 0) {
      ++ok_;
      ok_after_kill_ += op->after_kill;
      return;
    }
    if (errors_++ == 0) first_error_ = Clock::now();
    // EIO (the QP failed under it) or EHOSTUNREACH (the peer had failed).
    EXPECT_TRUE(err == SF_EIO || err == SF_EHOSTUNREACH) << err;
    if (errors_ <= 3) {
      std::printf("error completion %d: err %d (%s), prov_errno %d\n", errors_,
                  err, sf_strerror(err), prov_errno);
    }
  }

  sf_ep* ep_;
  sf_cq* cq_;
  sf_addr_t dest_;
  std::deque<Op> ops_;  // Stable addresses: each is its send's context.
  uint32_t next_seq_ = 0;
  int in_flight_ = 0;
  int ok_ = 0;
  int ok_after_kill_ = 0;
  int errors_ = 0;
  Clock::time_point first_error_;
};

// Keeps posting to a peer that is gone until sf_send says EHOSTUNREACH and
// every send has completed, or kErrorBoundMs pass; `drive` reads the CQs.
// Returns whether it got there; *unreachable says whether EHOSTUNREACH came.
template <typename Drive>
bool SendUntilUnreachable(Stream* s, Drive drive, bool* unreachable) {
  *unreachable = false;
  return WaitUntil([&] { return *unreachable && s->in_flight() == 0; },
                   [&] {
                     if (!*unreachable) {
                       const ssize_t rc = s->Post(true);
                       EXPECT_TRUE(rc == 0 || rc == 1 || rc == -SF_EAGAIN ||
                                   rc == -SF_EHOSTUNREACH)
                           << rc << " " << sf_last_error();
                       *unreachable = rc == -SF_EHOSTUNREACH;
                     }
                     drive();
                   },
                   INT64_MAX, kErrorBoundMs);
}

// Streams to the child until it has `kWarmupMessages` intact, a few more
// after that, then kills it and keeps sending: every send completes, the
// ones after the kill with errors, within the bound.
void StreamKillAndCheck(PeerProcess* child, Stream* s, sf_cq* progress_cq) {
  auto drive = [&] {
    s->Reap();
    if (progress_cq) (void)sf_cq_read(progress_cq, nullptr, 0);
  };
  std::string report;
  WaitUntil([&] { return !(report = child->Report(0)).empty(); },
            [&] {
              const ssize_t rc = s->Post(false);
              ASSERT_TRUE(rc == 0 || rc == 1 || rc == -SF_EAGAIN)
                  << rc << " " << sf_last_error();
              drive();
            },
            INT64_MAX, 60000);
  ASSERT_EQ(report, "W") << "the child's first messages did not arrive";
  EXPECT_EQ(s->errors(), 0);
  // Mid-stream: sends in flight when it dies.
  for (int i = 0; i < kWindow; ++i) (void)s->Post(false);
  const uint32_t before = s->posted();
  const auto killed = Clock::now();
  ASSERT_EQ(child->Kill(), "killed");
  // Keep sending until the endpoint says the peer is gone and every send
  // has completed.
  bool unreachable = false;
  const bool settled = SendUntilUnreachable(s, drive, &unreachable);
  const double total = SecondsSince(killed);
  ASSERT_GT(s->errors(), 0)
      << "no error completion within " << total << " s; " << s->posted()
      << " sends posted (" << s->posted() - before << " after the kill), "
      << s->ok() << " ok, " << s->in_flight() << " in flight";
  const double first =
      std::chrono::duration<double>(s->first_error() - killed).count();
  std::printf(
      "killed after %u sends; first error completion %.3f s after the kill "
      "(RC retry time %.3f s); all %u sends completed (%d ok, %d errors) "
      "%.3f s after it\n",
      before, first, kRcRetrySeconds, s->posted(), s->ok(), s->errors(), total);
  EXPECT_TRUE(settled) << s->in_flight() << " sends still in flight after "
                       << total
                       << " s; sf_send said EHOSTUNREACH: " << unreachable;
  EXPECT_LT(first * 1000, kErrorBoundMs);
  EXPECT_EQ(s->ok_after_kill(), 0) << "sends posted after the kill succeeded";
}

// Peer 0 sends `count` messages to peer `to`, which receives them intact.
void ExchangeInProcess(Fixture& f, int to, int count) {
  for (int i = 0; i < count; ++i) {
    const std::vector<uint8_t> out = Pattern(3000 + i, i);
    std::vector<uint8_t> in(out.size());
    int rctx = 0, sctx = 0;
    ASSERT_EQ(sf_recv(f.peers[to].ep, in.data(), in.size(), nullptr,
                      SF_ADDR_UNSPEC, &rctx),
              0);
    ASSERT_EQ(sf_send(f.peers[0].ep, out.data(), out.size(), nullptr,
                      f.peers[0].addr[to], &sctx),
              0)
        << sf_last_error();
    bool sent = false, received = false;
    auto read = [&](int p, void* want, bool* got) {
      sf_cq_tagged_entry e;
      const ssize_t n = sf_cq_read(f.peers[p].cq, &e, 1);
      ASSERT_TRUE(n == 1 || n == -SF_EAGAIN) << "peer " << p << ": " << n;
      if (n == 1) {
        EXPECT_EQ(e.op_context, want) << "peer " << p;
        *got = true;
      }
    };
    ASSERT_TRUE(WaitUntil([&] { return sent && received; },
                          [&] {
                            read(0, &sctx, &sent);
                            read(to, &rctx, &received);
                          }))
        << "message " << i << " to in-process peer " << to;
    EXPECT_EQ(in, out) << "message " << i;
  }
}

class PeerDeathTest : public ::testing::Test {
 protected:
  // Forks the child before anything here opens a device, then skips the
  // test (saying why) when there is no device, or reads the child's name.
  // Callers return when IsSkipped() or HasFatalFailure().
  void StartChild(sf_ep_type type) {
    ASSERT_TRUE(child_.Start(type));
    if (const std::string why = NoVerbsDevice(); !why.empty()) {
      GTEST_SKIP() << "no usable RDMA device: " << why;
    }
    std::string error;
    child_name_ = child_.Hello(&error);
    ASSERT_TRUE(error.empty()) << error;
  }

  PeerProcess child_;
  std::vector<uint8_t> child_name_;
};

TEST_F(PeerDeathTest, RdmPeerKilledMidStreamFailsItsSendsOnly) {
  StartChild(SF_EP_RDM);
  if (IsSkipped() || HasFatalFailure()) return;
  // Peer 0 is the survivor; peer 1 its other, in-process, peer.
  Fixture f;
  ASSERT_TRUE(f.Open(Backend{"verbs", SF_BACKEND_VERBS}, 2));
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&f.peers[0].ep->fid, name, &len), 0);
  ASSERT_TRUE(child_.SendName(name));
  sf_addr_t child_addr = 0;
  ASSERT_EQ(sf_av_insert(f.peers[0].av, child_name_.data(), 1, &child_addr, 0,
                         nullptr),
            1);
  ExchangeInProcess(f, 1, 8);  // Both connections up before the stream.
  Stream s(f.peers[0].ep, f.peers[0].cq, child_addr);
  StreamKillAndCheck(&child_, &s, f.peers[1].cq);
  // The endpoint still serves its other peer.
  ExchangeInProcess(f, 1, 32);
}

TEST_F(PeerDeathTest, MsgPeerKilledMidStreamFailsTheConnection) {
  StartChild(SF_EP_MSG);  // Its name is its listener's.
  if (IsSkipped() || HasFatalFailure()) return;
  const std::vector<uint8_t>& listener = child_name_;
  Fixture f;
  ASSERT_TRUE(f.Open(Backend{"verbs", SF_BACKEND_VERBS}, 1));
  sf_eq* eq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &eq, nullptr), 0);
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(f.AddEndpoint(0, SF_EP_MSG, {&eq->fid}, true, &cq, &ep));
  ASSERT_TRUE(child_.SendName(listener.data()));  // Any name: not used.
  ASSERT_EQ(sf_connect(ep, listener.data(), nullptr, 0), 0) << sf_last_error();
  alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  ASSERT_GT(sf_eq_sread(eq, &event, buf, sizeof buf, kDeviceWaitMs, 0), 0)
      << sf_last_error();
  ASSERT_EQ(event, static_cast<uint32_t>(SF_CONNECTED));
  {
    Stream s(ep, cq, 0);
    StreamKillAndCheck(&child_, &s, nullptr);
  }
  // The connection is reported gone.
  ssize_t n = 0;
  EXPECT_TRUE(WaitUntil(
      [&] {
        return (n = sf_eq_read(eq, &event, buf, sizeof buf, 0)) != -SF_EAGAIN;
      },
      [&] { (void)sf_cq_read(cq, nullptr, 0); }));
  if (n == -SF_EAVAIL) {
    sf_eq_err_entry x{};
    ASSERT_EQ(sf_eq_readerr(eq, &x, 0), static_cast<ssize_t>(sizeof x));
    ADD_FAILURE() << "an error event (" << x.err << ") instead of SF_SHUTDOWN";
  } else {
    EXPECT_GT(n, 0);
    EXPECT_EQ(event, static_cast<uint32_t>(SF_SHUTDOWN));
  }
  EXPECT_EQ(sf_close(&ep->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
  EXPECT_EQ(sf_close(&eq->fid), 0);
}

}  // namespace

// ---- An endpoint closed under its peer, on every backend ----

class EndpointClosedTest : public ::softfab::testing::PerBackendTest {
 protected:
  bool verbs() const { return backend().backend == SF_BACKEND_VERBS; }
};

// Peer 1 closes its endpoint (its QPs are destroyed); peer 0 keeps sending
// to it: on verbs the first send runs out of RC retries and the rest are
// flushed. Each completes exactly once, with an error, sf_send then says
// EHOSTUNREACH, and peer 0 still serves peer 2.
TEST_P(EndpointClosedTest, SendsToAClosedEndpointFailOnce) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 3));
  ExchangeInProcess(f, 1, 1);  // Connected.
  ExchangeInProcess(f, 2, 1);
  ASSERT_EQ(sf_close(&f.peers[1].ep->fid), 0);
  f.peers[1].ep = nullptr;
  Stream s(f.peers[0].ep, f.peers[0].cq, f.peers[0].addr[1]);
  for (int i = 0; i < kWindow; ++i) {
    ASSERT_EQ(s.Post(true), 0) << sf_last_error();  // Queued on the QP.
  }
  bool unreachable = false;
  EXPECT_TRUE(SendUntilUnreachable(
      &s, [&] { s.Reap(); }, &unreachable))
      << s.in_flight() << " of " << s.posted()
      << " sends never completed (EHOSTUNREACH seen: " << unreachable << ")";
  EXPECT_GE(s.posted(), static_cast<uint32_t>(kWindow));
  EXPECT_EQ(s.ok(), 0);
  EXPECT_EQ(s.errors(), static_cast<int>(s.posted()));
  ExchangeInProcess(f, 2, 8);
}

// Sends that the peer's device took but its core never acknowledged
// (delivery-complete, and the same holds for rendezvous and
// match-complete) when the peer's endpoint closes: each must complete
// once, with an error, once the peer is known to have failed.
// Hangs on every backend until fixed: Endpoint::FailPeer
// (core/wireup.cc) completes only the sends still queued for the peer,
// not the ones whose SEND completed at the device and wait for the peer's
// acknowledgement (MaybeFinishTx, core/send.cc); nothing completes those.
TEST_P(EndpointClosedTest, SendsAwaitingThePeersAckFailWhenItCloses) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  ExchangeInProcess(f, 1, 1);  // Connected.
  // Peer 1's core never runs from here on: its device takes the messages,
  // nothing delivers them.
  Stream s(f.peers[0].ep, f.peers[0].cq, f.peers[0].addr[1]);
  constexpr int kUndelivered = 4;
  for (int i = 0; i < kUndelivered; ++i) {
    ASSERT_EQ(s.Post(false, SF_DELIVERY_COMPLETE), 0) << sf_last_error();
  }
  const Deadline settle(verbs() ? 300 : 0);
  for (int r = 0; r < 2000 || !settle.passed(); ++r) s.Reap();
  ASSERT_EQ(s.in_flight(), kUndelivered) << "delivered without the core";
  ASSERT_EQ(sf_close(&f.peers[1].ep->fid), 0);
  f.peers[1].ep = nullptr;
  bool unreachable = false;
  EXPECT_TRUE(SendUntilUnreachable(
      &s, [&] { s.Reap(); }, &unreachable))
      << s.in_flight() << " of " << s.posted()
      << " sends never completed (EHOSTUNREACH seen: " << unreachable << ")";
  EXPECT_EQ(s.ok(), 0);
}

// fi_close discards what is posted to the endpoint: no completion ever
// names its receives (their buffers are the application's again once
// sf_close returns), and the CQ slots they held come back.
TEST_P(EndpointClosedTest, ClosingDiscardsPostedReceivesAndFreesTheirSlots) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_cq_attr ca{};
  ca.size = 4;
  ca.format = SF_CQ_FORMAT_TAGGED;
  sf_cq* cq = nullptr;
  ASSERT_EQ(sf_cq_open(f.peers[1].domain, &ca, &cq, nullptr), 0);
  auto open_ep = [&](sf_ep** ep) {
    sf_ep_attr ea{};
    ea.type = SF_EP_RDM;
    ea.caps = SF_MSG;
    ASSERT_EQ(sf_endpoint(f.peers[1].domain, &ea, ep, nullptr), 0);
    ASSERT_EQ(sf_ep_bind(*ep, &cq->fid, SF_TRANSMIT | SF_RECV), 0);
    ASSERT_EQ(sf_ep_bind(*ep, &f.peers[1].av->fid, 0), 0);
    ASSERT_EQ(sf_enable(*ep), 0);
  };
  std::vector<uint8_t> bufs(4 * 64);
  for (int round = 0; round < 2; ++round) {
    sf_ep* ep = nullptr;
    open_ep(&ep);
    if (HasFatalFailure()) return;
    // As many receives as the CQ has room for (each holds a slot).
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(sf_recv(ep, &bufs[i * 64], 64, nullptr, SF_ADDR_UNSPEC,
                        &bufs[i * 64]),
                0)
          << "round " << round << ", receive " << i << ": " << sf_last_error();
    }
    if (round == 0) {
      EXPECT_EQ(sf_recv(ep, bufs.data(), 64, nullptr, SF_ADDR_UNSPEC, nullptr),
                -SF_EAGAIN)
          << "a fifth receive found room in a CQ of 4";
    }
    ASSERT_EQ(sf_close(&ep->fid), 0);
    const Deadline settle(verbs() ? 300 : 0);
    for (int r = 0; r < 2000 || !settle.passed(); ++r) f.Progress();
    sf_cq_tagged_entry e;
    EXPECT_EQ(sf_cq_read(cq, &e, 1), -SF_EAGAIN)
        << "a completion for a receive of a closed endpoint";
  }
  EXPECT_EQ(sf_close(&cq->fid), 0);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(EndpointClosedTest);
