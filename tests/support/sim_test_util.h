// Test helpers for the simulated fabric: a two-node (or N-node) setup with
// connected QPs (brought up by qp_bringup.h, addressed by node number). Every
// helper asserts on failure so tests stay short; they never hide a failure.
#ifndef SOFTFAB_TESTS_SUPPORT_SIM_TEST_UTIL_H_
#define SOFTFAB_TESTS_SUPPORT_SIM_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/qp_bringup.h"
#include "transport/transport.h"

namespace softfab::sim::testing {

namespace tp = ::softfab::transport;

template <typename T>
T Must(StatusOr<T> v) {
  EXPECT_TRUE(v.ok()) << v.status().message();
  return v.ok() ? *v : T{};
}

// One node's verbs objects.
struct Endpoint {
  tp::Device* dev = nullptr;
  tp::ProtectionDomain* pd = nullptr;
  tp::CompletionQueue* scq = nullptr;
  tp::CompletionQueue* rcq = nullptr;
  std::vector<uint8_t> buf;
  tp::MemoryRegion* mr = nullptr;

  tp::Sge Sge(uint64_t offset, uint32_t length) const {
    return tp::Sge{reinterpret_cast<uint64_t>(buf.data()) + offset, length,
                   mr->lkey()};
  }
};

inline Endpoint MakeEndpoint(SimFabric* f, int node, size_t buf_bytes = 1 << 16,
                             int cqe = 1024, uint32_t access = tp::kAccessAll) {
  Endpoint e;
  e.dev = f->device(node);
  e.pd = Must(e.dev->AllocPd());
  e.scq = Must(e.dev->CreateCq(cqe));
  e.rcq = Must(e.dev->CreateCq(cqe));
  e.buf.assign(buf_bytes, 0);
  e.mr = Must(e.pd->RegMr(e.buf.data(), e.buf.size(), access));
  return e;
}

inline tp::QpInitAttr RcInit(const Endpoint& e, uint32_t depth = 64,
                             tp::SharedReceiveQueue* srq = nullptr) {
  return ::softfab::testing::RcQpInit(e.scq, e.rcq, depth, srq);
}

using ::softfab::testing::RcParams;
using ::softfab::testing::ToInit;
using ::softfab::testing::ToRtr;
using ::softfab::testing::ToRts;
using ::softfab::testing::UdToRts;

// The simulator's address of node `node`: its LID is node + 1.
inline tp::AhAttr NodeAddress(int node) {
  tp::AhAttr at;
  at.dlid = static_cast<uint16_t>(node + 1);
  at.port_num = 1;
  return at;
}

// INIT -> RTR towards `remote_qpn` on node `remote_node`.
inline Status ToRtr(tp::QueuePair* qp, int remote_node, uint32_t remote_qpn,
                    const RcParams& p = {}) {
  return ToRtr(qp, NodeAddress(remote_node), remote_qpn, p);
}

// Brings two RC QPs (on nodes na, nb) to RTS, connected to each other.
inline void Connect(tp::QueuePair* a, int na, tp::QueuePair* b, int nb,
                    const RcParams& p = {}) {
  const Status s = ::softfab::testing::ConnectRcPair(a, NodeAddress(na), b,
                                                     NodeAddress(nb), p);
  ASSERT_TRUE(s.ok()) << s.message();
}

inline Status PostSend(tp::QueuePair* qp, uint64_t wr_id, const tp::Sge* sges,
                       int n, tp::WrOpcode op = tp::WrOpcode::kSend,
                       uint32_t flags = 0, uint64_t remote_addr = 0,
                       uint32_t rkey = 0, uint32_t imm = 0) {
  tp::SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = sges;
  wr.num_sge = n;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.imm_data = imm;
  wr.rdma.remote_addr = remote_addr;
  wr.rdma.rkey = rkey;
  const tp::SendWr* bad = nullptr;
  return qp->PostSend(&wr, &bad);
}

inline Status PostRecv(tp::QueuePair* qp, uint64_t wr_id, const tp::Sge* sges,
                       int n) {
  tp::RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = sges;
  wr.num_sge = n;
  const tp::RecvWr* bad = nullptr;
  return qp->PostRecv(&wr, &bad);
}

// A SEND_WITH_IMM datagram of `sge` from `qp` to the QP `remote_qpn` at `ah`.
inline Status PostUdSend(tp::QueuePair* qp, uint64_t wr_id, const tp::Sge& sge,
                         tp::AddressHandle* ah, uint32_t remote_qpn,
                         uint32_t qkey, uint32_t imm) {
  tp::SendWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = tp::WrOpcode::kSendWithImm;
  wr.imm_data = imm;
  wr.ud.ah = ah;
  wr.ud.remote_qpn = remote_qpn;
  wr.ud.remote_qkey = qkey;
  const tp::SendWr* bad = nullptr;
  return qp->PostSend(&wr, &bad);
}

// Every completion currently available (without running the fabric further).
inline std::vector<tp::WorkCompletion> Drain(SimFabric* f,
                                             tp::CompletionQueue* cq) {
  f->RunUntilIdle(1u << 24);
  std::vector<tp::WorkCompletion> out;
  tp::WorkCompletion wc[16];
  for (;;) {
    const int n = cq->Poll(16, wc);
    EXPECT_GE(n, 0);
    if (n <= 0) break;
    out.insert(out.end(), wc, wc + n);
  }
  return out;
}

// Busy-polls `cq` (which runs the fabric) until one completion arrives; the
// clock then reads the completion's time.
inline tp::WorkCompletion PollOne(tp::CompletionQueue* cq) {
  tp::WorkCompletion wc{};
  for (int i = 0; i < 1000; ++i) {
    const int n = cq->Poll(1, &wc);
    if (n == 1) return wc;
    EXPECT_EQ(n, 0);
  }
  ADD_FAILURE() << "no completion";
  return wc;
}

inline std::vector<tp::AsyncEvent> Events(tp::Device* dev) {
  std::vector<tp::AsyncEvent> out;
  tp::AsyncEvent e;
  while (dev->GetAsyncEvent(&e).ok()) out.push_back(e);
  return out;
}

inline bool HasEvent(const std::vector<tp::AsyncEvent>& ev,
                     tp::AsyncEventType t) {
  for (const auto& e : ev) {
    if (e.event_type == t) return true;
  }
  return false;
}

// Two nodes, default links and limits, master seed `seed`, devices of
// `personality`.
inline SimConfig TwoNodes(uint64_t seed = 7, DevicePersonality personality =
                                                 DevicePersonality::kRxe) {
  SimConfig c;
  c.nodes = 2;
  c.master_seed = seed;
  c.personality = personality;
  return c;
}

// A fabric with an endpoint on each of nodes 0 and 1.
struct TwoEndpoints {
  std::unique_ptr<SimFabric> f;
  Endpoint a, b;

