// Transport conformance, the control path: argument checks of RegMr, CreateCq
// and CreateQp, EBUSY while an object has users, the QP state rules of
// RESET and INIT, and an SRQ's QP taking no receives of its own. Per backend
// (see transport_fixture.h).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

#include "tests/transport/transport_fixture.h"

namespace softfab::transport_testing {
namespace {

class ObjectsConformance : public TransportTest {
 protected:
  tp::Device* dev() const { return s_[0].dev; }
  tp::ProtectionDomain* pd() const { return s_[0].pd; }
};

TEST_P(ObjectsConformance, RegMrChecksItsArguments) {
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(pd()->RegMr(nullptr, 64, 0).status().code(), EINVAL);
  EXPECT_EQ(pd()->RegMr(buf.data(), 0, 0).status().code(), EINVAL);
  EXPECT_EQ(pd()->RegMr(buf.data(), 64, 1u << 7).status().code(), EINVAL);
  // Remote write without local write is refused (as ibv_reg_mr does).
  EXPECT_EQ(pd()->RegMr(buf.data(), 64, tp::kAccessRemoteWrite).status().code(),
            EINVAL);
  tp::MemoryRegion* mr =
      Must(pd()->RegMr(buf.data(), 64, tp::kAccessLocalWrite));
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->addr(), reinterpret_cast<uint64_t>(buf.data()));
  EXPECT_EQ(mr->length(), 64u);
  EXPECT_EQ(mr->access(), tp::kAccessLocalWrite);
  EXPECT_TRUE(mr->Destroy().ok());
}

// The transport's random numbers (the core's initial PSNs): 64 draws, no two
// alike, and their low 24 bits (a PSN) spread over more than one value.
TEST_P(ObjectsConformance, RandomNumbersDiffer) {
  std::set<uint64_t> seen;
  std::set<uint32_t> psns;
  for (int i = 0; i < 64; ++i) {
    const uint64_t v = s_[0].dev->Random();
    seen.insert(v);
    psns.insert(static_cast<uint32_t>(v) & 0xFFFFFF);
  }
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_GT(psns.size(), 60u);
}

TEST_P(ObjectsConformance, CqSizeIsChecked) {
  tp::DeviceAttr attr;
  ASSERT_TRUE(dev()->QueryDevice(&attr).ok());
  EXPECT_EQ(dev()->CreateCq(0).status().code(), EINVAL);
  EXPECT_EQ(dev()->CreateCq(attr.max_cqe + 1).status().code(), EINVAL);
  tp::CompletionQueue* cq = Must(dev()->CreateCq(10));
  ASSERT_NE(cq, nullptr);
  EXPECT_GE(cq->cqe(), 10);
  std::printf("CreateCq(10) granted cqe %d\n", cq->cqe());
  tp::WorkCompletion wc;
  EXPECT_EQ(cq->Poll(-1, &wc), -EINVAL);
  EXPECT_EQ(cq->Poll(1, nullptr), -EINVAL);
  EXPECT_EQ(cq->Poll(1, &wc), 0);
  EXPECT_TRUE(cq->Destroy().ok());
}

TEST_P(ObjectsConformance, ObjectsInUseAreBusyUntilTheirUsersGo) {
  tp::ProtectionDomain* pd2 = Must(dev()->AllocPd());
  ASSERT_NE(pd2, nullptr);
  std::vector<uint8_t> buf(256);
  tp::MemoryRegion* mr =
      Must(pd2->RegMr(buf.data(), buf.size(), tp::kAccessLocalWrite));
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(pd2->Destroy().code(), EBUSY);

  tp::CompletionQueue* cq = Must(dev()->CreateCq(64));
  tp::SrqAttr sa;
  sa.max_wr = 8;
  sa.max_sge = 1;
  tp::SharedReceiveQueue* srq = Must(pd2->CreateSrq(sa));
  ASSERT_NE(srq, nullptr);
  tp::QueuePair* qp = Must(
      pd2->CreateQp(::softfab::testing::RcQpInit(cq, cq, /*depth=*/4, srq)));
  ASSERT_NE(qp, nullptr);
  tp::AddressHandle* ah = Must(pd2->CreateAh(Address(0)));
  ASSERT_NE(ah, nullptr);

  EXPECT_EQ(cq->Destroy().code(), EBUSY);
  EXPECT_EQ(srq->Destroy().code(), EBUSY);
  EXPECT_EQ(pd2->Destroy().code(), EBUSY);
  ASSERT_TRUE(qp->Destroy().ok());
  EXPECT_TRUE(cq->Destroy().ok());
  EXPECT_TRUE(srq->Destroy().ok());
  EXPECT_EQ(pd2->Destroy().code(), EBUSY);  // the MR and the AH
  EXPECT_TRUE(ah->Destroy().ok());
  EXPECT_TRUE(mr->Destroy().ok());
  EXPECT_TRUE(pd2->Destroy().ok());
}

TEST_P(ObjectsConformance, CreateQpChecksItsArguments) {
  tp::DeviceAttr attr;
  ASSERT_TRUE(dev()->QueryDevice(&attr).ok());
  tp::QpInitAttr init = RcInit(0, /*depth=*/4);
  init.cap.max_send_sge = init.cap.max_recv_sge = 0;  // room for the inline
  init.recv_cq = nullptr;
  EXPECT_EQ(pd()->CreateQp(init).status().code(), EINVAL);
  init.recv_cq = s_[0].rcq;
  init.cap.max_inline_data = attr.max_inline_data + 1;
  EXPECT_EQ(pd()->CreateQp(init).status().code(), EINVAL);
  init.cap.max_inline_data = attr.max_inline_data;
  tp::QueuePair* qp = Must(pd()->CreateQp(init));
  ASSERT_NE(qp, nullptr);
  tp::QpAttr a;
  tp::QpInitAttr back;
  ASSERT_TRUE(qp->Query(&a, &back).ok());
  EXPECT_EQ(a.qp_state, tp::QpState::kReset);
  EXPECT_EQ(back.send_cq, s_[0].scq);
  EXPECT_EQ(back.recv_cq, s_[0].rcq);
  EXPECT_EQ(back.srq, nullptr);
  EXPECT_EQ(back.qp_type, tp::QpType::kRc);
  EXPECT_GE(back.cap.max_inline_data, attr.max_inline_data);
}

TEST_P(ObjectsConformance, QpStateRulesOfResetAndInit) {
  tp::QueuePair* qp = Qp(0, RcInit(0));
  ASSERT_NE(qp, nullptr);
  const tp::Sge sge = s_[0].Sge(0, 8);
  // RESET: no receives; RESET -> RTS is illegal and changes nothing.
  EXPECT_EQ(PostRecv(qp, 1, &sge, 1).code(), EINVAL);
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRts;
  a.sq_psn = 1;
  EXPECT_EQ(qp->Modify(a, tp::kQpState | tp::kQpSqPsn).code(), EINVAL);
  EXPECT_EQ(qp->state(), tp::QpState::kReset);
  // Missing required attributes for RESET -> INIT.
  a.qp_state = tp::QpState::kInit;
  EXPECT_EQ(qp->Modify(a, tp::kQpState).code(), EINVAL);
  a.port_num = 1;
  ASSERT_TRUE(qp->Modify(a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort |
                                tp::kQpAccessFlags)
                  .ok());
  EXPECT_EQ(qp->state(), tp::QpState::kInit);
  tp::QpAttr q;
  ASSERT_TRUE(qp->Query(&q, nullptr).ok());
  EXPECT_EQ(q.qp_state, tp::QpState::kInit);
  EXPECT_EQ(q.port_num, 1);  // on a device the physical port maps back to 1
  // INIT: receives are accepted, sends are not (nothing is queued).
  EXPECT_TRUE(PostRecv(qp, 2, &sge, 1).ok());
  tp::SendWr wr;
  wr.wr_id = 3;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const tp::SendWr* bad = nullptr;
  EXPECT_EQ(qp->PostSend(&wr, &bad).code(), EINVAL);
  EXPECT_EQ(bad, &wr);
  // Another port is refused.
  a.port_num = 2;
  EXPECT_EQ(qp->Modify(a, tp::kQpState | tp::kQpPort).code(), EINVAL);
}

TEST_P(ObjectsConformance, SrqQpTakesNoDirectReceivesAndResizeIsRefused) {
  tp::SrqAttr sa;
  sa.max_wr = 8;
  sa.max_sge = 1;
  tp::SharedReceiveQueue* srq = Must(pd()->CreateSrq(sa));
  ASSERT_NE(srq, nullptr);
  tp::QueuePair* qp = Qp(0, RcInit(0, 16, srq));
  ASSERT_NE(qp, nullptr);
  ASSERT_TRUE(::softfab::testing::ToInit(qp, Params().access).ok());
  const tp::Sge sge = s_[0].Sge(0, 8);
  EXPECT_EQ(PostRecv(qp, 1, &sge, 1).code(), EINVAL);
  tp::SrqAttr resize;
  resize.max_wr = 16;
  EXPECT_EQ(srq->Modify(resize, tp::kSrqMaxWr).code(), EINVAL);
  tp::SrqAttr q;
  ASSERT_TRUE(srq->Query(&q).ok());
  EXPECT_GE(q.max_wr, 8u);
  EXPECT_EQ(q.srq_limit, 0u);
}

SOFTFAB_INSTANTIATE_PER_TRANSPORT(ObjectsConformance);

}  // namespace
}  // namespace softfab::transport_testing
