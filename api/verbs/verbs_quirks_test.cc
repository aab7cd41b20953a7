// Where Soft-RoCE (rxe) and the simulator answer the same sfv_* calls
// differently: each quirk listed in api/softfab/verbs.h (and
// backends/verbs/README.md) is one case here, asserting the simulator's answer
// on the simulator and rxe's on rxe, so a change on either side fails. Other
// real devices are held to the answer the verbs documents give (the
// simulator's), except where none is defined.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "api/softfab/verbs.h"
#include "tests/support/sfv_test_util.h"

namespace softfab::sfv_testing {
namespace {

class SfvQuirkTest : public SfvBackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, SfvQuirkTest,
                         ::testing::Values(Backend::kSim, Backend::kDevice),
                         BackendName);

// Quirk: an unknown lkey is LOC_QP_OP_ERR on rxe, LOC_PROT_ERR on the
// simulator and hardware. Past the end of a known region: LOC_PROT_ERR on all.
TEST_P(SfvQuirkTest, UnknownLkeyStatus) {
  for (const bool unknown_key : {true, false}) {
    SCOPED_TRACE(unknown_key ? "unknown lkey" : "past the region's end");
    sfv_qp* a;
    sfv_qp* b;
    ASSERT_NO_FATAL_FAILURE(ConnectedPair(&a, &b));
    ASSERT_EQ(Recv(b, 1, 9, 0, 64), 0);
    sfv_sge sge{reinterpret_cast<uintptr_t>(s_[0].buf.data()), 64,
                s_[0].mr->lkey};
    if (unknown_key) {
      sge.lkey ^= 0x5a5a00;
    } else {
      sge.addr += s_[0].buf.size() - 32;
    }
    sfv_send_wr wr = OneSgeWr(1, SFV_WR_SEND, &sge);
    sfv_send_wr* bad = nullptr;
    ASSERT_EQ(sfv_post_send(a, &wr, &bad), 0);
    sfv_wc wc;
    ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
    EXPECT_EQ(wc.wr_id, 1u);
    const sfv_wc_status expected = unknown_key && flavour() == Flavour::kRxe
                                       ? SFV_WC_LOC_QP_OP_ERR
                                       : SFV_WC_LOC_PROT_ERR;
    EXPECT_EQ(wc.status, expected) << sfv_wc_status_str(wc.status);
    // The receive is untouched by the failed send.
    EXPECT_TRUE(StaysEmpty(s_[1].cq, 200));
  }
}

// Quirk: an RC SEND into a receive too small for it. rxe (and the simulator
// by default) completes the receive with LOC_QP_OP_ERR; ConnectX (the mlx5
// personality, chosen through sfv_sim_config) with LOC_LEN_ERR, and the
// sender is NAKed (remote invalid request on mlx5). Both QPs go to ERROR.
class SfvPersonalityTest : public SfvBackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, SfvPersonalityTest,
                         ::testing::Values(Backend::kSim, Backend::kSimMlx5,
                                           Backend::kDevice),
                         BackendName);

TEST_P(SfvPersonalityTest, RcReceiveTooSmall) {
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ConnectedPair(&a, &b));
  ASSERT_EQ(Recv(b, 1, 9, 0, 16), 0);  // 16 bytes of room
  ASSERT_EQ(Send(a, 1, 100), 0);       // 100 bytes: past mlx5's CQE scatter
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  EXPECT_EQ(wc.wr_id, 9u);
  const bool mlx5 = GetParam() == Backend::kSimMlx5;
  EXPECT_EQ(wc.status, mlx5 ? SFV_WC_LOC_LEN_ERR : SFV_WC_LOC_QP_OP_ERR)
      << sfv_wc_status_str(wc.status);
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_NE(wc.status, SFV_WC_SUCCESS);
  if (mlx5) {
    EXPECT_EQ(wc.status, SFV_WC_REM_INV_REQ_ERR)
        << sfv_wc_status_str(wc.status);
  }
}

