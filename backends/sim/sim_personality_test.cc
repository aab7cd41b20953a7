// Tests of the device personalities (SimConfig::personality, sim_fabric.h):
// where real devices differ from the IB spec or from each other, the
// simulated HCA behaves as Soft-RoCE (rxe, the default) or as ConnectX (mlx5)
// does. One test per case and personality: a UD send longer than the path
// MTU, an RC SEND into a receive too small for it, a UD datagram into a
// receive without room for the GRH and the payload. (rxe's side of the same
// cases runs against a real device too, in tests/device_personality_test.cc.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

constexpr DevicePersonality kRxe = DevicePersonality::kRxe;
constexpr DevicePersonality kMlx5 = DevicePersonality::kMlx5;

TEST(PersonalityTest, DefaultIsRxeAndUnknownIsRefused) {
  EXPECT_EQ(SimConfig{}.personality, kRxe);
  SimConfig c = TwoNodes();
  c.personality = static_cast<DevicePersonality>(7);
  EXPECT_FALSE(ValidateSimConfig(c).ok());
  EXPECT_EQ(CreateSimFabric(c), nullptr);
}

// ------------------------------------------------ UD send over the path MTU

SimConfig SmallMtu(DevicePersonality personality) {
  SimConfig c = TwoNodes(7, personality);
  c.active_mtu = tp::Mtu::k1024;
  return c;
}

// rxe (IB C10-93.1.1): nothing leaves, the send completes successfully, the
// QP stays in RTS; the receive posted for it takes the next datagram.
TEST(PersonalityTest, RxeUdSendOverMtuVanishesAndSucceeds) {
  UdPair u(SmallMtu(kRxe));
  tp::Sge rs = u.b.Sge(0, 4096);
  ASSERT_TRUE(PostRecv(u.qb, 9, &rs, 1).ok());
  ASSERT_TRUE(u.Send(1, 1025).ok());
  auto s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(u.qa->state(), tp::QpState::kRts);
  EXPECT_EQ(u.f->stats().packets_sent, 0u);
  EXPECT_TRUE(Drain(u.f.get(), u.b.rcq).empty());
  ASSERT_TRUE(u.Send(2, 1024).ok());  // At the MTU: sent.
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 9u);
  EXPECT_EQ(r[0].byte_len, 40u + 1024u);
  EXPECT_EQ(Drain(u.f.get(), u.a.scq).size(), 1u);
}

// Completions stay in posting order around the one that sent nothing.
TEST(PersonalityTest, RxeUdSendOverMtuCompletesInOrder) {
  UdPair u(SmallMtu(kRxe));
  ASSERT_TRUE(u.Send(1, 8).ok());
  ASSERT_TRUE(u.Send(2, 2000).ok());
  ASSERT_TRUE(u.Send(3, 8).ok());
  auto s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].wr_id, i + 1u);
    EXPECT_EQ(s[i].status, tp::WcStatus::kSuccess);
  }
}

// mlx5: LOC_LEN_ERR and the QP in SQE.
TEST(PersonalityTest, Mlx5UdSendOverMtuFailsWithLocLenErr) {
  UdPair u(SmallMtu(kMlx5));
  ASSERT_TRUE(u.Send(1, 1025).ok());
  auto s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kLocLenErr);
  EXPECT_EQ(u.qa->state(), tp::QpState::kSqe);
  EXPECT_EQ(u.f->stats().packets_sent, 0u);
}

// ------------------------------------------- RC SEND into too small a receive

// Posts a 16-byte receive and a `len`-byte SEND to it, and drains both
// sides' completions.
struct TooSmall {
  RcPair p;
  std::vector<tp::WorkCompletion> r, s;

  TooSmall(DevicePersonality personality, uint32_t len)
      : p(TwoNodes(7, personality)) {
    for (uint32_t i = 0; i < len; ++i) p.a.buf[i] = 0x40 + i % 64;
    tp::Sge rs = p.b.Sge(0, 16);
    EXPECT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
    tp::Sge ss = p.a.Sge(0, len);
    EXPECT_TRUE(PostSend(p.qa, 7, &ss, 1).ok());
    r = Drain(p.f.get(), p.b.rcq);
    s = Drain(p.f.get(), p.a.scq);
  }

  // One completion each side, with these statuses, and both QPs in `state`.
  void Expect(tp::WcStatus recv, tp::WcStatus send, tp::QpState state) const {
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].wr_id, 1u);
    EXPECT_EQ(r[0].status, recv);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, send);
    EXPECT_EQ(p.qa->state(), state);
    EXPECT_EQ(p.qb->state(), state);
  }
};

// rxe: its copy into the receive fails as a malformed WQE (class A): NAK
// remote operational error; the receive completes with LOC_QP_OP_ERR, the
// send with REM_OP_ERR, and both QPs go to ERROR, whatever the length.
TEST(PersonalityTest, RxeRcReceiveTooSmallIsLocQpOpAndRemOp) {
  for (uint32_t len : {17u, 5000u}) {
    SCOPED_TRACE(len);
    TooSmall(kRxe, len).Expect(tp::WcStatus::kLocQpOpErr,
                               tp::WcStatus::kRemOpErr, tp::QpState::kError);
  }
}

