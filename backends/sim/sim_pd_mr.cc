// Protection domains and memory regions (rxe_mr.c): registration, the key, PD,
// bounds and access checks of local SGEs and remote accesses, and the copies
// between packets and scatter/gather lists.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

StatusOr<ProtectionDomain*> DeviceImpl::AllocPd() {
  const uint32_t index = static_cast<uint32_t>(pds_.size());
  pds_.push_back(std::make_unique<PdImpl>(this, index));
  return static_cast<ProtectionDomain*>(pds_.back().get());
}

Status PdImpl::Destroy() {
  if (refs_ != 0) return Busy("PD still has MRs, QPs, SRQs or AHs");
  dev_->pds_[index_].reset();
  return Status::Ok();
}

StatusOr<MemoryRegion*> PdImpl::RegMr(void* addr, uint64_t length,
                                      uint32_t access) {
  if (addr == nullptr) return InvalidArgument("addr is null");
  if (length == 0) return InvalidArgument("length is 0");
  if (access & ~transport::kAccessAll)
    return InvalidArgument("unknown access flags");
  if ((access &
       (transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic)) &&
      !(access & transport::kAccessLocalWrite)) {
    return InvalidArgument("REMOTE_WRITE/ATOMIC need LOCAL_WRITE");
  }
  if (reinterpret_cast<uint64_t>(addr) + length <
      reinterpret_cast<uint64_t>(addr)) {
    return InvalidArgument("region wraps around");
  }
  const uint32_t index = static_cast<uint32_t>(dev_->mrs_.size());
  if (index >= (1u << 23)) return NoMemory("too many MRs");
  const uint8_t tag = static_cast<uint8_t>(dev_->mr_tag_++ | 1);
  dev_->mrs_.push_back(std::make_unique<MrImpl>(
      dev_, this, index, static_cast<uint8_t*>(addr), length, access, tag));
  ++refs_;
  return static_cast<MemoryRegion*>(dev_->mrs_.back().get());
}

Status MrImpl::Destroy() {
  ++dev_->mr_epoch_;
  pd_->refs_--;
  dev_->mrs_[index_].reset();
  return Status::Ok();
}

// Copies `len` bytes starting at byte `offset` of the SGE list into `dst`.
void Gather(const Sge* sges, uint32_t n, uint64_t offset, uint8_t* dst,
            uint64_t len) {
  ForEachSgePiece(sges, n, offset, len, [&](uint64_t addr, uint64_t take) {
    std::memcpy(dst, reinterpret_cast<const uint8_t*>(addr), take);
    dst += take;
  });
}

// Copies `len` bytes from `src` into the SGE list at byte `offset` of the list.
void Scatter(const Sge* sges, uint32_t n, uint64_t offset, const uint8_t* src,
             uint64_t len) {
  ForEachSgePiece(sges, n, offset, len, [&](uint64_t addr, uint64_t take) {
    std::memcpy(reinterpret_cast<uint8_t*>(addr), src, take);
    src += take;
  });
}

void PlaceBytes(const Sge* sges, uint32_t n, uint64_t offset,
                const uint8_t* src, uint64_t len, bool src_private,
                uint8_t* staging) {
  if (len == 0) return;
  if (uint8_t* dst = InOneSge(sges, n, offset, len)) {
    std::memmove(dst, src, len);
    return;
  }
  if (!src_private) {
    std::memcpy(staging, src, len);
    src = staging;
  }
  Scatter(sges, n, offset, src, len);
}

void FabricImpl::TellWritten(const Sge* sges, uint32_t n, uint64_t offset,
                             uint64_t len) {
  SimObserver* o = config_.observer;
  ForEachSgePiece(sges, n, offset, len, [o](uint64_t addr, uint64_t take) {
    o->OnMemoryWritten(reinterpret_cast<const void*>(addr), take);
  });
}

void FabricImpl::HoldDoorbells(bool hold) {
  if (!config_.shared_by_processes) return;
  doorbells_held_ = hold;
  if (hold) return;
  // Rung in an order of the fabric's own: by node, then QP number.
  std::vector<QpImpl*> pumps;
  pumps.swap(held_pumps_);
  std::sort(pumps.begin(), pumps.end(), [](const QpImpl* a, const QpImpl* b) {
    return a->dev_->node_ != b->dev_->node_ ? a->dev_->node_ < b->dev_->node_
                                            : a->qp_num() < b->qp_num();
  });
  pumps.erase(std::unique(pumps.begin(), pumps.end()), pumps.end());
  for (QpImpl* qp : pumps) qp->Pump();
  std::vector<HeldWakeup> wakeups;
  wakeups.swap(held_wakeups_);
  std::stable_sort(
      wakeups.begin(), wakeups.end(),
      [](const HeldWakeup& a, const HeldWakeup& b) { return a.node < b.node; });
  for (const HeldWakeup& w : wakeups) ScheduleWakeup(w.node, w.t_ns);
}

void FabricImpl::ForgetHeldPump(const QpImpl* qp) {
  held_pumps_.erase(std::remove(held_pumps_.begin(), held_pumps_.end(), qp),
                    held_pumps_.end());
}

int64_t CheckSges(DeviceImpl* dev, PdImpl* pd, const Sge* sges, uint32_t n,
                  uint32_t access_needed) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const MrImpl* mr = dev->MrByKey(sges[i].lkey);
    const uint64_t len = SgeLength(sges[i]);
    if (mr == nullptr || mr->lkey_ != sges[i].lkey || mr->pd_ != pd ||
        (mr->access_ & access_needed) != access_needed ||
        !mr->Contains(sges[i].addr, len)) {
      return -1;
    }
    total += len;
  }
  return static_cast<int64_t>(total);
}

uint8_t* RemoteTarget(QpImpl* qp, uint32_t rkey, uint64_t addr, uint64_t len,
                      uint32_t access) {
  const MrImpl* mr = qp->dev_->MrByKey(rkey);
  if (mr == nullptr || mr->rkey_ != rkey || mr->pd_ != qp->pd_ ||
      (mr->access_ & access) != access ||
      (qp->attr_.qp_access_flags & access) != access ||
      !mr->Contains(addr, len)) {
    return nullptr;
  }
  return reinterpret_cast<uint8_t*>(addr);
}

}  // namespace softfab::sim::internal
