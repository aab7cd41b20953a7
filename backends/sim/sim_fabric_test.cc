// Behavioural tests of the simulated fabric: one test (at least) per model item
// of issue 3.
#include "backends/sim/sim_fabric.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "backends/sim/sim_test_util.h"
#include "core/transport.h"

namespace softfab::sim {
namespace {

using testing::Connect;
using testing::Drain;
using testing::Endpoint;
using testing::Events;
using testing::HasEvent;
using testing::MakeEndpoint;
using testing::Must;
using testing::PostRecv;
using testing::PostSend;
using testing::RcInit;
using testing::RcParams;
namespace tp = ::softfab::transport;

SimConfig TwoNodes(uint64_t seed = 7) {
  SimConfig c;
  c.nodes = 2;
  c.master_seed = seed;
  return c;
}

// A connected RC pair on nodes 0 and 1.
struct RcPair {
  std::unique_ptr<SimFabric> f;
  Endpoint a, b;
  tp::QueuePair* qa = nullptr;
  tp::QueuePair* qb = nullptr;

  explicit RcPair(const SimConfig& c, const RcParams& p = {},
                  uint32_t depth = 64) {
    f = CreateSimFabric(c);
    a = MakeEndpoint(f.get(), 0);
    b = MakeEndpoint(f.get(), 1);
    qa = Must(a.pd->CreateQp(RcInit(a, depth)));
    qb = Must(b.pd->CreateQp(RcInit(b, depth)));
    Connect(qa, 0, qb, 1, p);
  }
};

// ---------------------------------------------------------------- config and
// objects

TEST(SimConfigTest, RejectsBadConfigs) {
  SimConfig c = TwoNodes();
  EXPECT_TRUE(ValidateSimConfig(c).ok());
  c.nodes = 0;
  EXPECT_EQ(ValidateSimConfig(c).code(), EINVAL);
  EXPECT_EQ(CreateSimFabric(c), nullptr);
  c = TwoNodes();
  c.links.push_back(SimLinkConfig{0, 5});
  EXPECT_EQ(ValidateSimConfig(c).code(), EINVAL);
  c = TwoNodes();
  c.faults.packet_faults.push_back(PacketFault{});
  c.faults.packet_faults.back().probability = 1.5;
  EXPECT_EQ(ValidateSimConfig(c).code(), EINVAL);
}

TEST(SimDeviceTest, QueriesAndLimits) {
  auto f = CreateSimFabric(TwoNodes());
  ASSERT_EQ(f->num_devices(), 2);
  EXPECT_EQ(f->device(2), nullptr);
  tp::DeviceAttr da;
  ASSERT_TRUE(f->device(0)->QueryDevice(&da).ok());
  EXPECT_EQ(da.max_qp_wr, 16384);
  EXPECT_EQ(da.phys_port_cnt, 1);
  tp::PortAttr pa;
  EXPECT_EQ(f->device(1)->QueryPort(2, &pa).code(), EINVAL);
  ASSERT_TRUE(f->device(1)->QueryPort(1, &pa).ok());
  EXPECT_EQ(pa.lid, 2);
  EXPECT_EQ(pa.state, tp::PortState::kActive);
  tp::Gid g;
  ASSERT_TRUE(f->device(1)->QueryGid(1, 0, &g).ok());
  EXPECT_EQ(g.raw[10], 0xff);
  EXPECT_EQ(g.raw[15], 1);
  EXPECT_EQ(f->device(0)->CreateCq(0).status().code(), EINVAL);
  EXPECT_EQ(f->device(0)->CreateCq(da.max_cqe + 1).status().code(), EINVAL);
}

TEST(SimDeviceTest, RegMrValidatesAndDestroyIsRefcounted) {
  auto f = CreateSimFabric(TwoNodes());
  tp::ProtectionDomain* pd = Must(f->device(0)->AllocPd());
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(pd->RegMr(nullptr, 64, 0).status().code(), EINVAL);
  EXPECT_EQ(pd->RegMr(buf.data(), 0, 0).status().code(), EINVAL);
  EXPECT_EQ(pd->RegMr(buf.data(), 64, 1u << 9).status().code(), EINVAL);
  EXPECT_EQ(pd->RegMr(buf.data(), 64, tp::kAccessRemoteWrite).status().code(),
            EINVAL);
  tp::MemoryRegion* mr = Must(pd->RegMr(buf.data(), 64, tp::kAccessLocalWrite));
  EXPECT_EQ(mr->addr(), reinterpret_cast<uint64_t>(buf.data()));
  EXPECT_NE(mr->lkey(), mr->rkey());
  EXPECT_EQ(pd->Destroy().code(), EBUSY);
  ASSERT_TRUE(mr->Destroy().ok());
  EXPECT_TRUE(pd->Destroy().ok());
}

// ---------------------------------------------------------------- 1. QP state
// machine

// Drives a fresh QP to `s` (RESET, INIT, RTR, RTS, SQD or ERROR).
tp::QueuePair* QpIn(Endpoint& e, tp::QpType type, tp::QpState s) {
  tp::QpInitAttr init = RcInit(e);
  init.qp_type = type;
  tp::QueuePair* qp = Must(e.pd->CreateQp(init));
  if (s == tp::QpState::kReset) return qp;
  EXPECT_TRUE(testing::ToInit(qp).ok());
  if (s == tp::QpState::kError) {
    tp::QpAttr a;
    a.qp_state = tp::QpState::kError;
    EXPECT_TRUE(qp->Modify(a, tp::kQpState).ok());
    return qp;
  }
  if (s == tp::QpState::kInit) return qp;
  if (type == tp::QpType::kRc) {
    EXPECT_TRUE(testing::ToRtr(qp, 1, 0x100).ok());
  } else {
    tp::QpAttr a;
    a.qp_state = tp::QpState::kRtr;
    EXPECT_TRUE(qp->Modify(a, tp::kQpState).ok());
  }
  if (s == tp::QpState::kRtr) return qp;
  if (type == tp::QpType::kRc) {
    EXPECT_TRUE(testing::ToRts(qp).ok());
  } else {
    tp::QpAttr a;
    a.qp_state = tp::QpState::kRts;
    a.sq_psn = 1;
    EXPECT_TRUE(qp->Modify(a, tp::kQpState | tp::kQpSqPsn).ok());
  }
  if (s == tp::QpState::kRts) return qp;
  tp::QpAttr a;
  a.qp_state = tp::QpState::kSqd;
  EXPECT_TRUE(qp->Modify(a, tp::kQpState).ok());
  return qp;
}

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
  EXPECT_EQ(testing::ToRtr(qp, 98, 0x100).code(), EINVAL);
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

// ---------------------------------------------------------------- 2. RC
// transport

TEST(RcTest, SendRecvImmediateScatterAndMultiPacket) {
  RcPair p(TwoNodes());
  // 10000 bytes at MTU 1024 = 10 packets, scattered over three receive SGEs.
  for (int i = 0; i < 10000; ++i) p.a.buf[i] = static_cast<uint8_t>(i * 7);
  tp::Sge rs[3] = {p.b.Sge(0, 3000), p.b.Sge(5000, 3000), p.b.Sge(9000, 5000)};
  ASSERT_TRUE(PostRecv(p.qb, 77, rs, 3).ok());
  tp::Sge ss[2] = {p.a.Sge(0, 4000), p.a.Sge(4000, 6000)};
  ASSERT_TRUE(PostSend(p.qa, 5, ss, 2, tp::WrOpcode::kSendWithImm,
                       tp::kSendSignaled, 0, 0, 0xdeadbeef)
                  .ok());
  const uint64_t before = p.f->stats().packets_sent;
  auto r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].wr_id, 77u);
  EXPECT_EQ(r[0].opcode, tp::WcOpcode::kRecv);
  EXPECT_EQ(r[0].byte_len, 10000u);
  EXPECT_EQ(r[0].imm_data, 0xdeadbeefu);
  EXPECT_EQ(r[0].wc_flags, tp::kWcWithImm);
  EXPECT_EQ(r[0].src_qp, p.qa->qp_num());
  EXPECT_EQ(r[0].qp_num, p.qb->qp_num());
  for (int i = 0; i < 10000; ++i) {
    const size_t at = i < 3000   ? i
                      : i < 6000 ? 5000 + (i - 3000)
                                 : 9000 + (i - 6000);
    ASSERT_EQ(p.b.buf[at], static_cast<uint8_t>(i * 7)) << i;
  }
  EXPECT_EQ(p.b.buf[3000], 0);  // the gap between SGEs is untouched
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 5u);
  EXPECT_EQ(s[0].opcode, tp::WcOpcode::kSend);
  EXPECT_EQ(before, 10u);                     // all data packets leave at post
  EXPECT_EQ(p.f->stats().packets_sent, 11u);  // 10 data packets + 1 ACK
}

