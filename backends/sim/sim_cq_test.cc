// Tests of completion queues (sim_cq.cc): overrun (CQ_ERR, QP_FATAL, nothing
// lost; issue 3, item 9) and the time hold of polling (sim_fabric.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(CqTest, OverrunRaisesCqErrAndLosesNothing) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0, 1 << 16, /*cqe=*/4),
           b = MakeEndpoint(f.get(), 1);
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge ss = a.Sge(0, 8), rs = b.Sge(0, 8);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(PostRecv(qb, i, &rs, 1).ok());
    ASSERT_TRUE(PostSend(qa, i, &ss, 1).ok());
  }
  f->RunUntilIdle();
  auto ev = Events(a.dev);
  ASSERT_GE(ev.size(), 1u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kCqErr);
  EXPECT_EQ(ev[0].cq_handle, a.scq->handle());
  EXPECT_TRUE(HasEvent(ev, tp::AsyncEventType::kQpFatal));
  EXPECT_EQ(qa->state(), tp::QpState::kError);
  EXPECT_GT(f->stats().cq_overruns, 0u);
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s[i].wr_id, static_cast<uint64_t>(i));
  EXPECT_EQ(a.scq->Poll(-1, nullptr), -EINVAL);
}

// ---------------------------------------------------------------- the time
// hold (sim_fabric.h): an empty poll does not move the clock past a completion
// that another node's owner has not read yet.

// Two nodes ping-pong RC sends in one thread, each polling its receive CQ in
// turn (round robin) and answering when a message arrives. Send completions go
// to send CQs nobody polls. Links: `latency_ns`, unlimited bandwidth, so one
// way takes exactly latency_ns.
struct PingPong {
  static constexpr uint64_t kLatencyNs = 1000;
  RcPair p;
  std::vector<uint64_t> round_trips_ns;
  uint64_t polls = 0;

  static SimConfig Config() {
    SimConfig c = TwoNodes();
    c.default_link.latency_ns = kLatencyNs;
    c.default_link.bandwidth_bps = 0;
    return c;
  }
  explicit PingPong(const RcParams& prm = {}) : p(Config(), prm, 256) {
    for (uint64_t i = 0; i < 128; ++i) {
      tp::Sge ra = p.a.Sge(64, 8), rb = p.b.Sge(64, 8);
      EXPECT_TRUE(PostRecv(p.qa, i, &ra, 1).ok());
      EXPECT_TRUE(PostRecv(p.qb, i, &rb, 1).ok());
    }
  }

  // Plays `rounds` round trips; `before_ping` runs as each ping is posted.
  template <typename F>
  void Play(int rounds, F before_ping) {
    tp::WorkCompletion wc;
    tp::Sge sa = p.a.Sge(0, 8), sb = p.b.Sge(0, 8);
    // The poll loop runs from the start: both receive CQs are polled once.
    ASSERT_EQ(p.a.rcq->Poll(1, &wc), 0);
    ASSERT_EQ(p.b.rcq->Poll(1, &wc), 0);
    for (int r = 0; r < rounds; ++r) {
      before_ping();
      const uint64_t t0 = p.f->clock().NowNs();
      ASSERT_TRUE(PostSend(p.qa, r, &sa, 1).ok());
      bool back = false;
      for (int spin = 0; spin < 100 && !back; ++spin) {
        ++polls;
        if (p.a.rcq->Poll(1, &wc) == 1) {
          ASSERT_EQ(wc.status, tp::WcStatus::kSuccess);
          round_trips_ns.push_back(p.f->clock().NowNs() - t0);
          back = true;
          break;
        }
        ++polls;
        if (p.b.rcq->Poll(1, &wc) == 1) {
          ASSERT_EQ(wc.status, tp::WcStatus::kSuccess);
          ASSERT_TRUE(PostSend(p.qb, r, &sb, 1).ok());
        }
      }
      ASSERT_TRUE(back) << "round " << r;
    }
  }
};

