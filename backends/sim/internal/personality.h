// The device personality (SimConfig::personality) as the few decisions the
// simulated HCA makes differently by it: where real devices depart from the
// IB spec or from each other. The table is in sim_fabric.h, the sources in
// backends/sim/README.md ("Device personalities").
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_PERSONALITY_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_PERSONALITY_H_

#include <cstdint>

#include "backends/sim/internal/common.h"
#include "backends/sim/internal/event.h"
#include "backends/sim/sim_fabric.h"

namespace softfab::sim::internal {

struct Quirks {
  // A UD send longer than the path MTU: true, nothing is sent and the WR
  // completes successfully (IB C10-93.1.1); false, it completes with
  // LOC_LEN_ERR and the QP goes to SQE.
  bool ud_send_over_mtu_is_silent;
  // An RC SEND into a receive too small for it (and longer than
  // scatter_to_cqe_bytes): the receive completes with `rc_recv_too_small`,
  // the sender is NAKed with `rc_recv_too_small_nak` (remote operational
  // error: REM_OP_ERR; invalid request: REM_INV_REQ_ERR), both QPs go to
  // ERROR.
  WcStatus rc_recv_too_small;
  Syndrome rc_recv_too_small_nak;
  // mlx5's scatter to CQE: a message of at most this many bytes lands in the
  // CQE and the provider copies it into the receive, so one that does not
  // fit completes the receive with LOC_LEN_ERR in software while the sender
  // has its ACK and both QPs stay as they are. 0: none.
  uint32_t scatter_to_cqe_bytes;
  // A UD datagram into a receive without room for the GRH and the payload:
  // the receive completes with `ud_recv_too_small`, and the QP goes to ERROR
  // when `ud_recv_too_small_errors_qp`.
  WcStatus ud_recv_too_small;
  bool ud_recv_too_small_errors_qp;
};

inline Quirks QuirksOf(DevicePersonality personality) {
  switch (personality) {
    case DevicePersonality::kMlx5:
      return Quirks{/*ud_send_over_mtu_is_silent=*/false,
                    /*rc_recv_too_small=*/WcStatus::kLocLenErr,
                    /*rc_recv_too_small_nak=*/Syndrome::kNakInvReq,
                    /*scatter_to_cqe_bytes=*/32,
                    /*ud_recv_too_small=*/WcStatus::kLocLenErr,
                    /*ud_recv_too_small_errors_qp=*/false};
    case DevicePersonality::kRxe:
      break;
  }
  // rxe: the responder's copy into the receive fails with EINVAL, which it
  // treats as a malformed WQE, class A, on every QP type.
  return Quirks{/*ud_send_over_mtu_is_silent=*/true,
                /*rc_recv_too_small=*/WcStatus::kLocQpOpErr,
                /*rc_recv_too_small_nak=*/Syndrome::kNakRemOp,
                /*scatter_to_cqe_bytes=*/0,
                /*ud_recv_too_small=*/WcStatus::kLocQpOpErr,
                /*ud_recv_too_small_errors_qp=*/true};
}

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_PERSONALITY_H_
