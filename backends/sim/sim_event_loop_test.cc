// Tests of the event loop and virtual clock (sim_event_loop.cc): busy polling
// advances time, Step and RunUntil, two fabrics in one process never influence
// each other, and the trace of the last events.
#include <gtest/gtest.h>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(ProgressTest, BusyPollingAdvancesVirtualTime) {
  RcPair p(TwoNodes());
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  EXPECT_EQ(p.f->clock().NowNs(), 0u);
  tp::WorkCompletion wc;
  int n = 0;
  for (int spins = 0; spins < 100 && n == 0; ++spins) n = p.b.rcq->Poll(1, &wc);
  ASSERT_EQ(n, 1);
  EXPECT_GT(p.f->clock().NowNs(), 0u);
  EXPECT_EQ(p.b.dev->clock().NowNs(), p.f->clock().NowNs());
}

TEST(ProgressTest, StepAndRunUntil) {
  RcPair p(TwoNodes());
  EXPECT_FALSE(p.f->Step());
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  EXPECT_EQ(p.f->pending_events(), 2u);  // the packet and the ack timer
  EXPECT_EQ(p.f->RunUntil(10), 0u);
  EXPECT_EQ(p.f->clock().NowNs(), 10u);
  EXPECT_TRUE(p.f->Step());  // the packet arrives
  EXPECT_GT(p.f->clock().NowNs(), 1000u);
}

TEST(IsolationTest, TwoFabricsInterleavedMatchEachRunAlone) {
  auto run = [](SimFabric* f, Endpoint& a, Endpoint& b, tp::QueuePair* qa,
                tp::QueuePair* qb, int i) {
    tp::Sge rs = b.Sge(0, 64), ss = a.Sge(0, 64);
    EXPECT_TRUE(PostRecv(qb, i, &rs, 1).ok());
    EXPECT_TRUE(PostSend(qa, i, &ss, 1).ok());
    f->RunUntilIdle();
  };
  SimConfig c = TwoNodes(99);
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 0.3});
  RcParams prm;
  prm.timeout = 6;
  RcPair x(c, prm), y(c, prm), alone(c, prm);
  for (int i = 0; i < 50; ++i) {
    run(x.f.get(), x.a, x.b, x.qa, x.qb, i);
    run(y.f.get(), y.a, y.b, y.qa, y.qb, i);
  }
  for (int i = 0; i < 50; ++i)
    run(alone.f.get(), alone.a, alone.b, alone.qa, alone.qb, i);
  EXPECT_EQ(x.f->digest(), alone.f->digest());
  EXPECT_EQ(y.f->digest(), alone.f->digest());
  EXPECT_EQ(x.f->clock().NowNs(), alone.f->clock().NowNs());
}

TEST(TraceTest, RecordsTheLastEvents) {
  SimConfig c = TwoNodes();
  c.trace_capacity = 4;
  RcPair p(c);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
    ASSERT_TRUE(PostSend(p.qa, i, &ss, 1).ok());
  }
  p.f->RunUntilIdle();
  auto t = p.f->Trace();
  ASSERT_EQ(t.size(), 4u);
  for (size_t i = 1; i < t.size(); ++i)
    EXPECT_LE(t[i - 1].time_ns, t[i].time_ns);
  // The last packet is the last event: everything sent was acknowledged, so
  // the ACK timer was disarmed and its queued event never runs (it used to be
  // the last event, moving the clock by 67 ms for nothing).
  for (const TraceRecord& r : t) EXPECT_EQ(r.kind, TraceKind::kPacketArrive);
  EXPECT_EQ(p.f->stats().retransmits, 0u);
  EXPECT_LT(p.f->clock().NowNs(), 1'000'000u);
}

}  // namespace
}  // namespace softfab::sim::testing
