// Tests of the QP state machine (sim_qp.cc): every transition against the
// kernel's qp_state_table, attribute masks, which states accept posts, SQD, and
// the flush on ERROR and the discard on RESET (issue 3, items 1 and 8).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

// The minimal required mask of each legal transition, per the kernel's table.
uint32_t RequiredMask(tp::QpType type, tp::QpState from, tp::QpState to) {
  const bool rc = type == tp::QpType::kRc;
  if (from == tp::QpState::kReset && to == tp::QpState::kInit) {
    return tp::kQpPkeyIndex | tp::kQpPort |
           (rc ? tp::kQpAccessFlags : tp::kQpQkey);
  }
  if (from == tp::QpState::kInit && to == tp::QpState::kRtr) {
    return rc ? tp::kQpAv | tp::kQpPathMtu | tp::kQpDestQpn | tp::kQpRqPsn |
                    tp::kQpMaxDestRdAtomic | tp::kQpMinRnrTimer
              : 0;
  }
  if (from == tp::QpState::kRtr && to == tp::QpState::kRts) {
    return rc ? tp::kQpSqPsn | tp::kQpTimeout | tp::kQpRetryCnt |
                    tp::kQpRnrRetry | tp::kQpMaxQpRdAtomic
              : tp::kQpSqPsn;
  }
  return 0;
}

bool KernelAllows(tp::QpState from, tp::QpState to) {
  using S = tp::QpState;
  if (to == S::kReset) return true;
  if (to == S::kError)
    return from != S::kReset;  // RESET -> ERROR is not in the table
  switch (from) {
    case S::kReset:
      return to == S::kInit;
    case S::kInit:
      return to == S::kInit || to == S::kRtr;
    case S::kRtr:
      return to == S::kRts;
    case S::kRts:
      return to == S::kRts || to == S::kSqd;
    case S::kSqd:
      return to == S::kRts || to == S::kSqd;
    default:
      return false;
  }
}

TEST(QpStateMachineTest, EveryTransitionMatchesTheKernelTable) {
  using S = tp::QpState;
  const S states[] = {S::kReset, S::kInit, S::kRtr,
                      S::kRts,   S::kSqd,  S::kError};
  for (tp::QpType type : {tp::QpType::kRc, tp::QpType::kUd}) {
    for (S from : states) {
      for (S to : states) {
        auto f = CreateSimFabric(TwoNodes());
        Endpoint e = MakeEndpoint(f.get(), 0);
        tp::QueuePair* qp = QpIn(e, type, from);
        ASSERT_EQ(qp->state(), from);
        tp::QpAttr a;
        a.qp_state = to;
        a.port_num = 1;
        a.path_mtu = tp::Mtu::k1024;
        a.ah_attr.dlid = 2;
        a.dest_qp_num = 0x100;
        a.timeout = 14;
        const uint32_t mask = tp::kQpState | RequiredMask(type, from, to);
        const Status s = qp->Modify(a, mask);
        const bool allowed = KernelAllows(from, to);
        EXPECT_EQ(s.ok(), allowed)
            << "type " << static_cast<int>(type) << " from "
            << static_cast<int>(from) << " to " << static_cast<int>(to);
        EXPECT_EQ(qp->state(), allowed ? to : from);
        if (!allowed) {
          EXPECT_EQ(s.code(), EINVAL);
        }
      }
    }
  }
}

TEST(QpStateMachineTest, MissingOrExtraAttributesAreRejectedWithoutChange) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint e = MakeEndpoint(f.get(), 0);
  tp::QueuePair* qp = Must(e.pd->CreateQp(RcInit(e)));
  tp::QpAttr a;
  a.qp_state = tp::QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = tp::kAccessLocalWrite;
  // Missing PORT.
  EXPECT_EQ(qp->Modify(a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpAccessFlags)
                .code(),
            EINVAL);
  // Q_Key is a UD attribute: not allowed for RC.
  EXPECT_EQ(qp->Modify(a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort |
                              tp::kQpAccessFlags | tp::kQpQkey)
                .code(),
            EINVAL);
  // Bad port value.
  a.port_num = 2;
  EXPECT_EQ(qp->Modify(a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort |
                              tp::kQpAccessFlags)
                .code(),
            EINVAL);
  EXPECT_EQ(qp->state(), tp::QpState::kReset);
  a.port_num = 1;
  ASSERT_TRUE(qp->Modify(a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort |
                                tp::kQpAccessFlags)
                  .ok());
  // INIT -> RTR without DEST_QPN.
  tp::QpAttr r;
  r.qp_state = tp::QpState::kRtr;
  r.ah_attr.dlid = 2;
  EXPECT_EQ(
      qp->Modify(r, tp::kQpState | tp::kQpAv | tp::kQpPathMtu | tp::kQpRqPsn |
                        tp::kQpMaxDestRdAtomic | tp::kQpMinRnrTimer)
          .code(),
      EINVAL);
  // Unreachable address vector.
  r.ah_attr.dlid = 99;
  r.path_mtu = tp::Mtu::k1024;
  EXPECT_EQ(ToRtr(qp, 98, 0x100).code(), EINVAL);
  // cur_qp_state that does not match.
  tp::QpAttr c;
  c.cur_qp_state = tp::QpState::kRts;
  EXPECT_EQ(qp->Modify(c, tp::kQpCurState).code(), EINVAL);
  EXPECT_EQ(qp->state(), tp::QpState::kInit);
  tp::QpAttr q;
  ASSERT_TRUE(qp->Query(&q, nullptr).ok());
  EXPECT_EQ(q.qp_access_flags, tp::kAccessLocalWrite);
  EXPECT_EQ(q.qp_state, tp::QpState::kInit);
}

