// Transport conformance, events: an SRQ's limit event fires once and disarms,
// and a completion channel's arm / event / ack cycle with the EBUSY rules of
// destroying what is still in use. Per backend (see transport_fixture.h).
#include <gtest/gtest.h>
#include <poll.h>

#include <cerrno>
#include <cstdint>

#include "tests/transport/transport_fixture.h"

namespace softfab::transport_testing {
namespace {

using EventsConformance = TransportTest;

TEST_P(EventsConformance, SrqLimitEventFiresOnceAndDisarms) {
  tp::SrqAttr sa;
  sa.max_wr = 16;
  sa.max_sge = 1;
  tp::SharedReceiveQueue* srq = Must(s_[1].pd->CreateSrq(sa));
  ASSERT_NE(srq, nullptr);
  const RcPair p = ConnectedPair(Params(), srq);
  ASSERT_FALSE(HasFatalFailure());
  for (int i = 0; i < 8; ++i) {
    tp::Sge sge = s_[1].Sge(i * 64, 64);
    tp::RecvWr wr;
    wr.wr_id = 100 + i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const tp::RecvWr* bad = nullptr;
    ASSERT_TRUE(srq->PostRecv(&wr, &bad).ok());
  }
  tp::SrqAttr arm;
  arm.srq_limit = 4;
  ASSERT_TRUE(srq->Modify(arm, tp::kSrqLimit).ok());
  tp::SrqAttr q;
  ASSERT_TRUE(srq->Query(&q).ok());
  EXPECT_EQ(q.srq_limit, 4u);
  tp::Sge sge = s_[0].Sge(0, 8);
  for (int i = 0; i < 5; ++i) {  // 8 -> 3 posted: below the limit of 4
    ASSERT_TRUE(PostSend(p.a, 200 + i, &sge, 1).ok());
  }
  EXPECT_EQ(PollN(s_[1].rcq, 5).size(), 5u);
  EXPECT_EQ(PollN(s_[0].scq, 5).size(), 5u);
  tp::AsyncEvent ev;
  bool seen = false;
  const uint64_t deadline = NowMs() + kWaitMs;
  while (!seen && NowMs() < deadline) {
    Settle();
    Status s = s_[1].dev->GetAsyncEvent(&ev);
    if (s.code() == EAGAIN) {
      if (sim()) break;  // the fabric is idle: nothing more will come
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.message();
    if (ev.event_type == tp::AsyncEventType::kSrqLimitReached) {
      EXPECT_EQ(ev.srq_handle, srq->handle());
      EXPECT_GT(ev.time_ns, 0u);
      seen = true;
    }
  }
  EXPECT_TRUE(seen);
  ASSERT_TRUE(srq->Query(&q).ok());
  EXPECT_EQ(q.srq_limit, 0u);
  EXPECT_EQ(s_[1].dev->GetAsyncEvent(&ev).code(), EAGAIN);
}

// Waits for `fd` to become readable: on the simulator, which raises events
// only while it runs, after running it dry; on a device up to kWaitMs.
bool WaitReadable(int fd, bool sim) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, sim ? 0 : static_cast<int>(kWaitMs)) == 1;
}

TEST_P(EventsConformance, CompletionChannelArmEventAckAndBusy) {
  tp::Device* dev = s_[1].dev;
  tp::CompletionChannel* ch = Must(dev->CreateCompChannel());
  ASSERT_NE(ch, nullptr);
  tp::CompletionQueue* recv_cq = Must(dev->CreateCqOnChannel(16, ch));
  ASSERT_NE(recv_cq, nullptr);
  tp::QueuePair* a = Qp(0, RcInit(0));
  tp::QpInitAttr init = RcInit(1, 4);
  init.recv_cq = recv_cq;
  tp::QueuePair* b = Qp(1, init);
  Connect(a, b, Params());
  ASSERT_FALSE(HasFatalFailure());
  tp::CompletionQueue* got = nullptr;
  EXPECT_EQ(ch->GetEvent(&got).code(), EAGAIN);  // nothing armed yet

  ASSERT_TRUE(recv_cq->RequestNotify(false).ok());
  tp::Sge rs = s_[1].Sge(64, 64);
  ASSERT_TRUE(PostRecv(b, 700, &rs, 1).ok());
  tp::Sge ss = s_[0].Sge(0, 8);
  ASSERT_TRUE(PostSend(a, 701, &ss, 1).ok());
  Settle();
  ASSERT_TRUE(WaitReadable(ch->fd(), sim()));
  ASSERT_TRUE(ch->GetEvent(&got).ok());
  EXPECT_EQ(got, recv_cq);
  EXPECT_EQ(ch->GetEvent(&got).code(), EAGAIN);  // one arm, one event
  // Unacked events keep the CQ alive; the channel is busy while a CQ uses it.
  ASSERT_TRUE(b->Destroy().ok());
  EXPECT_EQ(recv_cq->Destroy().code(), EBUSY);
  EXPECT_EQ(ch->Destroy().code(), EBUSY);
  tp::WorkCompletion wc;
  ASSERT_EQ(recv_cq->Poll(1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 700u);
  EXPECT_EQ(PollN(s_[0].scq, 1).size(), 1u);
  recv_cq->AckEvents(5);  // only the one taken is acked
  EXPECT_TRUE(recv_cq->Destroy().ok());
  EXPECT_TRUE(ch->Destroy().ok());
}

SOFTFAB_INSTANTIATE_PER_TRANSPORT(EventsConformance);

}  // namespace
}  // namespace softfab::transport_testing