TEST(RcTest, LatencyAndBandwidthShapeCompletionTime) {
  SimConfig c = TwoNodes();
  c.default_link.latency_ns = 5000;
  c.default_link.bandwidth_bps = 8'000'000'000ull;  // 1 byte per ns
  RcPair p(c);
  tp::Sge rs = p.b.Sge(0, 1024);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  tp::Sge ss = p.a.Sge(0, 942);  // 942 + 58 header bytes = 1000 ns on the wire
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  tp::WorkCompletion wc;
  // Polling runs the fabric just until the completion.
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  // data: 1000 ns serialisation + 5000 latency; ack: 58 ns + 5000.
  EXPECT_EQ(p.f->clock().NowNs(), 1000u + 5000u + 58u + 5000u);
}

TEST(RcTest, UnsignaledSendsCompleteSilently) {
  SimConfig c = TwoNodes();
  auto f = CreateSimFabric(c);
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  tp::QpInitAttr ia = RcInit(a);
  ia.sq_sig_all = 0;
  tp::QueuePair* qa = Must(a.pd->CreateQp(ia));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge rs = b.Sge(0, 64), ss = a.Sge(0, 8);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(PostRecv(qb, i, &rs, 1).ok());
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1).ok());
  ASSERT_TRUE(
      PostSend(qa, 2, &ss, 1, tp::WrOpcode::kSend, tp::kSendSignaled).ok());
  ASSERT_TRUE(PostSend(qa, 3, &ss, 1).ok());
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 2u);
  EXPECT_EQ(Drain(f.get(), b.rcq).size(), 3u);
}

// In-order, exactly-once delivery of `n` numbered messages under the given
// faults.
void ExpectExactlyOnce(const std::vector<PacketFault>& faults, uint64_t seed,
                       int n = 300) {
  SimConfig c = TwoNodes(seed);
  c.faults.packet_faults = faults;
  RcParams params;
  params.timeout = 8;  // ~1 ms
  RcPair p(c, params, 512);
  for (int i = 0; i < n; ++i) {
    tp::Sge rs = p.b.Sge(static_cast<uint64_t>(i) * 64, 64);
    ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
  }
  for (int i = 0; i < n; ++i) {
    // 2000-byte messages span two packets at MTU 1024; the first 4 bytes carry
    // the index.
    std::memcpy(&p.a.buf[i * 8], &i, 4);
    tp::Sge ss = p.a.Sge(static_cast<uint64_t>(i) * 8, 8);
    ASSERT_TRUE(PostSend(p.qa, 1000 + i, &ss, 1).ok());
  }
  auto r = Drain(p.f.get(), p.b.rcq);
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(r.size(), static_cast<size_t>(n)) << "seed " << seed;
  ASSERT_EQ(s.size(), static_cast<size_t>(n)) << "seed " << seed;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(r[i].status, tp::WcStatus::kSuccess);
    EXPECT_EQ(r[i].wr_id, static_cast<uint64_t>(i));  // in order
    int got;
    std::memcpy(&got, &p.b.buf[i * 64], 4);
    EXPECT_EQ(got, i);
    EXPECT_EQ(s[i].wr_id, 1000u + i);
    EXPECT_EQ(s[i].status, tp::WcStatus::kSuccess);
  }
}

TEST(RcTest, AnUnsignaledWrThatFailsStillCompletes) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  tp::QpInitAttr ia = RcInit(a);
  ia.sq_sig_all = 0;
  tp::QueuePair* qa = Must(a.pd->CreateQp(ia));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge rs = b.Sge(0, 64), good = a.Sge(0, 8), bad = a.Sge(0, 8);
  bad.lkey ^= 0x100;
  ASSERT_TRUE(PostRecv(qb, 1, &rs, 1).ok());
  ASSERT_TRUE(
      PostSend(qa, 1, &good, 1).ok());  // unsignaled, succeeds: no completion
  ASSERT_TRUE(PostSend(qa, 2, &bad, 1).ok());   // unsignaled, fails: completes
  ASSERT_TRUE(PostSend(qa, 3, &good, 1).ok());  // flushed: completes
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].wr_id, 2u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kLocProtErr);
  EXPECT_EQ(s[1].wr_id, 3u);
  EXPECT_EQ(s[1].status, tp::WcStatus::kWrFlushErr);
}

TEST(RcTest, ExactlyOnceInOrderUnderDrop) {
  PacketFault d;
  d.kind = PacketFaultKind::kDrop;
  d.probability = 0.2;
  ExpectExactlyOnce({d}, 11);
}

