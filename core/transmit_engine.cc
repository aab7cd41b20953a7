// The transmit engine (see transmit_engine.h): the send slots, their
// registered bounce memory, and the pool of READs.
#include "core/transmit_engine.h"

#include "core/internal/endpoint_common.h"

namespace softfab::core {

void TransmitEngine::InitOps(uint32_t ops) {
  ops_.resize(ops);
  for (uint32_t i = ops; i-- > 0;) free_.push_back(i);
}

Status TransmitEngine::RegisterSlots(transport::ProtectionDomain* pd,
                                     uint32_t slots, size_t slot_bytes,
                                     bool control) {
  slot_bytes_ = slot_bytes;
  slots_ = slots;
  bounce_.AllocateZeroed(slot_bytes * slots +
                         (control ? wire::kHeaderBytes * kControlSlots : 0));
  auto mr = pd->RegMr(bounce_.data(), bounce_.size(), 0);
  if (!mr.ok()) return mr.status();
  mr_ = *mr;
  return Status::Ok();
}

uint32_t TransmitEngine::TakeRead() {
  const uint32_t index = TakeSlot(reads_, reads_free_);
  reads_[index] = Read{};
  reads_[index].used = true;
  return index;
}

}  // namespace softfab::core
