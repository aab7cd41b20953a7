// Tests of RDMA WRITE and READ (issue 3, item 11): write with immediate data
// consuming a receive, RNR for it, reads surviving lost responses and long
// lossy reads, fence, max_rd_atomic, and inline data copied at post.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(RdmaTest, WriteReadAndWriteWithImmConsumesARecv) {
  RcPair p(TwoNodes());
  for (int i = 0; i < 5000; ++i) p.a.buf[i] = static_cast<uint8_t>(i ^ 0x5a);
  tp::Sge ss = p.a.Sge(0, 5000);
  const uint64_t raddr = p.b.mr->addr() + 8192;
  // Plain write: no receive consumed, no receive completion.
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0, raddr,
                       p.b.mr->rkey())
                  .ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].opcode, tp::WcOpcode::kRdmaWrite);
  EXPECT_EQ(std::memcmp(&p.b.buf[8192], p.a.buf.data(), 5000), 0);
  EXPECT_TRUE(Drain(p.f.get(), p.b.rcq).empty());
  // Read it back elsewhere.
  tp::Sge rd = p.a.Sge(20000, 5000);
  ASSERT_TRUE(PostSend(p.qa, 2, &rd, 1, tp::WrOpcode::kRdmaRead, 0, raddr,
                       p.b.mr->rkey())
                  .ok());
  s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].opcode, tp::WcOpcode::kRdmaRead);
  EXPECT_EQ(s[0].byte_len, 5000u);
  EXPECT_EQ(std::memcmp(&p.a.buf[20000], p.a.buf.data(), 5000), 0);
  // Write with immediate: consumes a receive, which sees the immediate and the
  // length.
  tp::Sge rs = p.b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 33, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 3, &ss, 1, tp::WrOpcode::kRdmaWriteWithImm, 0,
                       raddr, p.b.mr->rkey(), 0xfeed)
                  .ok());
  auto r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 33u);
  EXPECT_EQ(r[0].opcode, tp::WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(r[0].imm_data, 0xfeedu);
  EXPECT_EQ(r[0].byte_len, 5000u);
  EXPECT_EQ(r[0].wc_flags, tp::kWcWithImm);
}

TEST(RdmaTest, WriteWithImmWithoutRecvDrawsRnr) {
  RcParams prm;
  prm.rnr_retry = 1;
  RcPair p(TwoNodes(), prm);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 3, &ss, 1, tp::WrOpcode::kRdmaWriteWithImm, 0,
                       p.b.mr->addr(), p.b.mr->rkey(), 1)
                  .ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kRnrRetryExcErr);
}

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

TEST(RdmaTest, InlineDataIsCopiedAtPost) {
  RcPair p(TwoNodes());
  tp::Sge rs = p.b.Sge(0, 64);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  std::memset(p.a.buf.data(), 0x42, 32);
  tp::Sge ss = p.a.Sge(0, 32);
  ss.lkey = 0;  // inline ignores keys
  ASSERT_TRUE(
      PostSend(p.qa, 1, &ss, 1, tp::WrOpcode::kSend, tp::kSendInline).ok());
  std::memset(p.a.buf.data(), 0, 32);  // reuse the buffer at once
  auto r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(p.b.buf[31], 0x42);
  tp::Sge big = p.a.Sge(0, 65);  // above max_inline_data (64)
  EXPECT_EQ(
      PostSend(p.qa, 2, &big, 1, tp::WrOpcode::kSend, tp::kSendInline).code(),
      EINVAL);
}

}  // namespace
}  // namespace softfab::sim::testing
