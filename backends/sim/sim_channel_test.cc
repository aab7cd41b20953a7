// Tests of completion channels (sim_channel.cc): the arm / event / ack cycle,
// one event per arm, solicited-only arms (the SE bit carried in the packet),
// the eventfd's readability, EBUSY and EINVAL, several CQs on one channel,
// virtual time (the fd becomes readable only as the fabric runs), and
// determinism.
#include <gtest/gtest.h>
#include <poll.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

// poll(2) with a zero timeout: is `fd` readable right now?
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  const int n = ::poll(&p, 1, 0);
  EXPECT_GE(n, 0);
  return n == 1 && (p.revents & POLLIN) != 0;
}

// Every event pending on `ch`, in order (each taken and acked).
std::vector<tp::CompletionQueue*> TakeAll(tp::CompletionChannel* ch) {
  std::vector<tp::CompletionQueue*> out;
  tp::CompletionQueue* cq = nullptr;
  for (Status s = ch->GetEvent(&cq); s.ok(); s = ch->GetEvent(&cq)) {
    out.push_back(cq);
    cq->AckEvents(1);
  }
  return out;
}

// An RC pair on nodes 0 (a, the sender) and 1 (b); b's receive CQ is on the
// channel `ch`, and qb has receives posted.
struct ChannelPair {
  std::unique_ptr<SimFabric> f;
  Endpoint a, b;
  tp::CompletionChannel* ch = nullptr;
  tp::QueuePair* qa = nullptr;
  tp::QueuePair* qb = nullptr;

  explicit ChannelPair(const SimConfig& c = TwoNodes())
      : f(CreateSimFabric(c)),
        a(MakeEndpoint(f.get(), 0)),
        b(MakeEndpoint(f.get(), 1)) {
    ch = Must(b.dev->CreateCompChannel());
    b.rcq = Must(b.dev->CreateCqOnChannel(256, ch));
    qa = Must(a.pd->CreateQp(RcInit(a)));
    qb = Must(b.pd->CreateQp(RcInit(b)));
    Connect(qa, 0, qb, 1);
    for (uint64_t i = 0; i < 32; ++i) {
      tp::Sge rs = b.Sge(i * 64, 64);
      EXPECT_TRUE(PostRecv(qb, i, &rs, 1).ok());
    }
  }
  // Posts an 8-byte message (a WRITE_WITH_IMM writes into b's buffer).
  void Send(uint64_t wr_id, uint32_t flags = 0,
            tp::WrOpcode op = tp::WrOpcode::kSend) {
    tp::Sge s = a.Sge(0, 8);
    ASSERT_TRUE(PostSend(qa, wr_id, &s, 1, op, flags,
                         reinterpret_cast<uint64_t>(b.buf.data()) + 4096,
                         b.mr->rkey(), 7)
                    .ok());
  }
  size_t Completions() { return Drain(f.get(), b.rcq).size(); }
};

TEST(ChannelTest, ArmEventAckCycle) {
  ChannelPair p;
  EXPECT_FALSE(Readable(p.ch->fd()));
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(1);
  EXPECT_FALSE(Readable(p.ch->fd()));  // nothing has run yet
  p.f->RunUntilIdle();
  EXPECT_TRUE(Readable(p.ch->fd()));
  tp::CompletionQueue* cq = nullptr;
  ASSERT_TRUE(p.ch->GetEvent(&cq).ok());
  EXPECT_EQ(cq, p.b.rcq);
  EXPECT_FALSE(Readable(p.ch->fd()));  // drained with the last event
  EXPECT_EQ(p.ch->GetEvent(&cq).code(), EAGAIN);
  cq->AckEvents(1);
  EXPECT_EQ(p.Completions(), 1u);
  // Re-arm, and the next completion raises the next event.
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(2);
  EXPECT_EQ(p.Completions(), 1u);
  EXPECT_EQ(TakeAll(p.ch), std::vector<tp::CompletionQueue*>{p.b.rcq});
}

