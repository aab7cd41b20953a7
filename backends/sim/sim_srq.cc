// Shared receive queues (rxe_srq.c): creation, posting, the limit (Modify,
// Query) and Destroy. QPs fetch from them in sim_responder.cc.
#include <cstdint>
#include <memory>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

Status SrqImpl::PostRecv(const RecvWr* wr, const RecvWr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  ++post_calls_;
  for (; wr != nullptr; wr = wr->next) {
    Status s = ValidateRecvWr(*wr, ring_.sge_max());
    if (s.ok() && ring_.full()) s = NoMemory("SRQ full");
    if (!s.ok()) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return s;
    }
    ring_.Push(*wr);
  }
  return Status::Ok();
}

Status SrqImpl::Modify(const SrqAttr& attr, uint32_t mask) {
  if (mask & ~(transport::kSrqMaxWr | transport::kSrqLimit)) {
    return InvalidArgument("unknown SRQ attribute mask bits");
  }
  if (mask & transport::kSrqMaxWr)
    return InvalidArgument("SRQ resize is not supported");
  if (mask & transport::kSrqLimit) {
    if (attr.srq_limit > ring_.depth())
      return InvalidArgument("srq_limit above max_wr");
    limit_ = attr.srq_limit;
  }
  return Status::Ok();
}

Status SrqImpl::Query(SrqAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  attr->max_wr = ring_.depth();
  attr->max_sge = ring_.sge_max();
  attr->srq_limit = limit_;
  return Status::Ok();
}

Status SrqImpl::Destroy() {
  if (refs_ != 0) return Busy("SRQ still used by a QP");
  pd_->refs_--;
  dev_->srqs_[index_].reset();
  return Status::Ok();
}

StatusOr<SharedReceiveQueue*> PdImpl::CreateSrq(const SrqAttr& attr) {
  const SimConfig& c = dev_->fabric_->config();
  if (attr.max_wr == 0 || attr.max_wr > static_cast<uint32_t>(c.max_srq_wr)) {
    return InvalidArgument("max_wr out of range");
  }
  if (attr.max_sge > static_cast<uint32_t>(c.max_sge))
    return InvalidArgument("max_sge too big");
  const uint32_t index = static_cast<uint32_t>(dev_->srqs_.size());
  auto srq = std::make_unique<SrqImpl>(dev_, this, index);
  srq->ring_.Init(attr.max_wr, attr.max_sge);
  srq->limit_ = attr.srq_limit;
  dev_->srqs_.push_back(std::move(srq));
  ++refs_;
  return static_cast<SharedReceiveQueue*>(dev_->srqs_.back().get());
}

}  // namespace softfab::sim::internal