  explicit TwoEndpoints(const SimConfig& c)
      : f(CreateSimFabric(c)),
        a(MakeEndpoint(f.get(), 0)),
        b(MakeEndpoint(f.get(), 1)) {}
};

// A connected RC pair on nodes 0 and 1.
struct RcPair : TwoEndpoints {
  tp::QueuePair* qa = nullptr;
  tp::QueuePair* qb = nullptr;

  explicit RcPair(const SimConfig& c, const RcParams& p = {},
                  uint32_t depth = 64)
      : TwoEndpoints(c) {
    qa = Must(a.pd->CreateQp(RcInit(a, depth)));
    qb = Must(b.pd->CreateQp(RcInit(b, depth)));
    Connect(qa, 0, qb, 1, p);
  }
};

// Drives a fresh QP to `s` (RESET, INIT, RTR, RTS, SQD or ERROR).
inline tp::QueuePair* QpIn(Endpoint& e, tp::QpType type, tp::QpState s) {
  tp::QpInitAttr init = RcInit(e);
  init.qp_type = type;
  tp::QueuePair* qp = Must(e.pd->CreateQp(init));
  if (s == tp::QpState::kReset) return qp;
  EXPECT_TRUE(ToInit(qp).ok());
  if (s == tp::QpState::kError) {
    tp::QpAttr a;
    a.qp_state = tp::QpState::kError;
    EXPECT_TRUE(qp->Modify(a, tp::kQpState).ok());
    return qp;
  }
  if (s == tp::QpState::kInit) return qp;
  if (type == tp::QpType::kRc) {
    EXPECT_TRUE(ToRtr(qp, 1, 0x100).ok());
  } else {
    EXPECT_TRUE(::softfab::testing::UdToRtr(qp).ok());
  }
  if (s == tp::QpState::kRtr) return qp;
  if (type == tp::QpType::kRc) {
    EXPECT_TRUE(ToRts(qp).ok());
  } else {
    EXPECT_TRUE(::softfab::testing::UdRtrToRts(qp).ok());
  }
  if (s == tp::QpState::kRts) return qp;
  tp::QpAttr a;
  a.qp_state = tp::QpState::kSqd;
  EXPECT_TRUE(qp->Modify(a, tp::kQpState).ok());
  return qp;
}

// Two UD QPs in RTS on nodes 0 and 1, and an address handle (by GID) from a to
// b; Send() sends SEND_WITH_IMM datagrams from qa to qb.
struct UdPair : TwoEndpoints {
  tp::QueuePair* qa = nullptr;
  tp::QueuePair* qb = nullptr;
  tp::AddressHandle* ah = nullptr;

  explicit UdPair(const SimConfig& c) : TwoEndpoints(c) {
    qa = QpIn(a, tp::QpType::kUd, tp::QpState::kRts);
    qb = QpIn(b, tp::QpType::kUd, tp::QpState::kRts);
    tp::AhAttr ahattr;
    ahattr.is_global = 1;
    ahattr.port_num = 1;
    EXPECT_TRUE(b.dev->QueryGid(1, 0, &ahattr.grh.dgid).ok());
    ah = Must(a.pd->CreateAh(ahattr));
  }
  Status Send(uint64_t wr_id, uint32_t len,
              uint32_t qkey = ::softfab::testing::kTestQkey) {
    const tp::Sge s = a.Sge(0, len);
    return PostUdSend(qa, wr_id, s, ah, qb->qp_num(), qkey, 0x1234);
  }
};

}  // namespace softfab::sim::testing

#endif  // SOFTFAB_TESTS_SUPPORT_SIM_TEST_UTIL_H_
