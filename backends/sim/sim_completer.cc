// The RC completer (rxe_comp.c): ACKs, NAKs and read responses coming back to
// the requester, the ACK timeout and RNR timers with their retry counters, and
// send completions in order (Retire) or in error (ErrorHead).
#include <cassert>
#include <cstdint>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

namespace {

// The IB min_rnr_timer encodings (5 bits) in ns: 0 = 655.36 ms, 1 = 0.01 ms ...
// 31 = 491.52 ms.
constexpr uint64_t kRnrTimerNs[32] = {
    655360000, 10000,     20000,     30000,    40000,    60000,    80000,
    120000,    160000,    240000,    320000,   480000,   640000,   960000,
    1280000,   1920000,   2560000,   3840000,  5120000,  7680000,  10240000,
    15360000,  20480000,  30720000,  40960000, 61440000, 81920000, 122880000,
    163840000, 245760000, 327680000, 491520000};

}  // namespace

void QpImpl::OnResponse(const Ev& ev) {
  FabricImpl* f = dev_->fabric_;
  if (attr_.qp_state != QpState::kRts && attr_.qp_state != QpState::kSqd)
    return;
  if (ev.op == PktOp::kReadResp) {
    SendWqe* w = sq_.Find(ev.wqe_seq);
    if (w == nullptr || w->opcode != WrOpcode::kRdmaRead ||
        ev.psn != PsnAdd(w->first_psn, w->read_done)) {
      return;  // stale or out of order: the ack timer recovers.
    }
    ImplicitAck(w->first_psn);
    // The responder's memory is read now, through its QP (the simulator
    // moves a READ's bytes when the response arrives). Where numbers are
    // given again (SimConfig::qp_number_cycle) that may be a later QP with the
    // responder's number: the keys are then checked against its PD, as the
    // bytes would be whatever the memory holds now in either case.
    QpImpl* resp_qp = f->dev(ev.src_node)->QpByNum(ev.src_qpn);
    const uint8_t* src =
        resp_qp ? RemoteTarget(resp_qp, w->rkey, w->remote_addr, w->length,
                               transport::kAccessRemoteRead)
                : nullptr;
    if (src == nullptr) return;  // responder MR vanished: treat as lost
    const Sge* sges = sq_.Sges(ev.wqe_seq);
    if (w->mr_checked != dev_->mr_epoch_ + 1 &&
        CheckSges(dev_, pd_, sges, w->num_sge, transport::kAccessLocalWrite) <
            0) {
      w->error = WcStatus::kLocProtErr;
      Retire();
      return;
    }
    if (f->config().observer != nullptr) [[unlikely]] {
      f->config().observer->BeforeMemoryRead(src + ev.offset, ev.length);
    }
    PlaceBytes(sges, w->num_sge, ev.offset, src + ev.offset, ev.length,
               /*src_private=*/false, f->staging());
    f->Written(sges, w->num_sge, ev.offset, ev.length);
    ++w->read_done;
    // A valid response is forward progress: retry_cnt counts timeouts in a
    // row without any (so a long READ over a lossy link is not failed for
    // needing more than retry_cnt rounds in total).
    comp_.retry_left = attr_.retry_cnt;
    if (w->read_done == w->npkts) {
      ImplicitAck(PsnAdd(w->first_psn, w->npkts));
      comp_.retry_left = attr_.retry_cnt;
      Retire();
      ArmTimer();
      Pump();
    }
    return;
  }
  const Syndrome syn = static_cast<Syndrome>(ev.syndrome);
  if (PsnDiff(ev.psn, req_.next_psn) >= 0)
    return;  // acknowledges nothing we sent
  switch (syn) {
    case Syndrome::kAck: {
      const uint32_t before = comp_.una_psn;
      ImplicitAck(PsnAdd(ev.psn, 1));
      if (comp_.una_psn != before) {
        comp_.retry_left = attr_.retry_cnt;
        comp_.rnr_left = attr_.rnr_retry;
      }
      Retire();
      ArmTimer();
      Pump();
      return;
    }
    case Syndrome::kNakSeq:
      if (PsnDiff(ev.psn, comp_.una_psn) < 0) return;  // stale
      ImplicitAck(ev.psn);
      Retire();
      if (attr_.qp_state == QpState::kError || comp_.rnr_wait) return;
      ++f->mutable_stats().retransmits;
      GoBack(ev.psn);
      Pump();
      return;
    case Syndrome::kNakRnr: {
      if (PsnDiff(ev.psn, comp_.una_psn) < 0 || comp_.rnr_wait) return;
      ImplicitAck(ev.psn);
      Retire();
      if (attr_.qp_state == QpState::kError) return;
      if (attr_.rnr_retry != 7) {
        if (comp_.rnr_left == 0) {
          ErrorHead(WcStatus::kRnrRetryExcErr, kVendorRnr);
          return;
        }
        --comp_.rnr_left;
      }
      comp_.rnr_wait = true;
      DisarmTimer();
      f->ScheduleQpTimer(EvKind::kRnrTimer, dev_->node_, qp_num(), incarnation_,
                         f->now() + kRnrTimerNs[ev.aux & 31], ev.psn);
      return;
    }
    case Syndrome::kNakInvReq:
    case Syndrome::kNakRemAccess:
    case Syndrome::kNakRemOp: {
      if (PsnDiff(ev.psn, comp_.una_psn) < 0) return;
      ImplicitAck(ev.psn);
      Retire();
      if (attr_.qp_state == QpState::kError) return;
      const WcStatus st = syn == Syndrome::kNakInvReq ? WcStatus::kRemInvReqErr
                          : syn == Syndrome::kNakRemAccess
                              ? WcStatus::kRemAccessErr
                              : WcStatus::kRemOpErr;
      ErrorHead(st, kVendorRemote);
      return;
    }
  }
}