TEST(RcTest, ExactlyOnceInOrderUnderDuplicateReorderCorruptDelay) {
  PacketFault dup{PacketFaultKind::kDuplicate, 0.2};
  dup.delay_ns = 3000;
  PacketFault reo{PacketFaultKind::kReorder, 0.2};
  reo.delay_ns = 7000;
  PacketFault cor{PacketFaultKind::kCorrupt, 0.05};
  PacketFault exp{PacketFaultKind::kDelayExponential, 0.3};
  exp.delay_ns = 2000;
  PacketFault drop{PacketFaultKind::kDrop, 0.05};
  for (uint64_t seed : {1, 2, 3})
    ExpectExactlyOnce({dup, reo, cor, exp, drop}, seed);
}

TEST(RcTest, LargeMessagesUnderLossAreIntact) {
  SimConfig c = TwoNodes(5);
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 0.1});
  RcParams prm;
  prm.timeout = 8;
  RcPair p(c, prm);
  for (size_t i = 0; i < 30000; ++i)
    p.a.buf[i] = static_cast<uint8_t>(i * 13 + 1);
  tp::Sge rs = p.b.Sge(0, 30000), ss = p.a.Sge(0, 30000);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  auto r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].byte_len, 30000u);
  EXPECT_EQ(std::memcmp(p.a.buf.data(), p.b.buf.data(), 30000), 0);
  EXPECT_GT(p.f->stats().retransmits, 0u);
}

TEST(RcTest, AckTimeoutThenRetryExceeded) {
  SimConfig c = TwoNodes();
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 1.0});
  RcParams prm;
  prm.timeout = 10;  // 4.096 us * 1024 = 4194304 ns
  prm.retry_cnt = 3;
  RcPair p(c, prm);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 9, &ss, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 10, &ss, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].wr_id, 9u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kRetryExcErr);
  EXPECT_EQ(s[1].status, tp::WcStatus::kWrFlushErr);
  EXPECT_EQ(p.qa->state(), tp::QpState::kError);
  // 1 try + 3 retries, each waiting one timeout.
  EXPECT_EQ(p.f->clock().NowNs(), 4u * 4194304u);
  EXPECT_EQ(p.f->stats().retransmits, 3u);
}

TEST(RcTest, TimeoutZeroWaitsForever) {
  SimConfig c = TwoNodes();
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 1.0});
  RcParams prm;
  prm.timeout = 0;
  RcPair p(c, prm);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 9, &ss, 1).ok());
  p.f->RunUntil(10'000'000'000ull);
  EXPECT_EQ(p.f->pending_events(), 0u);  // no timer armed
  tp::WorkCompletion wc;
  EXPECT_EQ(p.a.scq->Poll(1, &wc), 0);
  EXPECT_EQ(p.qa->state(), tp::QpState::kRts);
}

// ---------------------------------------------------------------- 3. RNR

TEST(RnrTest, RetriesThenRnrRetryExceeded) {
  RcParams prm;
  prm.rnr_retry = 2;
  prm.min_rnr_timer = 14;  // 1.28 ms
  RcPair p(TwoNodes(), prm);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 4, &ss, 1).ok());
  EXPECT_EQ(testing::PollOne(p.a.scq).status, tp::WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(p.qa->state(), tp::QpState::kError);
  EXPECT_EQ(p.f->stats().rnr_naks, 3u);  // first try + 2 retries
  // Two waits of 1.28 ms plus three round trips of ~2 us.
  EXPECT_GE(p.f->clock().NowNs(), 2u * 1280000u);
  EXPECT_LT(p.f->clock().NowNs(), 2u * 1280000u + 20000u);
}

TEST(RnrTest, TimerTableEncodings) {
  const uint64_t expect_ns[] = {655360000, 10000,  20000,  30000,  40000,
                                60000,     80000,  120000, 160000, 240000,
                                320000,    480000, 640000};
  for (uint8_t enc = 0; enc < 13; ++enc) {
    RcParams prm;
    prm.rnr_retry = 1;
    prm.min_rnr_timer = enc;
    RcPair p(TwoNodes(), prm);
    tp::Sge ss = p.a.Sge(0, 8);
    ASSERT_TRUE(PostSend(p.qa, 4, &ss, 1).ok());
    EXPECT_EQ(testing::PollOne(p.a.scq).status, tp::WcStatus::kRnrRetryExcErr);
    const uint64_t t = p.f->clock().NowNs();
    EXPECT_GE(t, expect_ns[enc]) << int(enc);
    EXPECT_LT(t, expect_ns[enc] + 10000) << int(enc);
  }
}

TEST(RnrTest, InfiniteRnrRetryDeliversOnceARecvIsPosted) {
  RcParams prm;
  prm.rnr_retry = 7;
  RcPair p(TwoNodes(), prm);
  tp::Sge ss = p.a.Sge(0, 8);
  p.a.buf[0] = 0x3c;
  ASSERT_TRUE(PostSend(p.qa, 4, &ss, 1).ok());
  p.f->RunUntil(50'000'000);  // 50 ms of RNR NAKs at 10 us each
  EXPECT_GT(p.f->stats().rnr_naks, 1000u);
  tp::Sge rs = p.b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(p.b.buf[0], 0x3c);
}

// ---------------------------------------------------------------- 4. SRQ

struct SrqSetup {
  std::unique_ptr<SimFabric> f;
  Endpoint a, b;
  tp::SharedReceiveQueue* srq = nullptr;
  std::vector<tp::QueuePair*> senders, receivers;

