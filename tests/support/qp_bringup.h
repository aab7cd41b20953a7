// The walk of a transport QP from RESET to RTS (INIT, RTR, RTS), written once
// for every test, fuzz target and benchmark, on any backend: the simulator's
// helpers (sim_test_util.h), the transport conformance suite (tests/transport/,
// on the simulator and on a device), RawPeer and the simulator's benchmark all
// bring their QPs up here. (The sfv_* fixture walks through sfv_modify_qp,
// which is what it tests.) Production code walks its
// own (core/wireup.cc, core/endpoint.cc, backends/sim/scenario.cc) and must not
// depend on this testonly header.
//
// Every call returns the Status of the first transition that failed and leaves
// the QP where that transition found it; no gtest here, so fuzz targets and
// benchmarks use it as well as tests.
#ifndef SOFTFAB_TESTS_SUPPORT_QP_BRINGUP_H_
#define SOFTFAB_TESTS_SUPPORT_QP_BRINGUP_H_

#include <cstdint>

#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::testing {

// What an RC connection is set up with. The defaults are the simulator tests'
// (on a real device the conformance suite takes the port's MTU, one READ each
// way and remote read and write only).
struct RcParams {
  uint8_t timeout = 14;  // 4.096 us * 2^timeout; 0 waits forever
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 retries forever
  uint8_t min_rnr_timer = 1;
  transport::Mtu mtu = transport::Mtu::k1024;
  uint32_t sq_psn = 100;           // this QP's first PSN
  uint32_t rq_psn = 100;           // the first PSN it expects from the peer
  uint8_t max_rd_atomic = 4;       // READs this QP has outstanding
  uint8_t max_dest_rd_atomic = 4;  // READs it serves at once
  uint32_t access = transport::kAccessAll;  // remote access it grants

  // Both directions starting at `psn` (the peer uses the same parameters).
  RcParams& Psn(uint32_t psn) {
    sq_psn = rq_psn = psn;
    return *this;
  }
};

// An RC QP's creation attributes as the tests use them: `depth` requests of
// up to 4 SGEs each way (none on the receive side with an SRQ), 64 bytes
// inline, every send signaled.
inline transport::QpInitAttr RcQpInit(
    transport::CompletionQueue* send_cq, transport::CompletionQueue* recv_cq,
    uint32_t depth = 64, transport::SharedReceiveQueue* srq = nullptr) {
  transport::QpInitAttr a;
  a.send_cq = send_cq;
  a.recv_cq = recv_cq;
  a.srq = srq;
  a.cap.max_send_wr = depth;
  a.cap.max_recv_wr = srq ? 0 : depth;
  a.cap.max_send_sge = 4;
  a.cap.max_recv_sge = srq ? 0 : 4;
  a.cap.max_inline_data = 64;
  a.qp_type = transport::QpType::kRc;
  a.sq_sig_all = 1;
  return a;
}

// The Q_Key the test UD QPs use unless told otherwise.
inline constexpr uint32_t kTestQkey = 0x11111111;

// RESET -> INIT on port 1: an RC QP grants `access`, a UD QP takes `qkey`.
[[nodiscard]] inline Status ToInit(transport::QueuePair* qp,
                                   uint32_t access = transport::kAccessAll,
                                   uint32_t qkey = kTestQkey) {
  namespace tp = ::softfab::transport;
  tp::QpAttr a;
  a.qp_state = tp::QpState::kInit;
  a.port_num = 1;
  a.qp_access_flags = access;
  a.qkey = qkey;
  const uint32_t mask =
      tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort |
      (qp->qp_type() == tp::QpType::kRc ? tp::kQpAccessFlags : tp::kQpQkey);
  return qp->Modify(a, mask);
}