// mlx5, up to 32 bytes (scattered to the 64-byte CQE): the receive fails
// with LOC_LEN_ERR in the provider, nothing is written, the sender has its
// ACK, and the connection goes on.
TEST(PersonalityTest, Mlx5SmallMessageIntoTooSmallReceiveFailsOnlyTheReceive) {
  for (uint32_t len : {17u, 32u}) {
    SCOPED_TRACE(len);
    TooSmall t(kMlx5, len);
    t.Expect(tp::WcStatus::kLocLenErr, tp::WcStatus::kSuccess,
             tp::QpState::kRts);
    EXPECT_EQ(t.p.b.buf[0], 0);
    tp::Sge rs = t.p.b.Sge(0, 64), ss = t.p.a.Sge(0, len);
    ASSERT_TRUE(PostRecv(t.p.qb, 2, &rs, 1).ok());
    ASSERT_TRUE(PostSend(t.p.qa, 8, &ss, 1).ok());
    auto r = Drain(t.p.f.get(), t.p.b.rcq);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
    EXPECT_EQ(r[0].byte_len, len);
  }
}

// mlx5, larger: the hardware's responder error, LOC_LEN_ERR on the receive,
// REM_INV_REQ_ERR on the send, both QPs to ERROR.
TEST(PersonalityTest, Mlx5LargerMessageIntoTooSmallReceiveErrorsBothSides) {
  for (uint32_t len : {33u, 5000u}) {
    SCOPED_TRACE(len);
    TooSmall(kMlx5, len)
        .Expect(tp::WcStatus::kLocLenErr, tp::WcStatus::kRemInvReqErr,
                tp::QpState::kError);
  }
}

// ------------------------------------- UD datagram into too small a receive

// Replaces u.qb with a UD QP in RTS on node 1 that takes its receives from
// a new SRQ (when `on_srq`), and posts one receive of `sge` as `wr_id`.
void PostReceive(UdPair& u, bool on_srq, uint64_t wr_id, tp::Sge sge) {
  if (!on_srq) {
    ASSERT_TRUE(PostRecv(u.qb, wr_id, &sge, 1).ok());
    return;
  }
  tp::SrqAttr sa;
  sa.max_wr = 16;
  sa.max_sge = 1;
  tp::SharedReceiveQueue* srq = Must(u.b.pd->CreateSrq(sa));
  tp::QpInitAttr init = RcInit(u.b, 64, srq);
  init.qp_type = tp::QpType::kUd;
  u.qb = Must(u.b.pd->CreateQp(init));
  ASSERT_TRUE(UdToRts(u.qb).ok());
  tp::RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const tp::RecvWr* bad = nullptr;
  ASSERT_TRUE(srq->PostRecv(&wr, &bad).ok());
}

// rxe: a malformed WQE again (class A, on UD too): the receive completes
// with LOC_QP_OP_ERR and the QP goes to ERROR, with or without SRQ; the
// receives behind it are flushed.
TEST(PersonalityTest, RxeUdReceiveTooSmallIsLocQpOpAndErrorsTheQp) {
  for (bool on_srq : {false, true}) {
    UdPair u(TwoNodes(7, kRxe));
    tp::Sge rs = u.b.Sge(0, 40 + 99);
    PostReceive(u, on_srq, 4, rs);
    if (!on_srq) {
      ASSERT_TRUE(PostRecv(u.qb, 5, &rs, 1).ok());
    }
    ASSERT_TRUE(u.Send(1, 100).ok());
    auto r = Drain(u.f.get(), u.b.rcq);
    ASSERT_EQ(r.size(), on_srq ? 1u : 2u) << on_srq;
    EXPECT_EQ(r[0].wr_id, 4u);
    EXPECT_EQ(r[0].status, tp::WcStatus::kLocQpOpErr);
    EXPECT_EQ(u.b.buf[0], 0);
    if (!on_srq) {
      EXPECT_EQ(r[1].status, tp::WcStatus::kWrFlushErr);
    }
    EXPECT_EQ(u.qb->state(), tp::QpState::kError);
  }
}

// mlx5: the receive completes with LOC_LEN_ERR, with or without SRQ; the QP
// stays in RTS and takes the next datagram.
TEST(PersonalityTest, Mlx5UdReceiveTooSmallIsLocLenErr) {
  for (bool on_srq : {false, true}) {
    UdPair u(TwoNodes(7, kMlx5));
    PostReceive(u, on_srq, 4, u.b.Sge(0, 40 + 99));
    ASSERT_TRUE(u.Send(1, 100).ok());
    auto r = Drain(u.f.get(), u.b.rcq);
    ASSERT_EQ(r.size(), 1u) << on_srq;
    EXPECT_EQ(r[0].wr_id, 4u);
    EXPECT_EQ(r[0].status, tp::WcStatus::kLocLenErr);
    EXPECT_EQ(u.qb->state(), tp::QpState::kRts);
    if (on_srq) continue;
    tp::Sge big = u.b.Sge(0, 4096);
    ASSERT_TRUE(PostRecv(u.qb, 6, &big, 1).ok());
    ASSERT_TRUE(u.Send(2, 100).ok());
    r = Drain(u.f.get(), u.b.rcq);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  }
}

}  // namespace
}  // namespace softfab::sim::testing