TEST(ChannelTest, OneEventPerArm) {
  ChannelPair p;
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());  // twice: still one event
  for (int i = 0; i < 3; ++i) p.Send(i);
  EXPECT_EQ(p.Completions(), 3u);
  EXPECT_EQ(TakeAll(p.ch).size(), 1u);
  p.Send(3);
  EXPECT_EQ(p.Completions(), 1u);
  EXPECT_TRUE(TakeAll(p.ch).empty());  // disarmed by the first event
  // Arming again without taking the event in between: two events queue.
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(4);
  p.f->RunUntilIdle();
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(5);
  EXPECT_EQ(p.Completions(), 2u);
  EXPECT_EQ(TakeAll(p.ch).size(), 2u);
}

TEST(ChannelTest, CompletionsBeforeArmingRaiseNothing) {
  ChannelPair p;
  p.Send(1);
  p.f->RunUntilIdle();  // the completion is in the CQ, unread
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  EXPECT_FALSE(Readable(p.ch->fd()));
  tp::CompletionQueue* cq = nullptr;
  EXPECT_EQ(p.ch->GetEvent(&cq).code(), EAGAIN);
  EXPECT_EQ(p.Completions(), 1u);  // reading it raises nothing either
  EXPECT_TRUE(TakeAll(p.ch).empty());
  p.Send(2);
  EXPECT_EQ(p.Completions(), 1u);
  EXPECT_EQ(TakeAll(p.ch).size(), 1u);
}

TEST(ChannelTest, SolicitedOnlyWaitsForTheSeBit) {
  ChannelPair p;
  ASSERT_TRUE(p.b.rcq->RequestNotify(true).ok());
  p.Send(1);
  p.Send(2, tp::kSendSolicited, tp::WrOpcode::kRdmaWrite);  // no receive
  EXPECT_EQ(p.Completions(), 1u);
  EXPECT_TRUE(TakeAll(p.ch).empty());  // still armed
  p.Send(3, tp::kSendSolicited);
  EXPECT_EQ(p.Completions(), 1u);
  EXPECT_EQ(TakeAll(p.ch).size(), 1u);
  ASSERT_TRUE(p.b.rcq->RequestNotify(true).ok());
  p.Send(4, tp::kSendSolicited, tp::WrOpcode::kRdmaWriteWithImm);
  auto wc = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, tp::WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(TakeAll(p.ch).size(), 1u);
}

TEST(ChannelTest, ANextCompletionArmIsNotNarrowedBySolicitedOnly) {
  ChannelPair p;
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  ASSERT_TRUE(p.b.rcq->RequestNotify(true).ok());
  p.Send(1);
  EXPECT_EQ(p.Completions(), 1u);
  EXPECT_EQ(TakeAll(p.ch).size(), 1u);
}

// As in rxe: send completions never count as solicited, nor do flushed
// receives (errors without a packet); an arm for any completion takes them.
TEST(ChannelTest, SendCompletionsAndFlushesAreNotSolicited) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  tp::CompletionChannel* ch = Must(a.dev->CreateCompChannel());
  a.scq = Must(a.dev->CreateCqOnChannel(64, ch));
  a.rcq = Must(a.dev->CreateCqOnChannel(64, ch));
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge s = a.Sge(0, 8), r = b.Sge(0, 8), ra = a.Sge(64, 8);
  ASSERT_TRUE(PostRecv(qb, 1, &r, 1).ok());
  ASSERT_TRUE(PostRecv(qa, 2, &ra, 1).ok());
  ASSERT_TRUE(a.scq->RequestNotify(true).ok());
  ASSERT_TRUE(a.rcq->RequestNotify(true).ok());
  ASSERT_TRUE(PostSend(qa, 1, &s, 1, tp::WrOpcode::kSend,
                       tp::kSendSolicited | tp::kSendSignaled)
                  .ok());
  ASSERT_EQ(Drain(f.get(), a.scq).size(), 1u);
  tp::QpAttr err;
  err.qp_state = tp::QpState::kError;
  ASSERT_TRUE(qa->Modify(err, tp::kQpState).ok());
  auto flushed = Drain(f.get(), a.rcq);
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].status, tp::WcStatus::kWrFlushErr);
  EXPECT_TRUE(TakeAll(ch).empty());
  // Armed for any completion, a flush raises the event.
  ASSERT_TRUE(a.rcq->RequestNotify(false).ok());
  ASSERT_TRUE(PostRecv(qa, 3, &ra, 1).ok());  // flushed at once in ERROR
  EXPECT_EQ(TakeAll(ch), std::vector<tp::CompletionQueue*>{a.rcq});
}