TEST(TimeHoldTest, RoundRobinPingPongRoundTripIsTwoLatencies) {
  // An ack timeout of 4.096 us x 2^14 = 67 ms: before the hold, A's empty poll
  // ran on to that (no-op) timer before B had read the ping, so every round
  // trip took 67 ms.
  PingPong pp;
  pp.Play(10, [] {});
  ASSERT_EQ(pp.round_trips_ns.size(), 10u);
  for (uint64_t rtt : pp.round_trips_ns) {
    EXPECT_EQ(rtt, 2 * PingPong::kLatencyNs);
  }
  EXPECT_EQ(pp.p.f->clock().NowNs(), 10 * 2 * PingPong::kLatencyNs);
  EXPECT_EQ(pp.p.f->stats().retransmits, 0u);
  EXPECT_GT(pp.p.f->stats().polls_held, 0u);
  EXPECT_EQ(pp.p.f->stats().hold_releases, 0u);
}

TEST(TimeHoldTest, ProtocolTimerDoesNotFireBeforeThePeerAnswers) {
  // A protocol timer (a connection-request retry, say) 50 us after each ping,
  // and no RC ack timer: the answer comes 2 us after the ping, so the loop
  // never sees the clock at the timer.
  RcParams prm;
  prm.timeout = 0;
  PingPong pp(prm);
  std::vector<uint64_t> deadlines;
  pp.Play(5, [&] {
    deadlines.push_back(pp.p.f->clock().NowNs() + 50'000);
    pp.p.a.dev->ScheduleWakeup(deadlines.back());
  });
  ASSERT_EQ(pp.round_trips_ns.size(), 5u);
  for (uint64_t rtt : pp.round_trips_ns) {
    EXPECT_EQ(rtt, 2 * PingPong::kLatencyNs);
  }
  EXPECT_LT(pp.p.f->clock().NowNs(), deadlines.front());
  // Still ahead: the five wakeups and the ACK of the last answer.
  EXPECT_EQ(pp.p.f->pending_events(), 6u);
}

TEST(TimeHoldTest, SameCallsSameDigest) {
  uint64_t digest[2];
  for (uint64_t& d : digest) {
    PingPong pp;
    pp.Play(20, [] {});
    d = pp.p.f->digest();
  }
  EXPECT_EQ(digest[0], digest[1]);
}

TEST(TimeHoldTest, UnreadCqDoesNotLivelockAPoller) {
  SimConfig c = PingPong::Config();
  RcPair p(c);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
  tp::WorkCompletion wc;
  ASSERT_EQ(p.b.rcq->Poll(1, &wc), 0);  // B's CQ is watched ...
  // ... but B never polls it again: its receive completion stays unread while
  // A spins on its send CQ, whose completion (the ACK) comes one latency later.
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  int polls = 0;
  int n = 0;
  while (n == 0 && polls < 10) {
    n = p.a.scq->Poll(1, &wc);
    ++polls;
  }
  ASSERT_EQ(n, 1);
  EXPECT_EQ(polls, 2);  // one poll held, the next one releases the hold
  EXPECT_EQ(p.f->clock().NowNs(), 2 * PingPong::kLatencyNs);
  EXPECT_EQ(p.f->stats().polls_held, 1u);
  EXPECT_EQ(p.f->stats().hold_releases, 1u);
  // B's CQ is no longer watched, so it holds nothing: the next send completes
  // at the first poll, and a far wakeup is reached too.
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 2u);
  p.a.dev->ScheduleWakeup(1'000'000'000);
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 0);
  EXPECT_EQ(p.f->clock().NowNs(), 1'000'000'000u);
  EXPECT_EQ(p.f->stats().polls_held, 1u);
  // Both messages wait in B's CQ, unread but not lost.
  tp::WorkCompletion two[4];
  ASSERT_EQ(p.b.rcq->Poll(4, two), 2);
}

TEST(TimeHoldTest, NeverPolledCqHoldsNothing) {
  // B's receive CQ is never polled: A's first poll runs straight to its send
  // completion, as on hardware.
  RcPair p(PingPong::Config());
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  tp::WorkCompletion wc;
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  EXPECT_EQ(p.f->clock().NowNs(), 2 * PingPong::kLatencyNs);
  EXPECT_EQ(p.f->stats().polls_held, 0u);
}

}  // namespace
}  // namespace softfab::sim::testing
