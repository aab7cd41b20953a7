// QP numbering (SimConfig::qp_number_cycle): by default a device never gives
// a QP number again; with a cycle it does, as rxe and ConnectX do once their
// numbers wrap, and what is still queued for the destroyed QP (its timers, its
// packets on the wire) must not act for the QP given the number.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "backends/sim/internal/common.h"
#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

constexpr uint64_t kMs = 1000000;

TEST(QpNumbersTest, ByDefaultANumberIsNeverGivenAgain) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint e = MakeEndpoint(f.get(), 0);
  tp::QueuePair* q0 = Must(e.pd->CreateQp(RcInit(e)));
  const uint32_t first = q0->qp_num();
  ASSERT_TRUE(q0->Destroy().ok());
  tp::QueuePair* q1 = Must(e.pd->CreateQp(RcInit(e)));
  EXPECT_EQ(q1->qp_num(), first + 1);
}

TEST(QpNumbersTest, NumbersCycleAndAFreedOneComesBackAfterTheOthers) {
  SimConfig c = TwoNodes();
  c.qp_number_cycle = 3;
  auto f = CreateSimFabric(c);
  Endpoint e = MakeEndpoint(f.get(), 0);
  tp::DeviceAttr attr;
  ASSERT_TRUE(e.dev->QueryDevice(&attr).ok());
  EXPECT_EQ(attr.max_qp, 3);
  tp::QueuePair* q[3];
  for (auto& qp : q) qp = Must(e.pd->CreateQp(RcInit(e)));
  const uint32_t base = q[0]->qp_num();
  EXPECT_EQ(q[1]->qp_num(), base + 1);
  EXPECT_EQ(q[2]->qp_num(), base + 2);
  // All three in use: refused, nothing created.
  auto full = e.pd->CreateQp(RcInit(e));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), ENOMEM);
  // The search starts after the last number given: 0 then 1 come back in
  // that order although 1 was freed first.
  ASSERT_TRUE(q[1]->Destroy().ok());
  ASSERT_TRUE(q[0]->Destroy().ok());
  EXPECT_EQ(Must(e.pd->CreateQp(RcInit(e)))->qp_num(), base);
  EXPECT_EQ(Must(e.pd->CreateQp(RcInit(e)))->qp_num(), base + 1);
}

TEST(QpNumbersTest, TheNextFreeNumberAfterTheLastGivenNotTheLowest) {
  SimConfig c = TwoNodes();
  c.qp_number_cycle = 3;
  auto f = CreateSimFabric(c);
  Endpoint e = MakeEndpoint(f.get(), 0);
  tp::QueuePair* q0 = Must(e.pd->CreateQp(RcInit(e)));
  const uint32_t base = q0->qp_num();
  ASSERT_EQ(Must(e.pd->CreateQp(RcInit(e)))->qp_num(), base + 1);
  ASSERT_TRUE(q0->Destroy().ok());
  // base is free and lowest, but base + 2 comes first (rxe's cyclic pool).
  EXPECT_EQ(Must(e.pd->CreateQp(RcInit(e)))->qp_num(), base + 2);
  EXPECT_EQ(Must(e.pd->CreateQp(RcInit(e)))->qp_num(), base);
}

TEST(QpNumbersTest, TheCycleFitsTheNumbers) {
  SimConfig c = TwoNodes();
  c.qp_number_cycle = internal::kPsnMask - internal::kQpnBase + 1;
  EXPECT_FALSE(ValidateSimConfig(c).ok());
  c.qp_number_cycle = internal::kPsnMask - internal::kQpnBase;
  ASSERT_TRUE(ValidateSimConfig(c).ok());
  // The largest cycle works (its table grows only as numbers are given).
  auto f = CreateSimFabric(c);
  Endpoint e = MakeEndpoint(f.get(), 0);
  const uint32_t base = Must(e.pd->CreateQp(RcInit(e)))->qp_num();
  EXPECT_EQ(Must(e.pd->CreateQp(RcInit(e)))->qp_num(), base + 1);
  c.qp_number_cycle = 0;
  EXPECT_TRUE(ValidateSimConfig(c).ok());
}