  SrqSetup(int pairs, uint32_t max_wr = 64, uint32_t max_sge = 2) {
    f = CreateSimFabric(TwoNodes());
    a = MakeEndpoint(f.get(), 0);
    b = MakeEndpoint(f.get(), 1);
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
  ASSERT_TRUE(testing::ToInit(s.senders[1]).ok());
  ASSERT_TRUE(testing::ToRtr(s.senders[1], 1, s.receivers[1]->qp_num()).ok());
  ASSERT_TRUE(testing::ToRts(s.senders[1]).ok());
  ASSERT_TRUE(testing::ToInit(s.receivers[1]).ok());
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
  ASSERT_TRUE(testing::ToRtr(s.receivers[1], 0, s.senders[1]->qp_num()).ok());
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

// ---------------------------------------------------------------- 5. UD

struct UdPair {
  std::unique_ptr<SimFabric> f;
  Endpoint a, b;
  tp::QueuePair* qa = nullptr;
  tp::QueuePair* qb = nullptr;
  tp::AddressHandle* ah = nullptr;

  explicit UdPair(const SimConfig& c) {
    f = CreateSimFabric(c);
    a = MakeEndpoint(f.get(), 0);
    b = MakeEndpoint(f.get(), 1);
    qa = QpIn(a, tp::QpType::kUd, tp::QpState::kRts);
    qb = QpIn(b, tp::QpType::kUd, tp::QpState::kRts);
    tp::AhAttr ahattr;
    ahattr.is_global = 1;
    ahattr.port_num = 1;
    EXPECT_TRUE(b.dev->QueryGid(1, 0, &ahattr.grh.dgid).ok());
    ah = Must(a.pd->CreateAh(ahattr));
  }
  Status Send(uint64_t wr_id, uint32_t len, uint32_t qkey = 0x11111111) {
    tp::Sge s = a.Sge(0, len);
    tp::SendWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = tp::WrOpcode::kSendWithImm;
    wr.imm_data = 0x1234;
    wr.ud.ah = ah;
    wr.ud.remote_qpn = qb->qp_num();
    wr.ud.remote_qkey = qkey;
    const tp::SendWr* bad;
    return qa->PostSend(&wr, &bad);
  }
};

TEST(UdTest, GrhAtStartDataAtFortyPoisonedFirstTwenty) {
  UdPair u(TwoNodes());
  for (int i = 0; i < 100; ++i) u.a.buf[i] = static_cast<uint8_t>(i + 1);
  tp::Sge rs = u.b.Sge(0, 40 + 100);
  ASSERT_TRUE(PostRecv(u.qb, 5, &rs, 1).ok());
  ASSERT_TRUE(u.Send(1, 100).ok());
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].byte_len, 140u);
  EXPECT_EQ(r[0].src_qp, u.qa->qp_num());
  EXPECT_EQ(r[0].wc_flags, tp::kWcGrh | tp::kWcWithImm);
  EXPECT_EQ(r[0].imm_data, 0x1234u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(u.b.buf[i], 0xa5) << i;
  EXPECT_EQ(u.b.buf[20], 0x45);     // IPv4 header
  EXPECT_EQ(u.b.buf[20 + 12], 10);  // source 10.0.0.0
  EXPECT_EQ(u.b.buf[20 + 19], 1);   // destination 10.0.0.1
  for (int i = 0; i < 100; ++i) EXPECT_EQ(u.b.buf[40 + i], i + 1);
  EXPECT_EQ(Drain(u.f.get(), u.a.scq).size(), 1u);
}

TEST(UdTest, BufferTooSmallIsLocLenErr) {
  UdPair u(TwoNodes());
  tp::Sge rs = u.b.Sge(0, 40 + 99);
  ASSERT_TRUE(PostRecv(u.qb, 5, &rs, 1).ok());
  ASSERT_TRUE(u.Send(1, 100).ok());
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kLocLenErr);
  EXPECT_EQ(r[0].byte_len, 0u);
  EXPECT_EQ(u.b.buf[0], 0);  // nothing written
}

TEST(UdTest, UnreliableNoRetriesAndQkeyChecked) {
  SimConfig c = TwoNodes();
  PacketFault drop{PacketFaultKind::kDrop, 1.0};
  drop.count_max = 1;  // only the first packet
  c.faults.packet_faults.push_back(drop);
  UdPair u(c);
  for (int i = 0; i < 3; ++i) {
    tp::Sge rs = u.b.Sge(i * 256, 256);
    ASSERT_TRUE(PostRecv(u.qb, i, &rs, 1).ok());
  }
  ASSERT_TRUE(u.Send(1, 8).ok());          // dropped, never retried
  ASSERT_TRUE(u.Send(2, 8, 0x2222).ok());  // wrong Q_Key: discarded
  ASSERT_TRUE(u.Send(3, 8).ok());          // delivered
  auto s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 3u);
  for (auto& wc : s) EXPECT_EQ(wc.status, tp::WcStatus::kSuccess);
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 0u);
  EXPECT_EQ(u.f->stats().retransmits, 0u);
}

TEST(UdTest, DuplicatedDatagramsArriveTwice) {
  // UD has no sequence numbers: a duplicated packet is a second message.
  SimConfig c = TwoNodes();
  PacketFault dup{PacketFaultKind::kDuplicate, 1.0};
  dup.delay_ns = 500;
  c.faults.packet_faults.push_back(dup);
  UdPair u(c);
  for (int i = 0; i < 4; ++i) {
    tp::Sge rs = u.b.Sge(i * 256, 256);
    ASSERT_TRUE(PostRecv(u.qb, i, &rs, 1).ok());
  }
  std::memcpy(u.a.buf.data(), "twice", 5);
  ASSERT_TRUE(u.Send(1, 5).ok());
  // The payload left with the packet: reusing the buffer changes nothing.
  std::memset(u.a.buf.data(), 0, 5);
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(std::memcmp(&u.b.buf[40], "twice", 5), 0);
  EXPECT_EQ(std::memcmp(&u.b.buf[256 + 40], "twice", 5), 0);
}

TEST(UdTest, OversizedSendGoesToSqeAndRecovers) {
  SimConfig c = TwoNodes();
  c.active_mtu = tp::Mtu::k1024;
  UdPair u(c);
  ASSERT_TRUE(u.Send(1, 2000).ok());
  auto s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kLocLenErr);
  EXPECT_EQ(u.qa->state(), tp::QpState::kSqe);
  ASSERT_TRUE(u.Send(2, 8).ok());
  s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kWrFlushErr);
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRts;
  ASSERT_TRUE(u.qa->Modify(a, tp::kQpState).ok());
  tp::Sge rs = u.b.Sge(0, 256);
  ASSERT_TRUE(PostRecv(u.qb, 9, &rs, 1).ok());
  ASSERT_TRUE(u.Send(3, 8).ok());
  EXPECT_EQ(Drain(u.f.get(), u.b.rcq).size(), 1u);
}

// ---------------------------------------------------------------- 6. SGE rules

TEST(SgeTest, ZeroLengthMeansTwoToTheThirtyOne) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  // A region that claims 2^31 bytes (only the first few are ever touched).
  tp::MemoryRegion* big =
      Must(b.pd->RegMr(b.buf.data(), 1ull << 31, tp::kAccessAll));
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge rs{reinterpret_cast<uint64_t>(b.buf.data()), 0, big->lkey()};
  ASSERT_TRUE(PostRecv(qb, 1, &rs, 1).ok());
  // With the small MR, a length-0 SGE (2^31 bytes) is outside it: local
  // protection error.
  tp::Sge bad = b.Sge(0, 0);
  ASSERT_TRUE(PostRecv(qb, 2, &bad, 1).ok());
  tp::Sge ss = a.Sge(0, 100);
  a.buf[99] = 0x77;
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1).ok());
  ASSERT_TRUE(PostSend(qa, 2, &ss, 1).ok());
  auto r = Drain(f.get(), b.rcq);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].byte_len, 100u);
  EXPECT_EQ(b.buf[99], 0x77);
  EXPECT_EQ(r[1].status, tp::WcStatus::kLocProtErr);
  // An inline send with a length-0 SGE asks for 2^31 bytes inline: EINVAL.
  tp::Sge z = a.Sge(0, 0);
  EXPECT_EQ(PostSend(qa, 3, &z, 1, tp::WrOpcode::kSend, tp::kSendInline).code(),
            EINVAL);
}

