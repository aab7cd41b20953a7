// Tests of the fault plan (sim_links_faults.cc): timed link down/up with port
// events, a QP forced to ERROR, packet faults scoped by node, QP, opcode and
// time window.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(FaultTest, LinkDownAndUpRaisesPortEventsAndRecovers) {
  SimConfig c = TwoNodes();
  TimedFault down{TimedFaultKind::kLinkDown, 1000, 1};
  TimedFault up{TimedFaultKind::kLinkUp, 30'000'000, 1};
  c.faults.timed_faults = {down, up};
  RcParams prm;
  prm.timeout = 12;  // 16.7 ms
  RcPair p(c, prm);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  p.f->RunUntil(2000);
  tp::PortAttr pa;
  ASSERT_TRUE(p.b.dev->QueryPort(1, &pa).ok());
  EXPECT_EQ(pa.state, tp::PortState::kDown);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_GT(p.f->clock().NowNs(), 30'000'000u);
  auto ev = Events(p.b.dev);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kPortErr);
  EXPECT_EQ(ev[1].event_type, tp::AsyncEventType::kPortActive);
}

TEST(FaultTest, QpForcedToErrorAtATime) {
  RcPair probe(TwoNodes());
  SimConfig c = TwoNodes();
  TimedFault qf{TimedFaultKind::kQpError, 5000, 0};
  qf.qp_num = probe.qa->qp_num();  // QP numbers are deterministic per device
  c.faults.timed_faults = {qf};
  RcParams prm;
  prm.rnr_retry = 7;
  RcPair p(c, prm);
  ASSERT_EQ(p.qa->qp_num(), qf.qp_num);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(
      PostSend(p.qa, 1, &ss, 1).ok());  // RNR forever: no receive posted
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kWrFlushErr);
  EXPECT_EQ(p.qa->state(), tp::QpState::kError);
  auto ev = Events(p.a.dev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kQpFatal);
  EXPECT_EQ(ev[0].time_ns, 5000u);
}

TEST(FaultTest, ScopedByNodeAndQp) {
  // Drop everything node 0 sends on one QP: that pair fails, a second pair is
  // untouched.
  RcPair probe(TwoNodes());
  SimConfig c = TwoNodes();
  PacketFault d{PacketFaultKind::kDrop, 1.0};
  d.src_node = 0;
  d.qp_num = probe.qa->qp_num();
  c.faults.packet_faults.push_back(d);
  RcParams prm;
  prm.timeout = 5;
  prm.retry_cnt = 1;
  RcPair p(c, prm);
  tp::QueuePair* qa2 = Must(p.a.pd->CreateQp(RcInit(p.a)));
  tp::QueuePair* qb2 = Must(p.b.pd->CreateQp(RcInit(p.b)));
  Connect(qa2, 0, qb2, 1, prm);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostRecv(qb2, 2, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  ASSERT_TRUE(PostSend(qa2, 2, &ss, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 2u);
  std::map<uint64_t, tp::WcStatus> by_id;
  for (auto& wc : s) by_id[wc.wr_id] = wc.status;
  EXPECT_EQ(by_id[1], tp::WcStatus::kRetryExcErr);
  EXPECT_EQ(by_id[2], tp::WcStatus::kSuccess);
  // Node and opcode scope: dropping the SENDs node 1 puts on the wire leaves
  // node 0's SEND and node 1's ACK alone. (A QP scope alone matches the ACKs to
  // that QP too.)
  SimConfig c2 = TwoNodes();
  d.src_node = 1;
  d.qp_num = 0;
  d.opcode_mask = kFaultOpSend;
  c2.faults.packet_faults = {d};
  RcPair q(c2, prm);
  tp::Sge qr = q.b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(q.qb, 1, &qr, 1).ok());
  tp::Sge qs = q.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(q.qa, 1, &qs, 1).ok());
  EXPECT_EQ(PollOne(q.a.scq).status, tp::WcStatus::kSuccess);
}

TEST(FaultTest, FixedDelayScopedByOpcodeAndWindow) {
  SimConfig c = TwoNodes();
  PacketFault d{PacketFaultKind::kDelayFixed, 1.0};
  d.delay_ns = 100'000;
  d.opcode_mask = kFaultOpAck;
  d.start_ns = 0;
  d.end_ns = 50'000;
  c.faults.packet_faults.push_back(d);
  RcPair p(c);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostRecv(p.qb, 2, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  tp::WorkCompletion wc;
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  const uint64_t t1 = p.f->clock().NowNs();
  EXPECT_GT(t1, 100'000u);  // the ACK was held back
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  EXPECT_LT(p.f->clock().NowNs() - t1, 5'000u);  // outside the window: no delay
}

}  // namespace
}  // namespace softfab::sim::testing