TEST(QpStateMachineTest, PostSendNeedsRtsAndPostRecvNeedsNotReset) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint e = MakeEndpoint(f.get(), 0);
  tp::Sge sge = e.Sge(0, 8);
  for (tp::QpState s :
       {tp::QpState::kReset, tp::QpState::kInit, tp::QpState::kRtr}) {
    tp::QueuePair* qp = QpIn(e, tp::QpType::kRc, s);
    EXPECT_EQ(PostSend(qp, 1, &sge, 1).code(), EINVAL);
    if (s == tp::QpState::kReset) {
      EXPECT_EQ(PostRecv(qp, 1, &sge, 1).code(), EINVAL);
    } else {
      EXPECT_TRUE(PostRecv(qp, 1, &sge, 1).ok());
    }
  }
  EXPECT_TRUE(Drain(f.get(), e.scq).empty());
}

TEST(QpStateMachineTest, PostSendInErrorFlushes) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint e = MakeEndpoint(f.get(), 0);
  tp::QueuePair* qp = QpIn(e, tp::QpType::kRc, tp::QpState::kError);
  tp::Sge sge = e.Sge(0, 8);
  ASSERT_TRUE(PostSend(qp, 42, &sge, 1).ok());
  ASSERT_TRUE(PostRecv(qp, 43, &sge, 1).ok());
  auto s = Drain(f.get(), e.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 42u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kWrFlushErr);
  auto r = Drain(f.get(), e.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 43u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kWrFlushErr);
}

TEST(QpStateMachineTest, SqdStopsNewWorkAndRaisesSqDrained) {
  RcPair p(TwoNodes());
  tp::Sge rs = p.b.Sge(0, 64);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
  tp::QpAttr a;
  a.qp_state = tp::QpState::kSqd;
  a.en_sqd_async_notify = 1;
  ASSERT_TRUE(p.qa->Modify(a, tp::kQpState | tp::kQpEnSqdAsyncNotify).ok());
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());  // accepted, not started
  EXPECT_TRUE(Drain(p.f.get(), p.b.rcq).empty());
  EXPECT_TRUE(HasEvent(Events(p.a.dev), tp::AsyncEventType::kSqDrained));
  a.qp_state = tp::QpState::kRts;
  ASSERT_TRUE(p.qa->Modify(a, tp::kQpState).ok());
  EXPECT_EQ(Drain(p.f.get(), p.b.rcq).size(), 1u);
}

TEST(FlushTest, EveryOutstandingAndLaterWrFlushesOnceWithOnlyTheErrorFields) {
  SimConfig c = TwoNodes();
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 1.0});
  RcPair p(c);
  tp::Sge ss = p.a.Sge(0, 8), rs = p.a.Sge(64, 64);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(PostSend(p.qa, 100 + i, &ss, 1, tp::WrOpcode::kSendWithImm,
                         tp::kSendSignaled, 0, 0, 99)
                    .ok());
    ASSERT_TRUE(PostRecv(p.qa, 200 + i, &rs, 1).ok());
  }
  p.f->RunUntil(1000);
  tp::QpAttr e;
  e.qp_state = tp::QpState::kError;
  ASSERT_TRUE(p.qa->Modify(e, tp::kQpState).ok());
  ASSERT_TRUE(PostSend(p.qa, 105, &ss, 1).ok());
  ASSERT_TRUE(PostRecv(p.qa, 205, &rs, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  auto r = Drain(p.f.get(), p.a.rcq);
  ASSERT_EQ(s.size(), 6u);
  ASSERT_EQ(r.size(), 6u);
  std::set<uint64_t> ids;
  for (auto* list : {&s, &r}) {
    for (const tp::WorkCompletion& wc : *list) {
      EXPECT_TRUE(ids.insert(wc.wr_id).second) << "twice: " << wc.wr_id;
      EXPECT_EQ(wc.status, tp::WcStatus::kWrFlushErr);
      EXPECT_EQ(wc.qp_num, p.qa->qp_num());
      EXPECT_NE(wc.vendor_err, 0u);
      EXPECT_EQ(wc.byte_len, 0u);
      EXPECT_EQ(wc.imm_data, 0u);
      EXPECT_EQ(wc.src_qp, 0u);
      EXPECT_EQ(wc.wc_flags, 0u);
      EXPECT_EQ(wc.slid, 0u);
      EXPECT_EQ(static_cast<uint32_t>(wc.opcode), 0u);
    }
  }
  EXPECT_EQ(ids.size(), 12u);
  // Order within each queue is posting order.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s[i].wr_id, 100u + i);
}

TEST(FlushTest, ResetDiscardsWithoutCompletionsAndQpIsReusable) {
  RcPair p(TwoNodes());
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  tp::QpAttr r;
  r.qp_state = tp::QpState::kReset;
  ASSERT_TRUE(p.qa->Modify(r, tp::kQpState).ok());
  ASSERT_TRUE(p.qb->Modify(r, tp::kQpState).ok());
  EXPECT_TRUE(Drain(p.f.get(), p.a.scq).empty());
  Connect(p.qa, 0, p.qb, 1);
  tp::Sge rs = p.b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 2u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
}

}  // namespace
}  // namespace softfab::sim::testing
