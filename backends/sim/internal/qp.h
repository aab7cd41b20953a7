// Queue pairs (rxe's struct rxe_qp): the QP object and its state, grouped by
// the part of the HCA that owns it, as rxe groups it in qp->req, qp->comp and
// qp->resp: the send queue (send_queue.h) and the receive queue, the
// attributes, and the requester's, completer's and responder's state. The
// methods are defined by part: sim_qp.cc (state table, modify, flush),
// sim_requester.cc (post send, transmit), sim_completer.cc (ACKs, timers,
// retries, send completions), sim_responder.cc (request packets, post recv,
// receive fetch), sim_wire.cc (UD delivery).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_QP_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_QP_H_

#include <cstdint>
#include <vector>

#include "backends/sim/internal/common.h"
#include "backends/sim/internal/event.h"
#include "backends/sim/internal/recv_ring.h"
#include "backends/sim/internal/send_queue.h"

namespace softfab::sim::internal {

// What the requester (sim_requester.cc, rxe_req.c) owns: where transmission
// stands in the send queue and the next PSN to hand out. Pump moves it
// forward, GoBack rewinds it for a retry (the completer calls it), Modify sets
// next_psn from sq_psn, the flushes and RESET move tx_wqe past everything.
// The completer reads next_psn (a response to a PSN never sent is ignored).
struct Requester {
  uint64_t tx_wqe = 0;  // transmit cursor: WQE ...
  uint32_t tx_pkt = 0;  // ... and packet within it
  uint32_t next_psn = 0;
  // The WQE at blocked_at failed its local checks: nothing at or after it is
  // sent; it completes in error once the WQEs before it have (Retire).
  bool blocked = false;
  uint64_t blocked_at = 0;
  // SQD: the SQ_DRAINED event was raised (by Retire, when the last started
  // WQE completes); cleared on entering SQD and on RESET.
  bool drained_reported = false;
};

// What the completer (sim_completer.cc, rxe_comp.c) owns: the oldest PSN not
// acknowledged, the retry budgets and the two timers. The completer's
// handlers and ArmTimer move it; Modify loads the budgets from retry_cnt and
// rnr_retry and una_psn from sq_psn; ToError and RESET disarm the timers. The
// requester reads rnr_wait (nothing is sent while an RNR NAK's timer runs)
// and arms the ACK timer after sending.
struct Completer {
  uint32_t una_psn = 0;  // oldest unacknowledged PSN
  uint8_t retry_left = 0;
  uint8_t rnr_left = 0;
  bool rnr_wait = false;
  // An ACK-timer event is queued (at most one per QP; a later deadline
  // re-queues it, and disarming drops it, when it reaches the front of the
  // queue: FabricImpl::SettleTimers).
  bool timer_pending = false;
  uint64_t timer_deadline_ns = 0;  // 0: no ACK timeout armed
};

// What the responder (sim_responder.cc, rxe_resp.c, and UD delivery in
// sim_wire.cc) owns: the expected PSN and the receive in progress, fetched
// from the QP's receive queue or its SRQ into `wqe` / `sges`. FetchRecv and
// the request handlers move it; Modify sets epsn from rq_psn; the flushes,
// ToError and RESET end the receive in progress.
struct Responder {
  uint32_t epsn = 0;
  bool nak_sent = false;     // a sequence NAK is out for epsn; not repeated
  bool recv_active = false;  // `wqe` is a receive in progress
  // LAST_WQE_REACHED raised (a QP on an SRQ entering ERROR); cleared on RESET.
  bool last_wqe_reported = false;
  RecvWqe wqe{};
  std::vector<Sge> sges;  // its SGEs (max_recv_sge of the RQ or the SRQ)
  uint64_t capacity = 0;  // their total length; UINT64_MAX: they failed checks
  uint64_t bytes = 0;     // bytes of the message placed so far
};

// What Modify resolves from the attributes (rxe's qp->pri_av and qp->mtu),
// fixed between Modify calls: the node the address vector names (-1: none)
// and min(path_mtu, the link's MTU).
struct ResolvedPath {
  int32_t node = -1;
  uint32_t mtu_bytes = 0;
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
  // min(path_mtu, the link's MTU): fixed between Modify() calls.
  uint32_t PathMtuBytes() const { return path_.mtu_bytes; }
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
  // No ACK timeout armed any more (its queued event leaves when it reaches
  // the front, FabricImpl::SettleTimers).
  void DisarmTimer();
  // Whether this QP's ACK timer, queued for `t_ns`, times out then.
  bool AckTimerDueAt(uint64_t t_ns) const {
    return comp_.timer_deadline_ns != 0 && comp_.timer_deadline_ns <= t_ns &&
           (attr_.qp_state == QpState::kRts || attr_.qp_state == QpState::kSqd);
  }
  // Everything before psn_next is acknowledged.
  void ImplicitAck(uint32_t psn_next);
  void ErrorHead(WcStatus status, uint32_t vendor_err);
  void ToError();
  void ToSqe();
  void FlushSend();
  void FlushRecv();
  // RESET: drops every WR and the receive in progress without completions.
  void DiscardAll();
  void CompleteSend(const SendWqe& w, WcStatus status, uint32_t vendor_err);
  // `pkt`: the packet that caused it, or null (see FabricImpl::Completed; a
  // flush has none and is not solicited, as in current rxe; kernels before
  // its flush rework counted flushed receives as solicited).
  void CompleteRecvError(uint64_t wr_id, WcStatus status, uint32_t vendor_err,
                         const Ev* pkt);
  // Takes the next receive request (own RQ or SRQ) into resp_; false if none.
  bool FetchRecv();

  // ---- packets and timers for this QP (FabricImpl dispatches them) ----
  // Responder (sim_responder.cc): an RC request packet (SEND, WRITE, READ
  // request) that passed the arrival checks; the ACK / NAK and the read
  // responses it sends back.
  void OnRequest(const Ev& ev);
  void SendAck(Syndrome syn, uint32_t psn, uint32_t aux);
  void SendReadResponses(const Ev& req);
  // UD delivery (sim_wire.cc): a datagram that passed the arrival checks.
  void OnUdDatagram(const Ev& ev);
  // Completer (sim_completer.cc): an ACK, NAK or read response; the ACK
  // timer's event; the RNR timer's event for the NAK of `psn`.
  void OnResponse(const Ev& ev);
  void OnAckTimer();
  void OnRnrTimer(uint32_t psn);

  // What the QP was created with, fixed for its life.
  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  // Which QP of its device this is, in creation order: the timers' events
  // carry it (Ev::aux), so that one of a destroyed QP never acts on a later
  // QP given the same number (SimConfig::qp_number_cycle).
  uint32_t incarnation_ = 0;
  QpInitAttr init_;
  CqImpl* send_cq_;
  CqImpl* recv_cq_;
  SrqImpl* srq_;

  // The attributes as Modify set them and Query returns them (qp_state is
  // the QP's state; ToError, ToSqe and RESET move it too), and the path they
  // resolve to.
  QpAttr attr_{};
  ResolvedPath path_;

  // The queues: the send queue, and the QP's own receive queue (unused when
  // it takes its receives from srq_). PostSend and PostRecv fill them.
  SendQueue sq_;
  RecvRing rq_;

  Requester req_;
  Completer comp_;
  Responder resp_;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_QP_H_
