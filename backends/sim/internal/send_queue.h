// A QP's send queue (rxe's struct rxe_sq with the indices of its ring): the
// send WQEs, each with its SGEs and inline bytes stored flat, and the three
// cursors that divide the ring into completed, started and posted WQEs.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_SEND_QUEUE_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_SEND_QUEUE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/sim/internal/common.h"

namespace softfab::sim::internal {

// One posted send WR as the HCA keeps it.
struct SendWqe {
  uint64_t wr_id;
  uint64_t seq;
  uint64_t length;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t imm;
  uint32_t first_psn;
  uint32_t npkts;
  uint32_t read_done;
  uint32_t ud_qpn;
  uint32_t ud_qkey;
  int32_t ud_node;
  uint32_t num_sge;
  WrOpcode opcode;
  uint32_t send_flags;
  bool signaled;
  bool done;                 // UD: left the port.
  uint8_t ud_traffic_class;  // UD: the AH's GRH traffic class
  WcStatus error;
  // DeviceImpl::mr_epoch_ + 1 when Pump's local SGE check passed (0: not
  // checked): while no MR has been deregistered since, it still passes.
  uint64_t mr_checked;
};

// The ring holds RingSize(depth) slots, found by a WQE's sequence number (its
// position in posting order, which never repeats while the QP lives: packets
// still on the wire after a reset or flush match no new WQE).
//
//   head <= assigned <= tail, and tail - head <= depth:
//   [head, assigned)  started by the requester (PSNs given, or failed its
//                     local checks), waiting for the completer;
//   [assigned, tail)  posted, not started yet.
//
// PostSend moves `tail`; the requester (Pump) moves `assigned`; the completer
// (Retire, ErrorHead) and the flushes move `head`. The storage is fixed at
// creation; nothing here allocates afterwards.
class SendQueue {
 public:
  SendQueue(uint32_t depth, uint32_t sge_max, uint32_t inline_max)
      : depth_(std::max<uint32_t>(depth, 1)),
        sge_max_(sge_max),
        inline_max_(inline_max),
        mask_(RingSize(depth_) - 1),
        wqes_(mask_ + 1, SendWqe{}),
        sges_((mask_ + 1) * sge_max, Sge{}),
        inline_((mask_ + 1) * inline_max, 0) {}

  uint32_t depth() const { return depth_; }  // max_send_wr
  uint32_t sge_max() const { return sge_max_; }
  uint32_t inline_max() const { return inline_max_; }
  bool full() const { return tail - head >= depth_; }
  // Something started and not completed (what the ACK timer guards).
  bool outstanding() const { return head < assigned; }

  SendWqe& Slot(uint64_t seq) { return wqes_[seq & mask_]; }
  const Sge* Sges(uint64_t seq) const {
    return &sges_[(seq & mask_) * sge_max_];
  }
  Sge* MutableSges(uint64_t seq) { return &sges_[(seq & mask_) * sge_max_]; }
  // The WQE's inline bytes (nullptr when the QP has no inline capacity).
  const uint8_t* Inline(uint64_t seq) const {
    return inline_max_ ? &inline_[(seq & mask_) * inline_max_] : nullptr;
  }
  uint8_t* MutableInline(uint64_t seq) {
    return &inline_[(seq & mask_) * inline_max_];
  }
  // The WQE with sequence number `seq` if it is started and not completed.
  SendWqe* Find(uint64_t seq) {
    if (seq < head || seq >= assigned) return nullptr;
    SendWqe& w = Slot(seq);
    return w.seq == seq ? &w : nullptr;
  }

  uint64_t head = 0;      // oldest WQE not yet completed
  uint64_t assigned = 0;  // WQEs before this have been started
  uint64_t tail = 0;      // next free slot

 private:
  uint32_t depth_;
  uint32_t sge_max_;
  uint32_t inline_max_;
  uint64_t mask_;
  std::vector<SendWqe> wqes_;
  std::vector<Sge> sges_;
  std::vector<uint8_t> inline_;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_SEND_QUEUE_H_