TEST(SgeTest, NumSgeZeroIsAZeroLengthMessage) {
  RcPair p(TwoNodes());
  ASSERT_TRUE(PostRecv(p.qb, 1, nullptr, 0).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, nullptr, 0).ok());
  auto r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].byte_len, 0u);
  // A receive with no SGEs also takes a zero-length message but not a 1-byte
  // one.
  ASSERT_TRUE(PostRecv(p.qb, 2, nullptr, 0).ok());
  tp::Sge ss = p.a.Sge(0, 1);
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kLocLenErr);
}

TEST(SgeTest, TooManySgesAndBadWrList) {
  RcPair p(TwoNodes());
  tp::Sge five[5] = {p.a.Sge(0, 1), p.a.Sge(1, 1), p.a.Sge(2, 1), p.a.Sge(3, 1),
                     p.a.Sge(4, 1)};
  tp::SendWr w[3];
  for (int i = 0; i < 3; ++i) {
    w[i].wr_id = i;
    w[i].sg_list = five;
    w[i].num_sge = i == 1 ? 5 : 1;  // max_send_sge is 4
    w[i].next = i < 2 ? &w[i + 1] : nullptr;
  }
  const tp::SendWr* bad = nullptr;
  tp::Sge rs = p.b.Sge(0, 64);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
  EXPECT_EQ(p.qa->PostSend(&w[0], &bad).code(), EINVAL);
  EXPECT_EQ(bad, &w[1]);
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);  // only the first was posted
  EXPECT_EQ(s[0].wr_id, 0u);
  tp::Sge rsv[5] = {rs, rs, rs, rs, rs};
  const tp::RecvWr* rbad = nullptr;
  tp::RecvWr rw;
  rw.sg_list = rsv;
  rw.num_sge = 5;
  EXPECT_EQ(p.qb->PostRecv(&rw, &rbad).code(), EINVAL);
  EXPECT_EQ(rbad, &rw);
  // Unknown send flag and opcode.
  EXPECT_EQ(PostSend(p.qa, 9, five, 1, tp::WrOpcode::kSend, 1u << 7).code(),
            EINVAL);
  EXPECT_EQ(PostSend(p.qa, 9, five, 1, static_cast<tp::WrOpcode>(9)).code(),
            EINVAL);
}

TEST(SgeTest, SendQueueFullIsEnomem) {
  RcPair p(TwoNodes(), RcParams{}, 4);
  tp::Sge ss = p.a.Sge(0, 8);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(PostSend(p.qa, i, &ss, 1).ok());
  EXPECT_EQ(PostSend(p.qa, 4, &ss, 1).code(), ENOMEM);
}

// ---------------------------------------------------------------- 7. RC buffer
// too small

TEST(RcErrorTest, ReceiveTooSmallErrorsBothSides) {
  RcPair p(TwoNodes());
  tp::Sge rs = p.b.Sge(0, 16);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostRecv(p.qb, 2, &rs, 1).ok());
  tp::Sge ss = p.a.Sge(0, 17);
  ASSERT_TRUE(PostSend(p.qa, 7, &ss, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 8, &ss, 1).ok());
  auto r = Drain(p.f.get(), p.b.rcq);
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].wr_id, 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kLocLenErr);
  EXPECT_EQ(r[1].wr_id, 2u);
  EXPECT_EQ(r[1].status, tp::WcStatus::kWrFlushErr);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].wr_id, 7u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kRemInvReqErr);
  EXPECT_EQ(s[1].status, tp::WcStatus::kWrFlushErr);
  EXPECT_EQ(p.qa->state(), tp::QpState::kError);
  EXPECT_EQ(p.qb->state(), tp::QpState::kError);
}

// ---------------------------------------------------------------- 8. ERROR
// flush

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

// ---------------------------------------------------------------- 9. CQ
// overrun

TEST(CqTest, OverrunRaisesCqErrAndLosesNothing) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0, 1 << 16, /*cqe=*/4),
           b = MakeEndpoint(f.get(), 1);
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge ss = a.Sge(0, 8), rs = b.Sge(0, 8);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(PostRecv(qb, i, &rs, 1).ok());
    ASSERT_TRUE(PostSend(qa, i, &ss, 1).ok());
  }
  f->RunUntilIdle();
  auto ev = Events(a.dev);
  ASSERT_GE(ev.size(), 1u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kCqErr);
  EXPECT_EQ(ev[0].cq_handle, a.scq->handle());
  EXPECT_TRUE(HasEvent(ev, tp::AsyncEventType::kQpFatal));
  EXPECT_EQ(qa->state(), tp::QpState::kError);
  EXPECT_GT(f->stats().cq_overruns, 0u);
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s[i].wr_id, static_cast<uint64_t>(i));
  EXPECT_EQ(a.scq->Poll(-1, nullptr), -EINVAL);
}

// ---------------------------------------------------------------- 10. memory
// protection

TEST(MrTest, BadLocalSgeCompletesInOrderAfterEarlierWork) {
  SimConfig c = TwoNodes();
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 0.3});
  RcParams prm;
  prm.timeout = 8;
  RcPair p(c, prm);
  tp::Sge rd = p.a.Sge(0, 6000);
  tp::Sge out = p.a.Sge(p.a.buf.size() - 100, 200);  // runs past the MR
  ASSERT_TRUE(PostSend(p.qa, 1, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr(), p.b.mr->rkey())
                  .ok());
  ASSERT_TRUE(PostSend(p.qa, 2, &out, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr(), p.b.mr->rkey())
                  .ok());
  ASSERT_TRUE(PostSend(p.qa, 3, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr(), p.b.mr->rkey())
                  .ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(s[1].status, tp::WcStatus::kLocProtErr);
  EXPECT_EQ(s[2].status, tp::WcStatus::kWrFlushErr);
}

TEST(MrTest, BadLkeyIsLocalProtectionError) {
  RcPair p(TwoNodes());
  tp::Sge ss = p.a.Sge(0, 8);
  ss.lkey ^= 0x100;  // another index
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kLocProtErr);
  EXPECT_EQ(p.qa->state(), tp::QpState::kError);
  // An SGE beyond the MR's end is a protection error too.
  RcPair q(TwoNodes());
  tp::Sge beyond = q.a.Sge(q.a.buf.size() - 4, 8);
  ASSERT_TRUE(PostSend(q.qa, 1, &beyond, 1).ok());
  s = Drain(q.f.get(), q.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kLocProtErr);
}

TEST(MrTest, DeregisteredRegionIsRefused) {
  RcPair p(TwoNodes());
  std::vector<uint8_t> other(64, 1);
  tp::MemoryRegion* mr = Must(p.b.pd->RegMr(other.data(), 64, tp::kAccessAll));
  const uint32_t rkey = mr->rkey();
  ASSERT_TRUE(mr->Destroy().ok());
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0,
                       reinterpret_cast<uint64_t>(other.data()), rkey)
                  .ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kRemAccessErr);
  EXPECT_EQ(other, std::vector<uint8_t>(64, 1));
}