TEST(ChannelTest, UdSolicitedSend) {
  TwoEndpoints e(TwoNodes());
  tp::CompletionChannel* ch = Must(e.b.dev->CreateCompChannel());
  e.b.rcq = Must(e.b.dev->CreateCqOnChannel(64, ch));
  tp::QueuePair* qa = QpIn(e.a, tp::QpType::kUd, tp::QpState::kRts);
  tp::QueuePair* qb = QpIn(e.b, tp::QpType::kUd, tp::QpState::kRts);
  tp::AhAttr ahattr;
  ahattr.is_global = 1;
  ahattr.port_num = 1;
  ASSERT_TRUE(e.b.dev->QueryGid(1, 0, &ahattr.grh.dgid).ok());
  tp::AddressHandle* ah = Must(e.a.pd->CreateAh(ahattr));
  ASSERT_TRUE(e.b.rcq->RequestNotify(true).ok());
  for (uint32_t flags : {0u, tp::kSendSolicited}) {
    tp::Sge rs = e.b.Sge(0, 64), s = e.a.Sge(0, 8);
    ASSERT_TRUE(PostRecv(qb, flags, &rs, 1).ok());
    tp::SendWr wr;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.send_flags = flags;
    wr.ud.ah = ah;
    wr.ud.remote_qpn = qb->qp_num();
    wr.ud.remote_qkey = 0x11111111;
    const tp::SendWr* bad = nullptr;
    ASSERT_TRUE(qa->PostSend(&wr, &bad).ok());
    ASSERT_EQ(Drain(e.f.get(), e.b.rcq).size(), 1u);
    EXPECT_EQ(TakeAll(ch).size(), flags == 0 ? 0u : 1u);
  }
}

// Virtual time: nothing makes the fd readable but running the fabric, by
// Step / RunUntil / RunUntilIdle or by polling a CQ (which runs it).
TEST(ChannelTest, FdBecomesReadableOnlyAsEventsRun) {
  ChannelPair p;
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(1);
  ASSERT_GT(p.f->pending_events(), 0u);
  int steps = 0;
  while (!Readable(p.ch->fd())) {
    ASSERT_TRUE(p.f->Step()) << "the fabric went idle without an event";
    ++steps;
  }
  EXPECT_GT(steps, 0);
  EXPECT_GT(p.f->clock().NowNs(), 0u);
  EXPECT_EQ(TakeAll(p.ch).size(), 1u);
  // A busy-poll of the CQ drives the fabric too.
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(2);
  EXPECT_FALSE(Readable(p.ch->fd()));
  PollOne(p.b.rcq);  // the first completion, already there
  PollOne(p.b.rcq);  // runs events until the second arrives
  EXPECT_TRUE(Readable(p.ch->fd()));
  EXPECT_EQ(TakeAll(p.ch).size(), 1u);
}

TEST(ChannelTest, GetEventOnAnEmptyChannelIsEagain) {
  auto f = CreateSimFabric(TwoNodes());
  tp::CompletionChannel* ch = Must(f->device(0)->CreateCompChannel());
  tp::CompletionQueue* cq = nullptr;
  EXPECT_EQ(ch->GetEvent(&cq).code(), EAGAIN);
  EXPECT_EQ(cq, nullptr);
  EXPECT_FALSE(Readable(ch->fd()));
  EXPECT_TRUE(ch->Destroy().ok());
}

