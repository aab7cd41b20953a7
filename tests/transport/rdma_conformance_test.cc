// Transport conformance, RDMA and the send queue's limits: WRITE, READ and
// WRITE_WITH_IMM (which consumes a receive), inline data copied at post and
// refused above the QP's limit, and RNR retries running out for a SEND and a
// WRITE_WITH_IMM that find no receive. Per backend (see transport_fixture.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "tests/transport/transport_fixture.h"

namespace softfab::transport_testing {
namespace {

using RdmaConformance = TransportTest;

TEST_P(RdmaConformance, WriteReadAndWriteWithImmediate) {
  const RcPair p = ConnectedPair();
  ASSERT_FALSE(HasFatalFailure());
  Side& a = s_[0];
  Side& b = s_[1];
  for (int i = 0; i < 5000; ++i) a.buf[i] = static_cast<uint8_t>(i ^ 0x5a);
  tp::Sge ss = a.Sge(0, 5000);
  const uint64_t raddr = b.addr(8192);
  // A plain WRITE: no receive consumed, no completion at the target.
  ASSERT_TRUE(
      PostSend(p.a, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0, raddr, b.mr->rkey())
          .ok());
  auto s = PollN(a.scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(s[0].opcode, tp::WcOpcode::kRdmaWrite);
  EXPECT_EQ(std::memcmp(&b.buf[8192], a.buf.data(), 5000), 0);
  EXPECT_TRUE(IsEmpty(b.rcq));
  // READ it back elsewhere.
  tp::Sge rd = a.Sge(20000, 5000);
  ASSERT_TRUE(
      PostSend(p.a, 2, &rd, 1, tp::WrOpcode::kRdmaRead, 0, raddr, b.mr->rkey())
          .ok());
  s = PollN(a.scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(s[0].opcode, tp::WcOpcode::kRdmaRead);
  EXPECT_EQ(s[0].byte_len, 5000u);
  EXPECT_EQ(std::memcmp(&a.buf[20000], a.buf.data(), 5000), 0);
  // WRITE_WITH_IMM consumes a receive, which sees the immediate and the
  // length written (not the receive's own size).
  tp::Sge rs = b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.b, 33, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.a, 3, &ss, 1, tp::WrOpcode::kRdmaWriteWithImm, 0,
                       raddr, b.mr->rkey(), 0xfeed)
                  .ok());
  auto r = PollN(b.rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].wr_id, 33u);
  EXPECT_EQ(r[0].opcode, tp::WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(r[0].imm_data, 0xfeedu);
  EXPECT_EQ(r[0].byte_len, 5000u);
  EXPECT_EQ(r[0].wc_flags & tp::kWcWithImm, tp::kWcWithImm);
  EXPECT_EQ(PollN(a.scq, 1).size(), 1u);
}

TEST_P(RdmaConformance, InlineDataIsCopiedAtPostAndLimited) {
  tp::DeviceAttr attr;
  ASSERT_TRUE(s_[0].dev->QueryDevice(&attr).ok());
  const uint32_t inline_bytes = std::min<uint32_t>(attr.max_inline_data, 64);
  ASSERT_GT(inline_bytes, 0u);
  tp::QpInitAttr ia = RcInit(0);
  ia.cap.max_inline_data = inline_bytes;
  const RcPair p = ConnectedPair(ia, Params());
  ASSERT_FALSE(HasFatalFailure());
  tp::QueuePair* qa = p.a;
  tp::QueuePair* qb = p.b;
  tp::Sge rs = s_[1].Sge(0, 256);
  ASSERT_TRUE(PostRecv(qb, 1, &rs, 1).ok());
  // Inline data needs no registration: a stack buffer, overwritten at once.
  uint8_t payload[64];
  std::memset(payload, 0x42, sizeof(payload));
  tp::Sge ss{reinterpret_cast<uint64_t>(payload), inline_bytes, 0};
  ASSERT_TRUE(
      PostSend(qa, 1, &ss, 1, tp::WrOpcode::kSend, tp::kSendInline).ok());
  std::memset(payload, 0, sizeof(payload));
  auto r = PollN(s_[1].rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].byte_len, inline_bytes);
  EXPECT_EQ(s_[1].buf[inline_bytes - 1], 0x42);
  EXPECT_EQ(s_[1].buf[inline_bytes], 0);
  EXPECT_EQ(PollN(s_[0].scq, 1).size(), 1u);
  // Above the QP's limit (what it was granted, at least what it asked for):
  // refused at post, nothing sent.
  tp::QpAttr q;
  tp::QpInitAttr qi;
  ASSERT_TRUE(qa->Query(&q, &qi).ok());
  EXPECT_GE(qi.cap.max_inline_data, inline_bytes);
  tp::Sge big = s_[0].Sge(0, qi.cap.max_inline_data + 1);
  EXPECT_EQ(
      PostSend(qa, 2, &big, 1, tp::WrOpcode::kSend, tp::kSendInline).code(),
      EINVAL);
  EXPECT_TRUE(IsEmpty(s_[0].scq));
}

// A request that needs a receive, with none posted and one RNR retry: it
// fails with RNR_RETRY_EXC_ERR and the QP is in ERROR.
void ExpectRnrRetryExceeded(tp::QueuePair* qa, const tp::WorkCompletion* wc) {
  ASSERT_NE(wc, nullptr);
  EXPECT_EQ(wc->status, tp::WcStatus::kRnrRetryExcErr);
  tp::QpAttr q;
  ASSERT_TRUE(qa->Query(&q, nullptr).ok());
  EXPECT_EQ(q.qp_state, tp::QpState::kError);
  EXPECT_EQ(qa->state(), tp::QpState::kError);  // the query recorded it
}

TEST_P(RdmaConformance, RnrRetriesRunOutForASendWithoutAReceive) {
  RcParams prm = Params();
  prm.rnr_retry = 1;
  prm.min_rnr_timer = 1;  // 0.01 ms
  const RcPair p = ConnectedPair(prm);
  ASSERT_FALSE(HasFatalFailure());
  tp::Sge ss = s_[0].Sge(0, 8);
  ASSERT_TRUE(PostSend(p.a, 600, &ss, 1).ok());
  auto s = PollN(s_[0].scq, 1);
  ASSERT_EQ(s.size(), 1u);
  ExpectRnrRetryExceeded(p.a, Find(s, 600));
}

TEST_P(RdmaConformance, RnrRetriesRunOutForAWriteWithImmediateWithoutAReceive) {
  RcParams prm = Params();
  prm.rnr_retry = 1;
  const RcPair p = ConnectedPair(prm);
  ASSERT_FALSE(HasFatalFailure());
  tp::Sge ss = s_[0].Sge(0, 8);
  ASSERT_TRUE(PostSend(p.a, 3, &ss, 1, tp::WrOpcode::kRdmaWriteWithImm, 0,
                       s_[1].addr(), s_[1].mr->rkey(), 1)
                  .ok());
  auto s = PollN(s_[0].scq, 1);
  ASSERT_EQ(s.size(), 1u);
  ExpectRnrRetryExceeded(p.a, Find(s, 3));
}

SOFTFAB_INSTANTIATE_PER_TRANSPORT(RdmaConformance);

}  // namespace
}  // namespace softfab::transport_testing