TEST(MrTest, RemoteAccessOutsideRegionChangesNoByte) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  // Node 1 exposes only [1024, 2048) of its 4096-byte buffer, plus a read-only
  // region.
  std::vector<uint8_t> host(4096, 0xee);
  tp::MemoryRegion* win = Must(b.pd->RegMr(
      host.data() + 1024, 1024,
      tp::kAccessLocalWrite | tp::kAccessRemoteWrite | tp::kAccessRemoteRead));
  tp::MemoryRegion* ro =
      Must(b.pd->RegMr(host.data() + 3072, 512, tp::kAccessLocalWrite));
  const std::vector<uint8_t> before = host;
  struct Case {
    tp::WrOpcode op;
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
  };
  const uint64_t base = reinterpret_cast<uint64_t>(host.data());
  const Case cases[] = {
      {tp::WrOpcode::kRdmaWrite, base + 2040, win->rkey(),
       16},  // crosses the end
      {tp::WrOpcode::kRdmaWrite, base + 1000, win->rkey(),
       32},  // starts before
      {tp::WrOpcode::kRdmaWrite, base + 1024, win->lkey(),
       8},  // lkey is not an rkey
      {tp::WrOpcode::kRdmaWrite, base + 3072, ro->rkey(),
       8},                                                    // no REMOTE_WRITE
      {tp::WrOpcode::kRdmaRead, base + 3072, ro->rkey(), 8},  // no REMOTE_READ
      {tp::WrOpcode::kRdmaWriteWithImm, base + 2047, win->rkey(), 2},
  };
  for (const Case& k : cases) {
    tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
    tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
    Connect(qa, 0, qb, 1);
    tp::Sge rs = b.Sge(0, 64);
    ASSERT_TRUE(PostRecv(qb, 1, &rs, 1).ok());
    std::memset(a.buf.data(), 0x11, 64);
    tp::Sge ss = a.Sge(0, k.len);
    ASSERT_TRUE(PostSend(qa, 1, &ss, 1, k.op, 0, k.addr, k.rkey, 5).ok());
    auto s = Drain(f.get(), a.scq);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, tp::WcStatus::kRemAccessErr);
    EXPECT_EQ(qa->state(), tp::QpState::kError);
    EXPECT_EQ(host, before);  // not one byte changed
    Drain(f.get(), b.rcq);
  }
  // A legal write changes exactly its bytes.
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge ss = a.Sge(0, 16);
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0, base + 2032,
                       win->rkey())
                  .ok());
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  for (size_t i = 0; i < host.size(); ++i) {
    const bool inside = i >= 2032 && i < 2048;
    ASSERT_EQ(host[i], inside ? 0x11 : 0xee) << i;
  }
}

TEST(MrTest, QpWithoutRemoteWriteAccessRefuses) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  ASSERT_TRUE(testing::ToInit(qa).ok());
  ASSERT_TRUE(
      testing::ToInit(qb, tp::kAccessLocalWrite).ok());  // no remote access
  ASSERT_TRUE(testing::ToRtr(qa, 1, qb->qp_num()).ok());
  ASSERT_TRUE(testing::ToRtr(qb, 0, qa->qp_num()).ok());
  ASSERT_TRUE(testing::ToRts(qa).ok());
  ASSERT_TRUE(testing::ToRts(qb).ok());
  tp::Sge ss = a.Sge(0, 8);
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0, b.mr->addr(),
                       b.mr->rkey())
                  .ok());
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kRemAccessErr);
}

// ---------------------------------------------------------------- 11. RDMA,
// imm, fence

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
  testing::PollOne(p.a.scq);
  EXPECT_EQ(testing::PollOne(p.a.scq).wr_id, 1u);
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

// ---------------------------------------------------------------- faults and
// time

TEST(FaultTest, LinkDownAndUpRaisesPortEventsAndRecovers) {
  SimConfig c = TwoNodes();
  TimedFault down{TimedFaultKind::kLinkDown, 1000, 1};
  TimedFault up{TimedFaultKind::kLinkUp, 30'000'000, 1};
  c.faults.timed_faults = {down, up};
  RcParams prm;
  prm.timeout = 12;  // 16.7 ms
  RcPair p(c, prm);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  p.f->RunUntil(2000);
  tp::PortAttr pa;
  ASSERT_TRUE(p.b.dev->QueryPort(1, &pa).ok());
  EXPECT_EQ(pa.state, tp::PortState::kDown);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_GT(p.f->clock().NowNs(), 30'000'000u);
  auto ev = Events(p.b.dev);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kPortErr);
  EXPECT_EQ(ev[1].event_type, tp::AsyncEventType::kPortActive);
}

TEST(FaultTest, QpForcedToErrorAtATime) {
  RcPair probe(TwoNodes());
  SimConfig c = TwoNodes();
  TimedFault qf{TimedFaultKind::kQpError, 5000, 0};
  qf.qp_num = probe.qa->qp_num();  // QP numbers are deterministic per device
  c.faults.timed_faults = {qf};
  RcParams prm;
  prm.rnr_retry = 7;
  RcPair p(c, prm);
  ASSERT_EQ(p.qa->qp_num(), qf.qp_num);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(
      PostSend(p.qa, 1, &ss, 1).ok());  // RNR forever: no receive posted
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kWrFlushErr);
  EXPECT_EQ(p.qa->state(), tp::QpState::kError);
  auto ev = Events(p.a.dev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].event_type, tp::AsyncEventType::kQpFatal);
  EXPECT_EQ(ev[0].time_ns, 5000u);
}

TEST(FaultTest, ScopedByNodeAndQp) {
  // Drop everything node 0 sends on one QP: that pair fails, a second pair is
  // untouched.
  RcPair probe(TwoNodes());
  SimConfig c = TwoNodes();
  PacketFault d{PacketFaultKind::kDrop, 1.0};
  d.src_node = 0;
  d.qp_num = probe.qa->qp_num();
  c.faults.packet_faults.push_back(d);
  RcParams prm;
  prm.timeout = 5;
  prm.retry_cnt = 1;
  RcPair p(c, prm);
  tp::QueuePair* qa2 = Must(p.a.pd->CreateQp(RcInit(p.a)));
  tp::QueuePair* qb2 = Must(p.b.pd->CreateQp(RcInit(p.b)));
  Connect(qa2, 0, qb2, 1, prm);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostRecv(qb2, 2, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  ASSERT_TRUE(PostSend(qa2, 2, &ss, 1).ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 2u);
  std::map<uint64_t, tp::WcStatus> by_id;
  for (auto& wc : s) by_id[wc.wr_id] = wc.status;
  EXPECT_EQ(by_id[1], tp::WcStatus::kRetryExcErr);
  EXPECT_EQ(by_id[2], tp::WcStatus::kSuccess);
  // Node and opcode scope: dropping the SENDs node 1 puts on the wire leaves
  // node 0's SEND and node 1's ACK alone. (A QP scope alone matches the ACKs to
  // that QP too.)
  SimConfig c2 = TwoNodes();
  d.src_node = 1;
  d.qp_num = 0;
  d.opcode_mask = kFaultOpSend;
  c2.faults.packet_faults = {d};
  RcPair q(c2, prm);
  tp::Sge qr = q.b.Sge(0, 8);
  ASSERT_TRUE(PostRecv(q.qb, 1, &qr, 1).ok());
  tp::Sge qs = q.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(q.qa, 1, &qs, 1).ok());
  EXPECT_EQ(testing::PollOne(q.a.scq).status, tp::WcStatus::kSuccess);
}