QpImpl* FabricImpl::TimerQp(int32_t node, uint32_t qpn, uint32_t incarnation) {
  QpImpl* qp = dev(node)->QpByNum(qpn);
  return qp != nullptr && qp->incarnation_ == incarnation ? qp : nullptr;
}

// The timers' events: traced, then handed to the QP if it still exists (it
// may have been destroyed since it armed the timer). One function per kind,
// so that each is a short tail call.
void FabricImpl::OnAckTimer(const Ev& ev) {
  recorder_.Record(TraceKind::kAckTimeout, ev, 0, now());
  QpImpl* qp = TimerQp(ev.dst_node, ev.dst_qpn, ev.aux);
  if (qp != nullptr) qp->OnAckTimer();
}

void FabricImpl::OnRnrTimer(const Ev& ev) {
  recorder_.Record(TraceKind::kRnrTimer, ev, 0, now());
  QpImpl* qp = TimerQp(ev.dst_node, ev.dst_qpn, ev.aux);
  if (qp != nullptr) qp->OnRnrTimer(ev.psn);
}

void QpImpl::OnAckTimer() {
  FabricImpl* f = dev_->fabric_;
  comp_.timer_pending = false;
  const QpState s = attr_.qp_state;
  if (comp_.timer_deadline_ns == 0 ||
      (s != QpState::kRts && s != QpState::kSqd))
    return;
  if (f->now() < comp_.timer_deadline_ns) {
    comp_.timer_pending = true;
    f->ScheduleQpTimer(EvKind::kAckTimer, dev_->node_, qp_num(), incarnation_,
                       comp_.timer_deadline_ns, 0);
    return;
  }
  if (!sq_.outstanding()) {
    comp_.timer_deadline_ns = 0;
    return;
  }
  if (comp_.retry_left == 0) {
    ErrorHead(WcStatus::kRetryExcErr, kVendorRetry);
    return;
  }
  --comp_.retry_left;
  ++f->mutable_stats().retransmits;
  comp_.timer_deadline_ns = 0;
  // Back to the oldest incomplete WR (not comp_.una_psn: a read whose responses
  // were lost may lie before it); the responder discards what it already
  // has.
  GoBack(sq_.Slot(sq_.head).first_psn);
  Pump();
}

void QpImpl::OnRnrTimer(uint32_t psn) {
  if (!comp_.rnr_wait) return;
  comp_.rnr_wait = false;
  if (attr_.qp_state != QpState::kRts && attr_.qp_state != QpState::kSqd)
    return;
  ++dev_->fabric_->mutable_stats().retransmits;
  GoBack(psn);
  Pump();
}

