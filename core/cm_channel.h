// The connection manager's own state: its datagram slots on the endpoint's UD
// QP (receive slots kept posted, a ring of send slots) and the sequences new
// connections draw their PSNs and request ids from. What is sent when is the
// protocol's business: wireup.cc (RDM) and msg_connection.cc (FI_EP_MSG).
// Not thread-safe (the endpoint's owner serialises).
#ifndef SOFTFAB_CORE_CM_CHANNEL_H_
#define SOFTFAB_CORE_CM_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/pinned_memory.h"
#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

class CmChannel {
 public:
  static constexpr uint32_t kBuffers = 32;  // Receive slots; as many to send.
  static constexpr size_t kSlotBytes = 40 + 128;  // GRH + message (sending).
  static_assert(wire::kCmMaxBytes <= kSlotBytes - 40);

  // Allocates the slots and registers them under `pd`. A receive slot holds
  // the GRH and `mtu_bytes` (the port's path MTU): any datagram that can
  // arrive fits, however large its sender made it. (A datagram larger than
  // its receive moves a UD QP to ERROR on rxe: one oversized datagram from
  // anyone would end the endpoint's connection manager.)
  [[nodiscard]] Status Register(transport::ProtectionDomain* pd,
                                size_t mtu_bytes);
  // Posts every receive slot to `qp` (the endpoint's UD QP, which it owns);
  // the channel sends on it from then on.
  [[nodiscard]] Status Start(transport::QueuePair* qp);
  // Releases the registration; the memory stays until the object goes.
  void Deregister();

  // Encodes `m` into the next send slot (a slot is reused kBuffers sends
  // later) and posts it to the endpoint named `to`, through `ah`.
  [[nodiscard]] Status Send(const wire::CmMessage& m,
                            transport::AddressHandle* ah, const wire::Name& to);
  // A completion of a receive slot: true, with the datagram past its GRH in
  // `bytes` and `len`, when it carries one. Valid until Repost(wc).
  bool Received(const transport::WorkCompletion& wc, const uint8_t** bytes,
                size_t* len) const;
  // Posts the slot of `wc` again (not after a flush: the QP is going away).
  void Repost(const transport::WorkCompletion& wc);

  // The initial PSN of a new RC connection.
  uint32_t NextPsn() { return (next_psn_ += 0x1000) & 0xFFFFFF; }
  // The id of a new connection request.
  uint64_t NextRequestId() { return next_request_id_++; }

 private:
  // Receive slots (recv_slot_bytes_ each) first, then the send slots.
  uint8_t* Slot(uint32_t index) {
    return index < kBuffers ? buffers_.data() + index * recv_slot_bytes_
                            : buffers_.data() + kBuffers * recv_slot_bytes_ +
                                  (index - kBuffers) * kSlotBytes;
  }
  const uint8_t* Slot(uint32_t index) const {
    return const_cast<CmChannel*>(this)->Slot(index);
  }

  transport::QueuePair* qp_ = nullptr;
  // kBuffers receive slots, then kBuffers send slots.
  PinnedVector<uint8_t> buffers_;
  size_t recv_slot_bytes_ = kSlotBytes;
  transport::MemoryRegion* mr_ = nullptr;
  uint32_t send_next_ = 0;
  uint64_t next_request_id_ = 1;
  uint32_t next_psn_ = 0x1000;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_CM_CHANNEL_H_