// INIT -> RTR for an RC QP towards the QP `remote_qpn` at `remote`.
[[nodiscard]] inline Status ToRtr(transport::QueuePair* qp,
                                  const transport::AhAttr& remote,
                                  uint32_t remote_qpn, const RcParams& p = {}) {
  namespace tp = ::softfab::transport;
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRtr;
  a.path_mtu = p.mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = p.rq_psn;
  a.max_dest_rd_atomic = p.max_dest_rd_atomic;
  a.min_rnr_timer = p.min_rnr_timer;
  a.ah_attr = remote;
  return qp->Modify(a, tp::kQpState | tp::kQpAv | tp::kQpPathMtu |
                           tp::kQpDestQpn | tp::kQpRqPsn |
                           tp::kQpMaxDestRdAtomic | tp::kQpMinRnrTimer);
}

// RTR -> RTS for an RC QP.
[[nodiscard]] inline Status ToRts(transport::QueuePair* qp,
                                  const RcParams& p = {}) {
  namespace tp = ::softfab::transport;
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRts;
  a.sq_psn = p.sq_psn;
  a.timeout = p.timeout;
  a.retry_cnt = p.retry_cnt;
  a.rnr_retry = p.rnr_retry;
  a.max_rd_atomic = p.max_rd_atomic;
  return qp->Modify(a, tp::kQpState | tp::kQpSqPsn | tp::kQpTimeout |
                           tp::kQpRetryCnt | tp::kQpRnrRetry |
                           tp::kQpMaxQpRdAtomic);
}

// RESET -> INIT -> RTR -> RTS for an RC QP towards `remote_qpn` at `remote`.
[[nodiscard]] inline Status ConnectRc(transport::QueuePair* qp,
                                      const transport::AhAttr& remote,
                                      uint32_t remote_qpn,
                                      const RcParams& p = {}) {
  if (Status s = ToInit(qp, p.access); !s.ok()) return s;
  if (Status s = ToRtr(qp, remote, remote_qpn, p); !s.ok()) return s;
  return ToRts(qp, p);
}

// Two RC QPs connected to each other, `a` reached at `at_a` and `b` at `at_b`;
// each side is walked one state at a time, both INIT before either RTR.
[[nodiscard]] inline Status ConnectRcPair(transport::QueuePair* a,
                                          const transport::AhAttr& at_a,
                                          transport::QueuePair* b,
                                          const transport::AhAttr& at_b,
                                          const RcParams& p = {}) {
  if (Status s = ToInit(a, p.access); !s.ok()) return s;
  if (Status s = ToInit(b, p.access); !s.ok()) return s;
  if (Status s = ToRtr(a, at_b, b->qp_num(), p); !s.ok()) return s;
  if (Status s = ToRtr(b, at_a, a->qp_num(), p); !s.ok()) return s;
  if (Status s = ToRts(a, p); !s.ok()) return s;
  return ToRts(b, p);
}

// INIT -> RTR for a UD QP (it needs nothing more).
[[nodiscard]] inline Status UdToRtr(transport::QueuePair* qp) {
  namespace tp = ::softfab::transport;
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRtr;
  return qp->Modify(a, tp::kQpState);
}

// RTR -> RTS for a UD QP, sending from `sq_psn`.
[[nodiscard]] inline Status UdRtrToRts(transport::QueuePair* qp,
                                       uint32_t sq_psn = 1) {
  namespace tp = ::softfab::transport;
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRts;
  a.sq_psn = sq_psn;
  return qp->Modify(a, tp::kQpState | tp::kQpSqPsn);
}

// RESET -> INIT -> RTR -> RTS for a UD QP taking `qkey`, sending from `sq_psn`.
[[nodiscard]] inline Status UdToRts(transport::QueuePair* qp,
                                    uint32_t qkey = kTestQkey,
                                    uint32_t sq_psn = 1) {
  if (Status s = ToInit(qp, transport::kAccessAll, qkey); !s.ok()) return s;
  if (Status s = UdToRtr(qp); !s.ok()) return s;
  return UdRtrToRts(qp, sq_psn);
}

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_SUPPORT_QP_BRINGUP_H_