// A destroyed QP's ACK timer, still queued when its number is given again,
// is dropped when it comes due: it does not re-arm (or fire) the new QP's.
TEST(QpNumbersTest, ADestroyedQpsTimerLeavesTheNewQpsAlone) {
  SimConfig c = TwoNodes();
  c.qp_number_cycle = 1;  // each node: one QP number
  RcPair p(c);
  const uint32_t qpn_a = p.qa->qp_num();
  const uint32_t qpn_b = p.qb->qp_num();
  const uint64_t t0 = p.f->clock().NowNs();
  tp::Sge s = p.a.Sge(0, 8);
  ASSERT_TRUE(
      PostSend(p.qa, 1, &s, 1, tp::WrOpcode::kSend, tp::kSendSignaled).ok());
  ASSERT_EQ(p.f->pending_events(), 2u);  // the packet and qa's ACK timer
  ASSERT_TRUE(p.qa->Destroy().ok());
  ASSERT_TRUE(p.qb->Destroy().ok());
  // The clock moves 1 ms on with the old timer (at t0 + 67.1 ms) queued
  // behind a wakeup at 60 ms.
  p.a.dev->ScheduleWakeup(t0 + kMs);
  p.a.dev->ScheduleWakeup(t0 + 60 * kMs);
  p.f->RunUntil(t0 + kMs);
  ASSERT_EQ(p.f->pending_events(), 2u);  // the wakeup and the old timer
  // Node 0's next QP gets the same number; its peer does not answer (node
  // 1's number is free), so its own timer stays armed, due at 68.1 ms.
  tp::QueuePair* qa2 = Must(p.a.pd->CreateQp(RcInit(p.a)));
  ASSERT_EQ(qa2->qp_num(), qpn_a);
  ASSERT_TRUE(ToInit(qa2).ok());
  ASSERT_TRUE(ToRtr(qa2, 1, qpn_b).ok());
  ASSERT_TRUE(ToRts(qa2).ok());
  ASSERT_TRUE(
      PostSend(qa2, 2, &s, 1, tp::WrOpcode::kSend, tp::kSendSignaled).ok());
  // Past the old timer, before the new one: only the new one is left.
  p.f->RunUntil(t0 + 67500000);
  EXPECT_EQ(p.f->pending_events(), 1u);
  EXPECT_EQ(p.f->next_event_ns(), t0 + kMs + 67108864);
}

// The same for an RNR timer: the destroyed QP's, due first, does not end the
// new QP's RNR wait (which would send again at the old QP's PSN).
TEST(QpNumbersTest, ADestroyedQpsRnrTimerLeavesTheNewQpsWaitAlone) {
  SimConfig c = TwoNodes();
  c.qp_number_cycle = 1;
  RcParams quick;  // the old responder asks for 10.24 ms
  quick.min_rnr_timer = 20;
  RcPair p(c, quick);
  const uint32_t qpn_a = p.qa->qp_num();
  const uint64_t t0 = p.f->clock().NowNs();
  tp::Sge s = p.a.Sge(0, 8);
  // No receive at qb: an RNR NAK, and qa waits 10.24 ms to send again.
  ASSERT_TRUE(PostSend(p.qa, 1, &s, 1).ok());
  p.f->RunUntil(t0 + 100000);
  ASSERT_EQ(p.f->stats().rnr_naks, 1u);
  ASSERT_TRUE(p.qa->Destroy().ok());
  ASSERT_TRUE(p.qb->Destroy().ok());
  // The new pair: its responder asks for 655.36 ms (code 0).
  RcParams slow;
  slow.min_rnr_timer = 0;
  tp::QueuePair* qa2 = Must(p.a.pd->CreateQp(RcInit(p.a)));
  tp::QueuePair* qb2 = Must(p.b.pd->CreateQp(RcInit(p.b)));
  ASSERT_EQ(qa2->qp_num(), qpn_a);
  Connect(qa2, 0, qb2, 1, slow);
  ASSERT_TRUE(PostSend(qa2, 2, &s, 1).ok());
  const uint64_t retransmits = p.f->stats().retransmits;
  // Past the old QP's RNR timer: qa2 is still waiting, nothing sent again.
  p.f->RunUntil(t0 + 20 * kMs);
  EXPECT_EQ(p.f->stats().rnr_naks, 2u);
  EXPECT_EQ(p.f->stats().retransmits, retransmits);
}

// A packet of a destroyed QP still on the wire when its number is given
// again is not served from the new QP's send queue: it is dropped, as if its
// QP were gone (the simulator reads a SEND's payload through the sender's
// work request).
TEST(QpNumbersTest, ADestroyedQpsPacketTakesNothingFromTheNewQp) {
  SimConfig c = TwoNodes();
  c.qp_number_cycle = 1;
  RcPair p(c);
  const uint32_t qpn_a = p.qa->qp_num();
  tp::Sge r = p.b.Sge(0, 64);
  ASSERT_TRUE(PostRecv(p.qb, 7, &r, 1).ok());
  std::memcpy(p.a.buf.data(), "old!", 4);
  tp::Sge s = p.a.Sge(0, 4);
  ASSERT_TRUE(PostSend(p.qa, 1, &s, 1).ok());
  ASSERT_TRUE(p.qa->Destroy().ok());  // the SEND is on the wire
  tp::QueuePair* qa2 = Must(p.a.pd->CreateQp(RcInit(p.a)));
  ASSERT_EQ(qa2->qp_num(), qpn_a);
  ASSERT_TRUE(ToInit(qa2).ok());
  ASSERT_TRUE(ToRtr(qa2, 1, 0x7777).ok());  // somewhere else
  ASSERT_TRUE(ToRts(qa2).ok());
  std::memcpy(p.a.buf.data() + 8, "new!", 4);
  tp::Sge s2 = p.a.Sge(8, 4);
  ASSERT_TRUE(PostSend(qa2, 2, &s2, 1).ok());
  const uint64_t dropped = p.f->stats().packets_dropped;
  p.f->RunUntil(p.f->clock().NowNs() + kMs);
  // Both dropped: the old SEND (no work request) and qa2's (no QP there).
  EXPECT_EQ(p.f->stats().packets_dropped, dropped + 2);
  EXPECT_TRUE(Drain(p.f.get(), p.b.rcq).empty());
  EXPECT_NE(std::memcmp(p.b.buf.data(), "new!", 4), 0);
}

}  // namespace
}  // namespace softfab::sim::testing
