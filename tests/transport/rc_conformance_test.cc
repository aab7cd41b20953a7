// Transport conformance, RC sends: a message of several packets scattered
// over receive SGEs with immediate data, unsignaled requests, and a request
// that fails while unsignaled. Per backend (see transport_fixture.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "tests/transport/transport_fixture.h"

namespace softfab::transport_testing {
namespace {

class RcConformance : public TransportTest {
 protected:
  // Side 0's RC QP with only the sends that ask for it signaled.
  tp::QpInitAttr UnsignaledInit() const {
    tp::QpInitAttr ia = RcInit(0);
    ia.sq_sig_all = 0;
    return ia;
  }
};

TEST_P(RcConformance, SendScattersAMultiPacketMessageWithImmediate) {
  const RcPair p = ConnectedPair();
  ASSERT_FALSE(HasFatalFailure());
  Side& a = s_[0];
  Side& b = s_[1];
  // 10000 bytes: ten packets at a 1 KiB MTU, three at 4 KiB; gathered from
  // two SGEs and scattered over three.
  for (int i = 0; i < 10000; ++i) a.buf[i] = static_cast<uint8_t>(i * 7);
  tp::Sge rs[3] = {b.Sge(0, 3000), b.Sge(5000, 3000), b.Sge(9000, 5000)};
  ASSERT_TRUE(PostRecv(p.b, 77, rs, 3).ok());
  tp::Sge ss[2] = {a.Sge(0, 4000), a.Sge(4000, 6000)};
  ASSERT_TRUE(PostSend(p.a, 5, ss, 2, tp::WrOpcode::kSendWithImm,
                       tp::kSendSignaled, 0, 0, 0xdeadbeef)
                  .ok());
  const uint64_t sent_at_post = sim() ? fabric()->stats().packets_sent : 0;
  auto r = PollN(b.rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].wr_id, 77u);
  EXPECT_EQ(r[0].opcode, tp::WcOpcode::kRecv);
  EXPECT_EQ(r[0].byte_len, 10000u);
  EXPECT_EQ(r[0].imm_data, 0xdeadbeefu);
  EXPECT_EQ(r[0].wc_flags & tp::kWcWithImm, tp::kWcWithImm);
  // src_qp of an RC receive: the sender's QP on the simulator and hardware;
  // rxe leaves it 0 (the quirk api/verbs/verbs_quirks_test.cc pins down).
  if (sim()) EXPECT_EQ(r[0].src_qp, p.a->qp_num());
  EXPECT_EQ(r[0].qp_num, p.b->qp_num());
  for (int i = 0; i < 10000; ++i) {
    const size_t at = i < 3000   ? i
                      : i < 6000 ? 5000 + (i - 3000)
                                 : 9000 + (i - 6000);
    ASSERT_EQ(b.buf[at], static_cast<uint8_t>(i * 7)) << i;
  }
  EXPECT_EQ(b.buf[3000], 0);  // the gap between SGEs is untouched
  auto s = PollN(a.scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(s[0].wr_id, 5u);
  EXPECT_EQ(s[0].opcode, tp::WcOpcode::kSend);
  if (sim()) {
    // Only the simulator counts packets: exact flags, all data packets
    // leave at post, and one ACK covers them.
    EXPECT_EQ(r[0].wc_flags, tp::kWcWithImm);
    EXPECT_EQ(sent_at_post, 10u);
    EXPECT_EQ(fabric()->stats().packets_sent, 11u);
  }
}

TEST_P(RcConformance, UnsignaledSendsCompleteSilently) {
  const RcPair p = ConnectedPair(UnsignaledInit(), Params());
  ASSERT_FALSE(HasFatalFailure());
  tp::QueuePair* qa = p.a;
  tp::QueuePair* qb = p.b;
  tp::Sge rs = s_[1].Sge(0, 64), ss = s_[0].Sge(0, 8);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(PostRecv(qb, i, &rs, 1).ok());
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1).ok());
  ASSERT_TRUE(
      PostSend(qa, 2, &ss, 1, tp::WrOpcode::kSend, tp::kSendSignaled).ok());
  ASSERT_TRUE(PostSend(qa, 3, &ss, 1).ok());
  EXPECT_EQ(PollN(s_[1].rcq, 3).size(), 3u);
  auto s = PollN(s_[0].scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 2u);
  EXPECT_TRUE(IsEmpty(s_[0].scq));
}

TEST_P(RcConformance, AnUnsignaledRequestThatFailsStillCompletes) {
  const RcPair p = ConnectedPair(UnsignaledInit(), Params());
  ASSERT_FALSE(HasFatalFailure());
  tp::QueuePair* qa = p.a;
  tp::QueuePair* qb = p.b;
  tp::Sge rs = s_[1].Sge(0, 64), good = s_[0].Sge(0, 8), bad = good;
  bad.lkey ^= 0x100;
  ASSERT_TRUE(PostRecv(qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(qa, 1, &good, 1).ok());  // succeeds: no completion
  ASSERT_TRUE(PostSend(qa, 2, &bad, 1).ok());   // fails: completes
  ASSERT_TRUE(PostSend(qa, 3, &good, 1).ok());  // flushed: completes
  auto s = PollN(s_[0].scq, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].wr_id, 2u);
  // rxe reports an unknown lkey as LOC_QP_OP_ERR (backends/verbs/README.md).
  EXPECT_EQ(s[0].status,
            IsRxe() ? tp::WcStatus::kLocQpOpErr : tp::WcStatus::kLocProtErr);
  EXPECT_EQ(s[1].wr_id, 3u);
  EXPECT_EQ(s[1].status, tp::WcStatus::kWrFlushErr);
}

SOFTFAB_INSTANTIATE_PER_TRANSPORT(RcConformance);

}  // namespace
}  // namespace softfab::transport_testing
