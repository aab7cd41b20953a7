// Completion queues (rxe_cq.c): creation, Poll (which runs the fabric under the
// time hold when the CQ is empty), Destroy, and Completed, where every
// completion enters its CQ (raising the channel event of an armed CQ) and an
// overrun raises CQ_ERR and QP_FATAL.
#include <cerrno>
#include <cstdint>
#include <memory>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

StatusOr<CompletionQueue*> DeviceImpl::CreateCq(int32_t cqe) {
  if (cqe < 1 || cqe > fabric_->config().max_cqe)
    return InvalidArgument("cqe out of range");
  const uint32_t index = static_cast<uint32_t>(cqs_.size());
  cqs_.push_back(std::make_unique<CqImpl>(this, index, cqe));
  return static_cast<CompletionQueue*>(cqs_.back().get());
}

int CqImpl::Poll(int num_entries, WorkCompletion* wc) {
  if (num_entries < 0 || (num_entries > 0 && wc == nullptr)) return -EINVAL;
  FabricImpl* f = dev_->fabric_;
  if (num_entries > 0) {
    f->hold().Watch(this);
    // Shared by processes, time moves only when the daemon advances it.
    if (empty() && !f->config().shared_by_processes) f->RunForCq(this);
  }
  int n = 0;
  while (n < num_entries && count_ > 0) {
    wc[n++] = ring_[head_];
    head_ = (head_ + 1) & mask_;
    --count_;
    if (!overflow_.empty()) {
      ring_[(head_ + count_) & mask_] = overflow_.front();
      overflow_.pop_front();
      ++count_;
    }
  }
  if (overflow_.empty() && count_ < capacity_) overrun_reported_ = false;
  if (n > 0) f->hold().ReadFrom(this);
  return n;
}

Status CqImpl::Destroy() {
  if (refs_ != 0) return Busy("CQ still used by a QP");
  // ibv_destroy_cq waits for the acks; returning EBUSY instead keeps the
  // simulator single-threaded and changes nothing.
  if (events_unacked_ != 0) return Busy("CQ has channel events not acked");
  if (channel_ != nullptr) {
    channel_->Forget(this);
    --channel_->refs_;
  }
  if (holding_pos_ >= 0) dev_->fabric_->hold().Remove(this);
  dev_->cqs_[index_].reset();
  return Status::Ok();
}

void FabricImpl::Completed(CqImpl* cq, const WorkCompletion& wc, QpImpl* qp,
                           const Ev* pkt) {
  ++recorder_.stats().completions;
  if (config_.observer != nullptr) [[unlikely]] {
    config_.observer->OnNodeEvent(cq->dev_->node_);
    config_.observer->OnCompletionAdded(cq->dev_->node_, cq);
  }
  if (cq->watched_ && cq->holding_pos_ < 0) hold_.Add(cq);
  // All that completion channels cost a completion: one well-predicted branch
  // (and passing `pkt`). An overflowing completion is kept (see Push), so it
  // counts as added.
  if (cq->notify_ != 0) [[unlikely]]
    cq->Notify(pkt != nullptr && Solicited(*pkt));
  if (cq->Push(wc)) return;
  ++recorder_.stats().cq_overruns;
  if (!cq->overrun_reported_) {
    cq->overrun_reported_ = true;
    cq->dev_->Raise(AsyncEventType::kCqErr, 0, cq->index_, 0);
  }
  if (qp != nullptr && qp->attr_.qp_state != QpState::kError &&
      qp->attr_.qp_state != QpState::kReset) {
    qp->dev_->Raise(AsyncEventType::kQpFatal, qp->qp_num(), 0, 0);
    qp->ToError();
  }
}

}  // namespace softfab::sim::internal
