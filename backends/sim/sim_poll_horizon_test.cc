// Tests of the poll horizon (SimFabric::SetPollHorizon, sim_fabric.h): a poll
// of an empty CQ runs no event later than the horizon, so a wait with a
// deadline (sf_cq_sread) cannot be carried past it; next_event_ns() tells
// the waiter how far the next event is.
#include <gtest/gtest.h>

#include <cstdint>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

constexpr uint64_t kLatencyNs = 200'000'000;  // 200 ms one way.

// No ack timeout: nothing happens between a packet's departure and arrival.
RcParams NoAckTimeout() {
  RcParams p;
  p.timeout = 0;
  return p;
}

SimConfig FarLinks() {
  SimConfig c = TwoNodes();
  c.default_link.latency_ns = kLatencyNs;
  c.default_link.bandwidth_bps = 0;
  return c;
}

// A SEND 200 ms away: a poll under a 30 ms horizon returns empty at no later
// than 30 ms (it used to run on to the arrival); lifting the horizon lets
// the next poll reach the message.
TEST(PollHorizonTest, PollStopsAtTheHorizon) {
  RcPair p(FarLinks(), NoAckTimeout());
  tp::Sge ss = p.a.Sge(0, 8), rs = p.b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  const uint64_t start = p.f->clock().NowNs();
  EXPECT_EQ(p.f->next_event_ns(), start + kLatencyNs);
  EXPECT_EQ(p.f->poll_horizon_ns(), UINT64_MAX);
  p.f->SetPollHorizon(start + 30'000'000);
  tp::WorkCompletion wc;
  EXPECT_EQ(p.b.rcq->Poll(1, &wc), 0);
  EXPECT_LE(p.f->clock().NowNs(), start + 30'000'000);
  EXPECT_EQ(p.f->next_event_ns(), start + kLatencyNs);  // Still pending.
  // An event exactly at the horizon runs.
  p.f->SetPollHorizon(start + kLatencyNs);
  ASSERT_EQ(p.b.rcq->Poll(1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(p.f->clock().NowNs(), start + kLatencyNs);
  p.f->SetPollHorizon(UINT64_MAX);
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);  // The ack, another 200 ms on.
  EXPECT_EQ(p.f->clock().NowNs(), start + 2 * kLatencyNs);
}

// Step() and RunUntil() ignore the horizon; an idle fabric has no next event.
TEST(PollHorizonTest, ExplicitDrivingIgnoresIt) {
  RcPair p(FarLinks(), NoAckTimeout());
  tp::Sge ss = p.a.Sge(0, 8), rs = p.b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  p.f->SetPollHorizon(0);
  p.f->RunUntilIdle();
  EXPECT_EQ(p.f->next_event_ns(), UINT64_MAX);
  EXPECT_EQ(p.f->clock().NowNs(), 2 * kLatencyNs);
  EXPECT_EQ(Drain(p.f.get(), p.b.rcq).size(), 1u);
}

// A run whose polls never reach the horizon is the run without one.
TEST(PollHorizonTest, UnreachedHorizonChangesNothing) {
  uint64_t digest[2];
  for (int with : {0, 1}) {
    RcPair p(FarLinks(), NoAckTimeout());
    if (with) p.f->SetPollHorizon(10 * kLatencyNs);
    tp::Sge ss = p.a.Sge(0, 8), rs = p.b.Sge(0, 8);
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
      ASSERT_TRUE(PostSend(p.qa, i, &ss, 1).ok());
    }
    for (int i = 0; i < 4; ++i) EXPECT_EQ(PollOne(p.b.rcq).wr_id, i + 0u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(PollOne(p.a.scq).wr_id, i + 0u);
    digest[with] = p.f->digest();
  }
  EXPECT_EQ(digest[0], digest[1]);
}

}  // namespace
}  // namespace softfab::sim::testing