TEST(ChannelTest, DestroyIsBusyWhileEventsAreUnackedOrCqsUseIt) {
  ChannelPair p;
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(1);
  EXPECT_EQ(p.Completions(), 1u);
  tp::CompletionQueue* cq = nullptr;
  ASSERT_TRUE(p.ch->GetEvent(&cq).ok());
  ASSERT_TRUE(p.qb->Destroy().ok());
  EXPECT_EQ(p.b.rcq->Destroy().code(), EBUSY);  // one event not acked
  EXPECT_EQ(p.ch->Destroy().code(), EBUSY);     // the CQ still uses it
  p.b.rcq->AckEvents(0);
  EXPECT_EQ(p.b.rcq->Destroy().code(), EBUSY);
  p.b.rcq->AckEvents(5);  // more than taken: acks the one taken
  EXPECT_TRUE(p.b.rcq->Destroy().ok());
  EXPECT_TRUE(p.ch->Destroy().ok());
}

TEST(ChannelTest, DestroyingACqDropsItsUntakenEvents) {
  ChannelPair p;
  tp::CompletionQueue* other = Must(p.b.dev->CreateCqOnChannel(8, p.ch));
  ASSERT_TRUE(p.b.rcq->RequestNotify(false).ok());
  p.Send(1);
  p.f->RunUntilIdle();
  ASSERT_TRUE(Readable(p.ch->fd()));
  ASSERT_TRUE(p.qb->Destroy().ok());
  ASSERT_TRUE(p.b.rcq->Destroy().ok());  // none taken, so none to ack
  EXPECT_FALSE(Readable(p.ch->fd()));
  tp::CompletionQueue* cq = nullptr;
  EXPECT_EQ(p.ch->GetEvent(&cq).code(), EAGAIN);
  EXPECT_EQ(p.ch->Destroy().code(), EBUSY);  // `other` still uses it
  ASSERT_TRUE(other->Destroy().ok());
  EXPECT_TRUE(p.ch->Destroy().ok());
}

TEST(ChannelTest, InvalidArguments) {
  auto f = CreateSimFabric(TwoNodes());
  tp::Device* d0 = f->device(0);
  tp::Device* d1 = f->device(1);
  tp::CompletionChannel* ch = Must(d0->CreateCompChannel());
  EXPECT_EQ(d1->CreateCqOnChannel(8, ch).status().code(), EINVAL);
  EXPECT_EQ(d0->CreateCqOnChannel(0, ch).status().code(), EINVAL);
  EXPECT_EQ(ch->GetEvent(nullptr).code(), EINVAL);
  // None of the failures took a reference on the channel.
  EXPECT_TRUE(ch->Destroy().ok());
  // A destroyed channel is not this device's any more (checked before any
  // other channel is created, which could reuse its address).
  tp::CompletionChannel* gone = Must(d0->CreateCompChannel());
  ASSERT_TRUE(gone->Destroy().ok());
  EXPECT_EQ(d0->CreateCqOnChannel(8, gone).status().code(), EINVAL);
  tp::CompletionChannel* live = Must(d0->CreateCompChannel());
  // A null channel is a plain CQ; as in rdma-core, arming a CQ without a
  // channel succeeds and its events go nowhere.
  tp::CompletionQueue* plain = Must(d0->CreateCqOnChannel(8, nullptr));
  EXPECT_TRUE(plain->RequestNotify(false).ok());
  EXPECT_TRUE(plain->Destroy().ok());
  EXPECT_TRUE(live->Destroy().ok());
}

