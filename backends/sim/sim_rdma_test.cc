// Tests of RDMA WRITE and READ that only the simulator can run (issue 3, item
// 11): reads surviving lost responses and long lossy reads, fence against a
// read in flight, and max_rd_atomic's effect on timing. WRITE, READ,
// WRITE_WITH_IMM, its RNR and inline data on every backend are in
// tests/transport/.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(RdmaTest, ReadsSurviveLostResponses) {
  SimConfig c = TwoNodes(3);
  PacketFault d{PacketFaultKind::kDrop, 0.3};
  d.opcode_mask = kFaultOpReadResp | kFaultOpReadReq;
  c.faults.packet_faults.push_back(d);
  RcParams prm;
  prm.timeout = 8;
  RcPair p(c, prm);
  for (int i = 0; i < 6000; ++i) p.b.buf[i] = static_cast<uint8_t>(i * 3);
  for (int k = 0; k < 10; ++k) {
    tp::Sge rd = p.a.Sge(static_cast<uint64_t>(k) * 6000, 6000);
    ASSERT_TRUE(PostSend(p.qa, k, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                         p.b.mr->addr(), p.b.mr->rkey())
                    .ok());
  }
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 10u);
  for (int k = 0; k < 10; ++k) {
    EXPECT_EQ(s[k].status, tp::WcStatus::kSuccess);
    EXPECT_EQ(std::memcmp(&p.a.buf[k * 6000], p.b.buf.data(), 6000), 0);
  }
}

// A READ of many packets over a lossy link needs more timeout rounds in
// total than retry_cnt, but each round makes progress: it must complete (the
// retry counter counts rounds without progress, as on hardware).
TEST(RdmaTest, LongReadOverLossyLinkCompletes) {
  SimConfig c = TwoNodes(11);
  PacketFault d{PacketFaultKind::kDrop, 0.05};
  d.opcode_mask = kFaultOpReadResp;
  c.faults.packet_faults.push_back(d);
  RcParams prm;
  prm.timeout = 8;
  prm.retry_cnt = 2;
  RcPair p(c, prm);
  for (size_t i = 0; i < p.b.buf.size(); ++i) {
    p.b.buf[i] = static_cast<uint8_t>(i * 7 + 1);
  }
  // 64 KiB at a 1 KiB MTU: 64 responses, about 3 lost per round.
  tp::Sge rd = p.a.Sge(0, 1 << 16);
  ASSERT_TRUE(PostSend(p.qa, 1, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr(), p.b.mr->rkey())
                  .ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(p.a.buf.data(), p.b.buf.data(), 1 << 16), 0);
  EXPECT_GT(p.f->stats().retransmits, 2u);  // More rounds than retry_cnt.
}

// A fenced send that forwards what a preceding read fetched sees the read's
// data only if it really waits for the read.
std::vector<uint8_t> ForwardAfterRead(uint32_t flags) {
  RcPair p(TwoNodes());
  std::memset(&p.b.buf[40000], 0xab, 4096);  // what the read fetches
  tp::Sge rs = p.b.Sge(0, 4096);
  EXPECT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  tp::Sge rd = p.a.Sge(0, 4096);
  EXPECT_TRUE(PostSend(p.qa, 1, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr() + 40000, p.b.mr->rkey())
                  .ok());
  EXPECT_TRUE(PostSend(p.qa, 2, &rd, 1, tp::WrOpcode::kSend, flags).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  EXPECT_EQ(s.size(), 2u);
  return std::vector<uint8_t>(p.b.buf.begin(), p.b.buf.begin() + 4096);
}

TEST(RdmaTest, FenceWaitsForPriorReads) {
  const std::vector<uint8_t> fenced = ForwardAfterRead(tp::kSendFence);
  EXPECT_EQ(fenced, std::vector<uint8_t>(4096, 0xab));
  const std::vector<uint8_t> unfenced = ForwardAfterRead(0);
  // And the test can tell the difference.
  EXPECT_NE(unfenced, std::vector<uint8_t>(4096, 0xab));
}

// The time the second of two back-to-back reads completes.
uint64_t SecondReadDone(uint8_t max_rd_atomic) {
  RcParams prm;
  prm.max_rd_atomic = max_rd_atomic;
  RcPair p(TwoNodes(), prm);
  tp::Sge rd = p.a.Sge(0, 8);
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(PostSend(p.qa, i, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                         p.b.mr->addr(), p.b.mr->rkey())
                    .ok());
  }
  PollOne(p.a.scq);
  EXPECT_EQ(PollOne(p.a.scq).wr_id, 1u);
  return p.f->clock().NowNs();
}

TEST(RdmaTest, MaxRdAtomicLimitsOutstandingReads) {
  const uint64_t one = SecondReadDone(1);  // the second read waits a round trip
  const uint64_t four = SecondReadDone(4);  // both in flight together
  EXPECT_GT(one, four + 1500);  // at least most of a 2 us round trip later
}

}  // namespace
}  // namespace softfab::sim::testing