TEST(RcTest, PsnWrapsAround24Bits) {
  SimConfig c = TwoNodes(21);
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 0.1});
  RcParams prm;
  prm.timeout = 8;
  prm.psn = 0xfffffa;  // wraps after six packets
  RcPair p(c, prm);
  for (int i = 0; i < 20; ++i) {
    tp::Sge rs = p.b.Sge(static_cast<uint64_t>(i) * 3000, 3000);
    ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
  }
  for (int i = 0; i < 3000; ++i) p.a.buf[i] = static_cast<uint8_t>(i);
  tp::Sge ss = p.a.Sge(0, 3000);  // three packets each
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(PostSend(p.qa, i, &ss, 1).ok());
  auto r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(r[i].status, tp::WcStatus::kSuccess);
    EXPECT_EQ(r[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(std::memcmp(&p.b.buf[i * 3000], p.a.buf.data(), 3000), 0);
  }
  tp::QpAttr q;
  ASSERT_TRUE(p.qa->Query(&q, nullptr).ok());
  EXPECT_EQ(q.sq_psn, 0xfffffau);
}

TEST(FaultTest, FixedDelayScopedByOpcodeAndWindow) {
  SimConfig c = TwoNodes();
  PacketFault d{PacketFaultKind::kDelayFixed, 1.0};
  d.delay_ns = 100'000;
  d.opcode_mask = kFaultOpAck;
  d.start_ns = 0;
  d.end_ns = 50'000;
  c.faults.packet_faults.push_back(d);
  RcPair p(c);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostRecv(p.qb, 2, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  tp::WorkCompletion wc;
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  const uint64_t t1 = p.f->clock().NowNs();
  EXPECT_GT(t1, 100'000u);  // the ACK was held back
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  EXPECT_LT(p.f->clock().NowNs() - t1, 5'000u);  // outside the window: no delay
}

TEST(ProgressTest, BusyPollingAdvancesVirtualTime) {
  RcPair p(TwoNodes());
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  EXPECT_EQ(p.f->clock().NowNs(), 0u);
  tp::WorkCompletion wc;
  int n = 0;
  for (int spins = 0; spins < 100 && n == 0; ++spins) n = p.b.rcq->Poll(1, &wc);
  ASSERT_EQ(n, 1);
  EXPECT_GT(p.f->clock().NowNs(), 0u);
  EXPECT_EQ(p.b.dev->clock().NowNs(), p.f->clock().NowNs());
}

TEST(ProgressTest, StepAndRunUntil) {
  RcPair p(TwoNodes());
  EXPECT_FALSE(p.f->Step());
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  EXPECT_EQ(p.f->pending_events(), 2u);  // the packet and the ack timer
  EXPECT_EQ(p.f->RunUntil(10), 0u);
  EXPECT_EQ(p.f->clock().NowNs(), 10u);
  EXPECT_TRUE(p.f->Step());  // the packet arrives
  EXPECT_GT(p.f->clock().NowNs(), 1000u);
}

// ---------------------------------------------------------------- the time
// hold (sim_fabric.h): an empty poll does not move the clock past a completion
// that another node's owner has not read yet.

// Two nodes ping-pong RC sends in one thread, each polling its receive CQ in
// turn (round robin) and answering when a message arrives. Send completions go
// to send CQs nobody polls. Links: `latency_ns`, unlimited bandwidth, so one
// way takes exactly latency_ns.
struct PingPong {
  static constexpr uint64_t kLatencyNs = 1000;
  RcPair p;
  std::vector<uint64_t> round_trips_ns;
  uint64_t polls = 0;

  static SimConfig Config() {
    SimConfig c = TwoNodes();
    c.default_link.latency_ns = kLatencyNs;
    c.default_link.bandwidth_bps = 0;
    return c;
  }
  explicit PingPong(const RcParams& prm = {}) : p(Config(), prm, 256) {
    for (uint64_t i = 0; i < 128; ++i) {
      tp::Sge ra = p.a.Sge(64, 8), rb = p.b.Sge(64, 8);
      EXPECT_TRUE(PostRecv(p.qa, i, &ra, 1).ok());
      EXPECT_TRUE(PostRecv(p.qb, i, &rb, 1).ok());
    }
  }

  // Plays `rounds` round trips; `before_ping` runs as each ping is posted.
  template <typename F>
  void Play(int rounds, F before_ping) {
    tp::WorkCompletion wc;
    tp::Sge sa = p.a.Sge(0, 8), sb = p.b.Sge(0, 8);
    // The poll loop runs from the start: both receive CQs are polled once.
    ASSERT_EQ(p.a.rcq->Poll(1, &wc), 0);
    ASSERT_EQ(p.b.rcq->Poll(1, &wc), 0);
    for (int r = 0; r < rounds; ++r) {
      before_ping();
      const uint64_t t0 = p.f->clock().NowNs();
      ASSERT_TRUE(PostSend(p.qa, r, &sa, 1).ok());
      bool back = false;
      for (int spin = 0; spin < 100 && !back; ++spin) {
        ++polls;
        if (p.a.rcq->Poll(1, &wc) == 1) {
          ASSERT_EQ(wc.status, tp::WcStatus::kSuccess);
          round_trips_ns.push_back(p.f->clock().NowNs() - t0);
          back = true;
          break;
        }
        ++polls;
        if (p.b.rcq->Poll(1, &wc) == 1) {
          ASSERT_EQ(wc.status, tp::WcStatus::kSuccess);
          ASSERT_TRUE(PostSend(p.qb, r, &sb, 1).ok());
        }
      }
      ASSERT_TRUE(back) << "round " << r;
    }
  }
};

TEST(TimeHoldTest, RoundRobinPingPongRoundTripIsTwoLatencies) {
  // An ack timeout of 4.096 us x 2^14 = 67 ms: before the hold, A's empty poll
  // ran on to that (no-op) timer before B had read the ping, so every round
  // trip took 67 ms.
  PingPong pp;
  pp.Play(10, [] {});
  ASSERT_EQ(pp.round_trips_ns.size(), 10u);
  for (uint64_t rtt : pp.round_trips_ns) {
    EXPECT_EQ(rtt, 2 * PingPong::kLatencyNs);
  }
  EXPECT_EQ(pp.p.f->clock().NowNs(), 10 * 2 * PingPong::kLatencyNs);
  EXPECT_EQ(pp.p.f->stats().retransmits, 0u);
  EXPECT_GT(pp.p.f->stats().polls_held, 0u);
  EXPECT_EQ(pp.p.f->stats().hold_releases, 0u);
}

TEST(TimeHoldTest, ProtocolTimerDoesNotFireBeforeThePeerAnswers) {
  // A protocol timer (a connection-request retry, say) 50 us after each ping,
  // and no RC ack timer: the answer comes 2 us after the ping, so the loop
  // never sees the clock at the timer.
  RcParams prm;
  prm.timeout = 0;
  PingPong pp(prm);
  std::vector<uint64_t> deadlines;
  pp.Play(5, [&] {
    deadlines.push_back(pp.p.f->clock().NowNs() + 50'000);
    pp.p.a.dev->ScheduleWakeup(deadlines.back());
  });
  ASSERT_EQ(pp.round_trips_ns.size(), 5u);
  for (uint64_t rtt : pp.round_trips_ns) {
    EXPECT_EQ(rtt, 2 * PingPong::kLatencyNs);
  }
  EXPECT_LT(pp.p.f->clock().NowNs(), deadlines.front());
  // Still ahead: the five wakeups and the ACK of the last answer.
  EXPECT_EQ(pp.p.f->pending_events(), 6u);
}

TEST(TimeHoldTest, SameCallsSameDigest) {
  uint64_t digest[2];
  for (uint64_t& d : digest) {
    PingPong pp;
    pp.Play(20, [] {});
    d = pp.p.f->digest();
  }
  EXPECT_EQ(digest[0], digest[1]);
}

TEST(TimeHoldTest, UnreadCqDoesNotLivelockAPoller) {
  SimConfig c = PingPong::Config();
  RcPair p(c);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
  tp::WorkCompletion wc;
  ASSERT_EQ(p.b.rcq->Poll(1, &wc), 0);  // B's CQ is watched ...
  // ... but B never polls it again: its receive completion stays unread while
  // A spins on its send CQ, whose completion (the ACK) comes one latency later.
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  int polls = 0;
  int n = 0;
  while (n == 0 && polls < 10) {
    n = p.a.scq->Poll(1, &wc);
    ++polls;
  }
  ASSERT_EQ(n, 1);
  EXPECT_EQ(polls, 2);  // one poll held, the next one releases the hold
  EXPECT_EQ(p.f->clock().NowNs(), 2 * PingPong::kLatencyNs);
  EXPECT_EQ(p.f->stats().polls_held, 1u);
  EXPECT_EQ(p.f->stats().hold_releases, 1u);
  // B's CQ is no longer watched, so it holds nothing: the next send completes
  // at the first poll, and a far wakeup is reached too.
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 2u);
  p.a.dev->ScheduleWakeup(1'000'000'000);
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 0);
  EXPECT_EQ(p.f->clock().NowNs(), 1'000'000'000u);
  EXPECT_EQ(p.f->stats().polls_held, 1u);
  // Both messages wait in B's CQ, unread but not lost.
  tp::WorkCompletion two[4];
  ASSERT_EQ(p.b.rcq->Poll(4, two), 2);
}

TEST(TimeHoldTest, NeverPolledCqHoldsNothing) {
  // B's receive CQ is never polled: A's first poll runs straight to its send
  // completion, as on hardware.
  RcPair p(PingPong::Config());
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostRecv(p.qb, 1, &rs, 1).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  tp::WorkCompletion wc;
  ASSERT_EQ(p.a.scq->Poll(1, &wc), 1);
  EXPECT_EQ(p.f->clock().NowNs(), 2 * PingPong::kLatencyNs);
  EXPECT_EQ(p.f->stats().polls_held, 0u);
}

TEST(IsolationTest, TwoFabricsInterleavedMatchEachRunAlone) {
  auto run = [](SimFabric* f, Endpoint& a, Endpoint& b, tp::QueuePair* qa,
                tp::QueuePair* qb, int i) {
    tp::Sge rs = b.Sge(0, 64), ss = a.Sge(0, 64);
    EXPECT_TRUE(PostRecv(qb, i, &rs, 1).ok());
    EXPECT_TRUE(PostSend(qa, i, &ss, 1).ok());
    f->RunUntilIdle();
  };
  SimConfig c = TwoNodes(99);
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 0.3});
  RcParams prm;
  prm.timeout = 6;
  RcPair x(c, prm), y(c, prm), alone(c, prm);
  for (int i = 0; i < 50; ++i) {
    run(x.f.get(), x.a, x.b, x.qa, x.qb, i);
    run(y.f.get(), y.a, y.b, y.qa, y.qb, i);
  }
  for (int i = 0; i < 50; ++i)
    run(alone.f.get(), alone.a, alone.b, alone.qa, alone.qb, i);
  EXPECT_EQ(x.f->digest(), alone.f->digest());
  EXPECT_EQ(y.f->digest(), alone.f->digest());
  EXPECT_EQ(x.f->clock().NowNs(), alone.f->clock().NowNs());
}

TEST(TraceTest, RecordsTheLastEvents) {
  SimConfig c = TwoNodes();
  c.trace_capacity = 4;
  RcPair p(c);
  tp::Sge rs = p.b.Sge(0, 8), ss = p.a.Sge(0, 8);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
    ASSERT_TRUE(PostSend(p.qa, i, &ss, 1).ok());
  }
  p.f->RunUntilIdle();
  auto t = p.f->Trace();
  ASSERT_EQ(t.size(), 4u);
  for (size_t i = 1; i < t.size(); ++i)
    EXPECT_LE(t[i - 1].time_ns, t[i].time_ns);
  EXPECT_EQ(t.back().kind, TraceKind::kAckTimeout);  // the idle timer is last
}

TEST(DestroyTest, BusyWhileReferenced) {
  RcPair p(TwoNodes());
  EXPECT_EQ(p.a.scq->Destroy().code(), EBUSY);
  EXPECT_EQ(p.a.pd->Destroy().code(), EBUSY);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  ASSERT_TRUE(p.qa->Destroy().ok());
  p.f->RunUntilIdle();  // in-flight packets for the gone QP are dropped
                        // harmlessly
  EXPECT_TRUE(p.a.scq->Destroy().ok());
}

}  // namespace
}  // namespace softfab::sim