void QpImpl::CompleteSend(const SendWqe& w, WcStatus status,
                          uint32_t vendor_err) {
  WorkCompletion wc{};
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.qp_num = qp_num();
  if (status == WcStatus::kSuccess) {
    switch (w.opcode) {
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaWriteWithImm:
        wc.opcode = WcOpcode::kRdmaWrite;
        break;
      case WrOpcode::kRdmaRead:
        wc.opcode = WcOpcode::kRdmaRead;
        wc.byte_len = static_cast<uint32_t>(w.length);
        break;
      default:
        wc.opcode = WcOpcode::kSend;
    }
  } else {
    wc.vendor_err = vendor_err;
  }
  // Never solicited, as in rxe (rxe_comp.c posts with solicited = 0).
  dev_->fabric_->Completed(send_cq_, wc, this, /*pkt=*/nullptr);
}

void QpImpl::ImplicitAck(uint32_t psn_next) {
  if (PsnDiff(psn_next, comp_.una_psn) > 0 &&
      PsnDiff(psn_next, req_.next_psn) <= 0) {
    comp_.una_psn = psn_next;
  }
}

void QpImpl::Retire() {
  assert(sq_.head <= sq_.assigned && sq_.assigned <= sq_.tail);
  assert(sq_.tail - sq_.head <= sq_.depth());
  while (sq_.head < sq_.assigned) {
    SendWqe& w = sq_.Slot(sq_.head);
    if (w.error != WcStatus::kSuccess) {
      ErrorHead(w.error, kVendorLocal);
      return;
    }
    bool done;
    if (init_.qp_type == QpType::kUd) {
      done = w.done;
    } else if (w.opcode == WrOpcode::kRdmaRead) {
      done = w.read_done == w.npkts;
    } else {
      done = PsnDiff(PsnAdd(w.first_psn, w.npkts), comp_.una_psn) <= 0;
    }
    if (!done) break;
    ++sq_.head;
    if (Signaled(w)) CompleteSend(w, WcStatus::kSuccess, 0);
    if (attr_.qp_state == QpState::kError)
      return;  // the completion overran its CQ
  }
  if (attr_.qp_state == QpState::kSqd && sq_.head == sq_.assigned &&
      !req_.drained_reported) {
    req_.drained_reported = true;
    if (attr_.en_sqd_async_notify)
      dev_->Raise(AsyncEventType::kSqDrained, qp_num(), 0, 0);
  }
}

void QpImpl::ArmTimer() {
  const uint64_t to = AckTimeoutNs();
  FabricImpl* f = dev_->fabric_;
  if (to == 0 || comp_.rnr_wait || !sq_.outstanding()) {
    DisarmTimer();
    return;
  }
  comp_.timer_deadline_ns = f->now() + to;
  if (!comp_.timer_pending) {
    comp_.timer_pending = true;
    f->ScheduleQpTimer(EvKind::kAckTimer, dev_->node_, qp_num(), incarnation_,
                       comp_.timer_deadline_ns, 0);
  } else {
    f->SettleTimers();  // its queued event may be at the front, now early
  }
}

void QpImpl::DisarmTimer() {
  comp_.timer_deadline_ns = 0;
  if (comp_.timer_pending) dev_->fabric_->SettleTimers();
}

void FabricImpl::SettleTimersAtFront() {
  while (!loop_.empty()) {
    const Ev& top = loop_.TopPayload();
    if (top.kind != EvKind::kAckTimer) return;
    const uint64_t t = loop_.TopTime();
    QpImpl* qp = TimerQp(top.dst_node, top.dst_qpn, top.aux);
    if (qp != nullptr && qp->AckTimerDueAt(t)) return;  // it runs
    const Ev ev = loop_.Discard().payload;
    if (qp == nullptr) continue;  // destroyed
    const QpState s = qp->attr_.qp_state;
    if (qp->comp_.timer_deadline_ns != 0 &&
        (s == QpState::kRts || s == QpState::kSqd)) {
      loop_.Schedule(qp->comp_.timer_deadline_ns, ev);  // re-armed for later
    } else {
      qp->comp_.timer_pending = false;  // disarmed
      qp->comp_.timer_deadline_ns = 0;  // (a QP out of RTS/SQD: none armed)
    }
  }
}

void QpImpl::ErrorHead(WcStatus status, uint32_t vendor_err) {
  if (sq_.head < sq_.tail) {
    const SendWqe w = sq_.Slot(sq_.head);
    ++sq_.head;
    if (init_.qp_type == QpType::kUd) {
      CompleteSend(w, status, vendor_err);
      if (attr_.qp_state != QpState::kError) ToSqe();
      return;
    }
    CompleteSend(w, status, vendor_err);
  }
  ToError();
}

}  // namespace softfab::sim::internal