TEST(SfvSimConfigTest, UnknownPersonalityIsRefused) {
  sfv_sim_config c;
  std::memset(&c, 0, sizeof(c));
  c.nodes = 2;
  c.personality = static_cast<sfv_sim_personality>(7);
  errno = 0;
  EXPECT_EQ(sfv_sim_fabric_create(&c), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// Quirk: a receive posted to a QP already in ERROR is flushed on the
// simulator, and on rxe accepted but never completed. One queued before the
// move to ERROR is flushed on both.
TEST_P(SfvQuirkTest, ReceivePostedInError) {
  sfv_qp* qp = Qp(1);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(ToInit(qp), 0);
  ASSERT_EQ(Recv(qp, 1, 1, 0, 64), 0);
  sfv_qp_attr e;
  std::memset(&e, 0, sizeof(e));
  e.qp_state = SFV_QPS_ERR;
  ASSERT_EQ(sfv_modify_qp(qp, &e, SFV_QP_STATE), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
  ASSERT_EQ(Recv(qp, 1, 2, 64, 64), 0);  // accepted on both
  if (flavour() == Flavour::kRxe) {
    EXPECT_TRUE(StaysEmpty(s_[1].cq, 1000));
  } else {
    ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
  }
}

// Quirk: rxe rounds queue sizes up to 2^k - 1; the simulator grants what was
// asked. Other devices grant at least what was asked.
TEST_P(SfvQuirkTest, GrantedSizes) {
  sfv_cq* cq = Cq(0, 10);
  ASSERT_NE(cq, nullptr);
  sfv_qp* qp = Qp(0);  // 16 send and 16 receive requests
  ASSERT_NE(qp, nullptr);
  sfv_qp_attr attr;
  sfv_qp_init_attr init;
  ASSERT_EQ(sfv_query_qp(qp, &attr, SFV_QP_CAP, &init), 0);
  sfv_srq* srq = Srq(0, 4);
  ASSERT_NE(srq, nullptr);
  sfv_srq_attr sa;
  ASSERT_EQ(sfv_query_srq(srq, &sa), 0);
  std::printf(
      "granted: cqe %d for 10, QP send %u recv %u for 16, SRQ %u for 4\n",
      cq->cqe, init.cap.max_send_wr, init.cap.max_recv_wr, sa.max_wr);
  switch (flavour()) {
    case Flavour::kSim:
      EXPECT_EQ(cq->cqe, 10);
      EXPECT_EQ(init.cap.max_send_wr, 16u);
      EXPECT_EQ(init.cap.max_recv_wr, 16u);
      EXPECT_EQ(sa.max_wr, 4u);
      break;
    case Flavour::kRxe:
      EXPECT_EQ(cq->cqe, 15);
      EXPECT_EQ(init.cap.max_send_wr, 31u);
      EXPECT_EQ(init.cap.max_recv_wr, 31u);
      EXPECT_EQ(sa.max_wr, 7u);
      break;
    case Flavour::kOtherDevice:
      EXPECT_GE(cq->cqe, 10);
      EXPECT_GE(init.cap.max_send_wr, 16u);
      EXPECT_GE(init.cap.max_recv_wr, 16u);
      EXPECT_GE(sa.max_wr, 4u);
      break;
  }
}

// Quirk: the 40 bytes before a UD payload. rxe (RoCEv2 over IPv4): 20 zero
// bytes, then the IPv4 header (0x45 ...); the simulator: 20 bytes of 0xa5
// ("undefined"), then its own header. Other devices: not defined here.
TEST_P(SfvQuirkTest, UdGrhBytes) {
  if (flavour() == Flavour::kOtherDevice) {
    GTEST_SKIP() << "the GRH bytes are defined here for rxe and the simulator";
  }
  sfv_qp* a;
  sfv_qp* b;
  sfv_ah* h;
  ASSERT_NO_FATAL_FAILURE(UdPair(&a, &b, &h));
  std::memset(s_[1].buf.data(), 0x11, 64);
  ASSERT_EQ(Recv(b, 1, 3, 0, 40 + 16), 0);
  ASSERT_EQ(SendUd(a, h, b->qp_num, 16), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  ASSERT_EQ(wc.status, SFV_WC_SUCCESS);
  const uint8_t* grh = s_[1].buf.data();
  const uint8_t first20 = flavour() == Flavour::kSim ? 0xa5 : 0x00;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(grh[i], first20) << "byte " << i;
  }
  if (flavour() == Flavour::kRxe) {
    EXPECT_EQ(grh[20], 0x45);  // IPv4, 20-byte header
  }
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
}

// Quirk: qp->state is libibverbs' record on a real device. After RNR retries
// run out, the next post still reads RTS on rxe, ERROR on the simulator;
// sfv_query_qp reads ERROR on both.
TEST_P(SfvQuirkTest, QpStateAfterTheDeviceMovedItToError) {
  sfv_qp* a = Qp(0);
  sfv_qp* b = Qp(1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NO_FATAL_FAILURE(Connect(a, 1, b->qp_num, /*rnr_retry=*/0));
  ASSERT_NO_FATAL_FAILURE(Connect(b, 0, a->qp_num));
  ASSERT_EQ(Send(a, 1, 8), 0);  // b has no receive posted
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_RNR_RETRY_EXC_ERR)
      << sfv_wc_status_str(wc.status);
  ASSERT_EQ(Send(a, 2, 8), 0);  // accepted on both, flushed
  EXPECT_EQ(a->state, flavour() == Flavour::kSim ? SFV_QPS_ERR : SFV_QPS_RTS);
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
  sfv_qp_attr q;
  ASSERT_EQ(sfv_query_qp(a, &q, SFV_QP_STATE, nullptr), 0);
  EXPECT_EQ(q.qp_state, SFV_QPS_ERR);
  EXPECT_EQ(a->state, SFV_QPS_ERR);
}

// Quirk: src_qp of an RC receive completion (ibv_wc(3) defines it for UD
// only). The simulator fills in the sender's QP number, rxe leaves 0.
TEST_P(SfvQuirkTest, RcReceiveSrcQp) {
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ConnectedPair(&a, &b));
  ASSERT_EQ(Recv(b, 1, 9, 0, 64), 0);
  ASSERT_EQ(Send(a, 1, 8), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  ASSERT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.qp_num, b->qp_num);
  switch (flavour()) {
    case Flavour::kSim:
      EXPECT_EQ(wc.src_qp, a->qp_num);
      break;
    case Flavour::kRxe:
      EXPECT_EQ(wc.src_qp, 0u);
      break;
    case Flavour::kOtherDevice:
      break;  // undefined for RC
  }
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
}

// Quirk: a QP on an SRQ moved to ERROR raises QP_LAST_WQE_REACHED on the
// simulator (and hardware, as the IB spec asks); rxe (Linux 6.1) raises
// nothing.
TEST_P(SfvQuirkTest, LastWqeReachedWhenAnSrqQpEntersError) {
  sfv_srq* srq = Srq(1, 4);
  ASSERT_NE(srq, nullptr);
  sfv_qp* b = Qp(1, srq);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(ToInit(b), 0);
  sfv_qp_attr e;
  std::memset(&e, 0, sizeof(e));
  e.qp_state = SFV_QPS_ERR;
  ASSERT_EQ(sfv_modify_qp(b, &e, SFV_QP_STATE), 0);
  sfv_async_event ev;
  if (flavour() == Flavour::kRxe) {
    EXPECT_EQ(WaitAsyncEvent(1, &ev, 1000), -1) << ev.event_type;
    return;
  }
  ASSERT_EQ(WaitAsyncEvent(1, &ev), 0);
  EXPECT_EQ(ev.event_type, SFV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, b);
}

}  // namespace
}  // namespace softfab::sfv_testing