// Two CQs on one channel: events come out in the order the completions armed
// them, which is the order the fabric ran them.
TEST(ChannelTest, TwoCqsOnOneChannelInCompletionOrder) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  tp::CompletionChannel* ch = Must(b.dev->CreateCompChannel());
  tp::CompletionQueue* cq1 = Must(b.dev->CreateCqOnChannel(16, ch));
  tp::CompletionQueue* cq2 = Must(b.dev->CreateCqOnChannel(16, ch));
  tp::QueuePair* qa[2];
  tp::QueuePair* qb[2];
  tp::CompletionQueue* rcqs[2] = {cq1, cq2};
  for (int i = 0; i < 2; ++i) {
    b.rcq = rcqs[i];
    qa[i] = Must(a.pd->CreateQp(RcInit(a)));
    qb[i] = Must(b.pd->CreateQp(RcInit(b)));
    Connect(qa[i], 0, qb[i], 1);
    tp::Sge rs = b.Sge(i * 8192, 8192);
    ASSERT_TRUE(PostRecv(qb[i], i, &rs, 1).ok());
    ASSERT_TRUE(rcqs[i]->RequestNotify(false).ok());
  }
  tp::Sge s = a.Sge(0, 8), big = a.Sge(0, 4096);
  // cq2's message is posted first and is short; cq1's goes out behind it.
  ASSERT_TRUE(PostSend(qa[1], 1, &s, 1).ok());
  ASSERT_TRUE(PostSend(qa[0], 0, &big, 1).ok());
  f->RunUntilIdle();
  EXPECT_TRUE(Readable(ch->fd()));
  tp::CompletionQueue* got = nullptr;
  ASSERT_TRUE(ch->GetEvent(&got).ok());
  EXPECT_EQ(got, cq2);
  EXPECT_TRUE(Readable(ch->fd()));  // one more pending
  ASSERT_TRUE(ch->GetEvent(&got).ok());
  EXPECT_EQ(got, cq1);
  EXPECT_FALSE(Readable(ch->fd()));
  cq1->AckEvents(1);
  cq2->AckEvents(1);
}

// A lossy run driven by a sleeper's loop: re-arm, poll, take events. Returns
// the sequence of (virtual time, message count) at each event and the digest.
struct SleeperTrace {
  std::vector<uint64_t> events;
  uint64_t digest = 0;
  bool operator==(const SleeperTrace&) const = default;
};

SleeperTrace SleeperRun(uint64_t seed, bool use_channel) {
  SimConfig c = TwoNodes(seed);
  PacketFault drop;
  drop.kind = PacketFaultKind::kDrop;
  drop.probability = 0.2;
  c.faults.packet_faults.push_back(drop);
  ChannelPair p(c);
  SleeperTrace run;
  uint64_t received = 0;
  for (uint64_t i = 0; i < 20; ++i) {
    if (use_channel) {
      EXPECT_TRUE(p.b.rcq->RequestNotify(i % 2 == 0).ok());
    }
    p.Send(i, i % 3 == 0 ? tp::kSendSolicited : 0);
    // Drive the fabric until this message arrives, as the sleeper's loop
    // must on the simulator, taking events as the fd signals them.
    while (received <= i) {
      tp::WorkCompletion wc;
      const int n = p.b.rcq->Poll(1, &wc);
      EXPECT_GE(n, 0);
      received += static_cast<uint64_t>(n);
      if (n == 0 && !p.f->Step()) break;
      if (use_channel && Readable(p.ch->fd())) {
        for (tp::CompletionQueue* cq : TakeAll(p.ch)) {
          EXPECT_EQ(cq, p.b.rcq);
          run.events.push_back(p.f->clock().NowNs() * 64 + received);
        }
      }
    }
  }
  EXPECT_EQ(received, 20u) << "seed " << seed;
  run.digest = p.f->digest();
  return run;
}

TEST(ChannelTest, Deterministic) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    const SleeperTrace one = SleeperRun(seed, true);
    EXPECT_FALSE(one.events.empty()) << "seed " << seed;
    EXPECT_EQ(one, SleeperRun(seed, true)) << "seed " << seed;
    // Arming and taking events changes nothing the fabric does.
    EXPECT_EQ(one.digest, SleeperRun(seed, false).digest) << "seed " << seed;
  }
}

}  // namespace
}  // namespace softfab::sim::testing
