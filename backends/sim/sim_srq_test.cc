// Tests of shared receive queues (sim_srq.cc): head fetch by whichever QP's
// message arrives, QPs that fetch nothing, bad_wr lists, the limit event, and a
// receiver stall that starves an SRQ into an RNR storm (issue 3, item 4).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

// `pairs` RC QP pairs from node 0 to node 1; the receivers on node 1 share one
// SRQ (max_wr, max_sge) that Post() fills with 64-byte buffers.
struct SrqSetup : TwoEndpoints {
  tp::SharedReceiveQueue* srq = nullptr;
  std::vector<tp::QueuePair*> senders, receivers;

  explicit SrqSetup(int pairs, uint32_t max_wr = 64, uint32_t max_sge = 2)
      : TwoEndpoints(TwoNodes()) {
    tp::SrqAttr sa;
    sa.max_wr = max_wr;
    sa.max_sge = max_sge;
    srq = Must(b.pd->CreateSrq(sa));
    for (int i = 0; i < pairs; ++i) {
      senders.push_back(Must(a.pd->CreateQp(RcInit(a))));
      receivers.push_back(Must(b.pd->CreateQp(RcInit(b, 64, srq))));
    }
  }
  void ConnectAll() {
    for (size_t i = 0; i < senders.size(); ++i)
      Connect(senders[i], 0, receivers[i], 1);
  }
  Status Post(uint64_t wr_id) {
    tp::Sge s = b.Sge(wr_id * 64, 64);
    tp::RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    const tp::RecvWr* bad;
    return srq->PostRecv(&wr, &bad);
  }
};

TEST(SrqTest, HeadFetchedByWhicheverQpsMessageArrives) {
  SrqSetup s(2);
  s.ConnectAll();
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(s.Post(i).ok());
  tp::Sge ss = s.a.Sge(0, 8);
  // QP1's message first, then QP0's, then QP1's: they take 0, 1, 2 in arrival
  // order.
  ASSERT_TRUE(PostSend(s.senders[1], 1, &ss, 1).ok());
  s.f->RunUntilIdle();
  ASSERT_TRUE(PostSend(s.senders[0], 2, &ss, 1).ok());
  s.f->RunUntilIdle();
  ASSERT_TRUE(PostSend(s.senders[1], 3, &ss, 1).ok());
  auto r = Drain(s.f.get(), s.b.rcq);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].wr_id, 0u);
  EXPECT_EQ(r[0].qp_num, s.receivers[1]->qp_num());
  EXPECT_EQ(r[1].wr_id, 1u);
  EXPECT_EQ(r[1].qp_num, s.receivers[0]->qp_num());
  EXPECT_EQ(r[2].wr_id, 2u);
  EXPECT_EQ(r[2].qp_num, s.receivers[1]->qp_num());
}

TEST(SrqTest, QpsInInitOrErrorFetchNothing) {
  SrqSetup s(2);
  // Pair 0 fully connected; pair 1's receiver stays in INIT while its sender is
  // RTS.
  Connect(s.senders[0], 0, s.receivers[0], 1);
  ASSERT_TRUE(ToInit(s.senders[1]).ok());
  ASSERT_TRUE(ToRtr(s.senders[1], 1, s.receivers[1]->qp_num()).ok());
  ASSERT_TRUE(ToRts(s.senders[1]).ok());
  ASSERT_TRUE(ToInit(s.receivers[1]).ok());
  for (uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(s.Post(i).ok());
  tp::Sge ss = s.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(s.senders[1], 1, &ss, 1).ok());
  s.f->RunUntil(1'000'000);
  ASSERT_TRUE(PostSend(s.senders[0], 2, &ss, 1).ok());
  s.f->RunUntil(2'000'000);
  tp::WorkCompletion wc[4];
  ASSERT_EQ(s.b.rcq->Poll(4, wc), 1);
  EXPECT_EQ(wc[0].wr_id, 0u);  // the INIT QP took nothing
  EXPECT_EQ(wc[0].qp_num, s.receivers[0]->qp_num());
  // Receiver 0 to ERROR: it raises LAST_WQE_REACHED and fetches nothing more;
  // the SRQ's request stays for others (it is not flushed with the QP).
  tp::QpAttr e;
  e.qp_state = tp::QpState::kError;
  ASSERT_TRUE(s.receivers[0]->Modify(e, tp::kQpState).ok());
  auto ev = Events(s.b.dev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kQpLastWqeReached);
  EXPECT_EQ(ev[0].qp_num, s.receivers[0]->qp_num());
  ASSERT_TRUE(PostSend(s.senders[0], 3, &ss, 1).ok());
  s.f->RunUntil(3'000'000);
  // Bring receiver 1 up: the remaining request (wr 1) is still at the head.
  ASSERT_TRUE(ToRtr(s.receivers[1], 0, s.senders[1]->qp_num()).ok());
  auto r = Drain(s.f.get(), s.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 1u);
  EXPECT_EQ(r[0].qp_num, s.receivers[1]->qp_num());
}

