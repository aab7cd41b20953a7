// Queue pairs: the send queue's WQEs and the QP object with its requester,
// completer and responder state. The methods are defined by part, as in the
// kernel's rxe driver: sim_qp.cc (state table, modify, flush), sim_requester.cc
// (post send, transmit), sim_completer.cc (ACKs, retries, send completions),
// sim_responder.cc (post recv, receive fetch).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_QP_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_QP_H_

#include <cstdint>
#include <vector>

#include "backends/sim/internal/common.h"
#include "backends/sim/internal/recv_ring.h"

namespace softfab::sim::internal {

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
  bool done;  // UD: left the port.
  WcStatus error;
  // DeviceImpl::mr_epoch_ + 1 when Pump's local SGE check passed (0: not
  // checked): while no MR has been deregistered since, it still passes.
  uint64_t mr_checked;
};

class QpImpl final : public QueuePair {
 public:
  QpImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index, const QpInitAttr& init,
         uint32_t send_sge_max, uint32_t inline_max);
  uint32_t qp_num() const override { return kQpnBase + index_; }
  QpType qp_type() const override { return init_.qp_type; }
  QpState state() const override { return attr_.qp_state; }
  Status Modify(const QpAttr& attr, uint32_t attr_mask) override;
  Status Query(QpAttr* attr, QpInitAttr* init_attr) const override;
  Status PostSend(const SendWr* wr, const SendWr** bad_wr) override;
  Status PostRecv(const RecvWr* wr, const RecvWr** bad_wr) override;
  Status Destroy() override;

  // ---- engine (called by FabricImpl) ----
  bool Receiving() const {
    const QpState s = attr_.qp_state;
    return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd ||
           s == QpState::kSqe;
  }
  SendWqe& Slot(uint64_t i) { return sq_[i & sq_mask_]; }
  const Sge* SendSges(uint64_t i) const {
    return &sq_sges_[(i & sq_mask_) * send_sge_max_];
  }
  const uint8_t* InlineData(uint64_t i) const {
    return inline_max_ ? &sq_inline_[(i & sq_mask_) * inline_max_] : nullptr;
  }
  // The WQE with sequence number `seq` if it is still outstanding.
  SendWqe* FindWqe(uint64_t seq) {
    if (seq < sq_head_ || seq >= sq_assigned_) return nullptr;
    SendWqe& w = Slot(seq);
    return w.seq == seq ? &w : nullptr;
  }
  // min(path_mtu, the link's MTU): fixed between Modify() calls.
  uint32_t PathMtuBytes() const { return path_mtu_bytes_; }
  uint32_t ComputePathMtuBytes() const;
  uint64_t AckTimeoutNs() const {
    return attr_.timeout == 0 ? 0 : (4096ull << attr_.timeout);
  }
  bool Signaled(const SendWqe& w) const {
    return init_.sq_sig_all != 0 ||
           (w.send_flags & transport::kSendSignaled) != 0;
  }
  void Pump();
  // UD: WR `seq` is done (the send completes, in order) at t_ns.
  void ScheduleUdSendDone(uint64_t seq, uint64_t t_ns);
  void Retire();
  void GoBack(uint32_t psn);
  void ArmTimer();
  // Everything before psn_next is acknowledged.
  void ImplicitAck(uint32_t psn_next);
  void ErrorHead(WcStatus status, uint32_t vendor_err);
  void ToError();
  void ToSqe();
  void FlushSend();
  void FlushRecv();
  void CompleteSend(const SendWqe& w, WcStatus status, uint32_t vendor_err);
  // `pkt`: the packet that caused it, or null (see FabricImpl::Completed; a
  // flush has none and is not solicited, as in current rxe; kernels before
  // its flush rework counted flushed receives as solicited).
  void CompleteRecvError(uint64_t wr_id, WcStatus status, uint32_t vendor_err,
                         const Ev* pkt);
  // Takes the next receive request (own RQ or SRQ) into active_; false if none.
  bool FetchRecv();
  void DiscardAll();

  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  QpInitAttr init_;
  QpAttr attr_{};
  CqImpl* send_cq_;
  CqImpl* recv_cq_;
  SrqImpl* srq_;
  uint32_t send_sge_max_;
  uint32_t inline_max_;
  uint32_t sq_depth_;  // max_send_wr; storage holds RingSize(sq_depth_)
  uint64_t sq_mask_;
  std::vector<SendWqe> sq_;
  std::vector<Sge> sq_sges_;
  std::vector<uint8_t> sq_inline_;
  RecvRing rq_;

  // Requester.
  uint64_t sq_head_ = 0;  // oldest WQE not yet completed
  uint64_t sq_assigned_ =
      0;                  // WQEs before this have PSNs (have been transmitted)
  uint64_t sq_tail_ = 0;  // next free slot
  uint64_t tx_wqe_ = 0;   // transmit cursor: WQE ...
  uint32_t tx_pkt_ = 0;   // ... and packet within it
  uint64_t wqe_seq_next_ = 0;
  uint32_t next_psn_ = 0;
  uint32_t una_psn_ = 0;  // oldest unacknowledged PSN
  uint8_t retry_left_ = 0;
  uint8_t rnr_left_ = 0;
  bool rnr_wait_ = false;
  bool tx_blocked_ = false;  // the WQE at blocked_at_ failed local checks
  uint64_t blocked_at_ = 0;
  bool timer_pending_ = false;
  bool drained_reported_ = false;
  uint64_t timer_deadline_ns_ = 0;
  int32_t dest_node_ = -1;
  uint32_t path_mtu_bytes_ = 0;  // PathMtuBytes()

  // Responder.
  uint32_t epsn_ = 0;
  bool nak_sent_ = false;
  bool recv_active_ = false;
  RecvWqe active_{};
  std::vector<Sge> active_sges_;
  uint64_t active_capacity_ = 0;
  uint64_t active_bytes_ = 0;
  bool last_wqe_reported_ = false;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_QP_H_