TEST(SrqTest, PostListStopsAtFirstBadWr) {
  SrqSetup s(1, /*max_wr=*/3, /*max_sge=*/1);
  s.ConnectAll();
  tp::Sge one = s.b.Sge(0, 64);
  tp::Sge two[2] = {s.b.Sge(64, 8), s.b.Sge(128, 8)};
  tp::RecvWr w[3];
  w[0].wr_id = 10;
  w[0].sg_list = &one;
  w[0].num_sge = 1;
  w[0].next = &w[1];
  w[1].wr_id = 11;
  w[1].sg_list = two;
  w[1].num_sge = 2;  // more than max_sge
  w[1].next = &w[2];
  w[2].wr_id = 12;
  w[2].sg_list = &one;
  w[2].num_sge = 1;
  const tp::RecvWr* bad = nullptr;
  EXPECT_EQ(s.srq->PostRecv(&w[0], &bad).code(), EINVAL);
  EXPECT_EQ(bad, &w[1]);
  // Only wr 10 is posted: two messages -> one completion, then RNR on the
  // second.
  tp::Sge ss = s.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(s.senders[0], 1, &ss, 1).ok());
  ASSERT_TRUE(PostSend(s.senders[0], 2, &ss, 1).ok());
  s.f->RunUntil(5'000'000);
  tp::WorkCompletion wc[4];
  ASSERT_EQ(s.b.rcq->Poll(4, wc), 1);
  EXPECT_EQ(wc[0].wr_id, 10u);
  EXPECT_GT(s.f->stats().rnr_naks, 0u);
  // Full: capacity 3; a list of four fails with ENOMEM at the fourth.
  tp::RecvWr f4[4];
  for (int i = 0; i < 4; ++i) {
    f4[i].wr_id = 20 + i;
    f4[i].sg_list = &one;
    f4[i].num_sge = 1;
    f4[i].next = i < 3 ? &f4[i + 1] : nullptr;
  }
  EXPECT_EQ(s.srq->PostRecv(&f4[0], &bad).code(), ENOMEM);
  EXPECT_EQ(bad, &f4[3]);
  // The pending send takes wr 20 (retried after the RNR delay).
  s.f->RunUntil(20'000'000);
  ASSERT_EQ(s.b.rcq->Poll(4, wc), 1);
  EXPECT_EQ(wc[0].wr_id, 20u);
}

TEST(SrqTest, LimitFiresOnceThenReadsBackZero) {
  SrqSetup s(1);
  s.ConnectAll();
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(s.Post(i).ok());
  tp::SrqAttr a;
  a.srq_limit = 100;
  EXPECT_EQ(s.srq->Modify(a, tp::kSrqLimit).code(), EINVAL);  // above max_wr
  a.max_wr = 128;
  EXPECT_EQ(s.srq->Modify(a, tp::kSrqMaxWr).code(), EINVAL);  // no resize
  a.srq_limit = 3;
  ASSERT_TRUE(s.srq->Modify(a, tp::kSrqLimit).ok());
  tp::SrqAttr q;
  ASSERT_TRUE(s.srq->Query(&q).ok());
  EXPECT_EQ(q.srq_limit, 3u);
  EXPECT_EQ(q.max_wr, 64u);
  tp::Sge ss = s.a.Sge(0, 8);
  // 5 -> 4 -> 3: not below 3 yet.
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(PostSend(s.senders[0], i, &ss, 1).ok());
  s.f->RunUntilIdle();
  EXPECT_TRUE(Events(s.b.dev).empty());
  // 3 -> 2: fires.
  ASSERT_TRUE(PostSend(s.senders[0], 2, &ss, 1).ok());
  s.f->RunUntilIdle();
  auto ev = Events(s.b.dev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kSrqLimitReached);
  EXPECT_EQ(ev[0].srq_handle, s.srq->handle());
  ASSERT_TRUE(s.srq->Query(&q).ok());
  EXPECT_EQ(q.srq_limit, 0u);
  // 2 -> 1: no second event.
  ASSERT_TRUE(PostSend(s.senders[0], 3, &ss, 1).ok());
  s.f->RunUntilIdle();
  EXPECT_TRUE(Events(s.b.dev).empty());
  EXPECT_EQ(Drain(s.f.get(), s.b.rcq).size(), 4u);
}

TEST(SrqTest, ReceiverStallStarvesSrqIntoRnrStorm) {
  SimConfig c = TwoNodes();
  TimedFault stall;
  stall.kind = TimedFaultKind::kReceiverStall;
  stall.node = 1;
  stall.time_ns = 0;
  stall.duration_ns = 2'000'000;
  c.faults.timed_faults.push_back(stall);
  auto f = CreateSimFabric(c);
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  tp::SrqAttr sa;
  sa.max_wr = 16;
  sa.max_sge = 1;
  tp::SharedReceiveQueue* srq = Must(b.pd->CreateSrq(sa));
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b, 64, srq)));
  Connect(qa, 0, qb, 1);
  tp::Sge rs = b.Sge(0, 64);
  tp::RecvWr rw;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  const tp::RecvWr* bad;
  ASSERT_TRUE(srq->PostRecv(&rw, &bad).ok());
  f->RunUntil(1);  // let the stall begin
  tp::Sge ss = a.Sge(0, 8);
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1).ok());
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_GT(f->stats().rnr_naks, 100u);  // 10 us RNR timer over a 2 ms stall
  EXPECT_GE(f->clock().NowNs(), 2'000'000u);
}

}  // namespace
}  // namespace softfab::sim::testing
