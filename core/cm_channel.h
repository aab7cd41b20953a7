// The connection manager's own state: its datagram slots on the endpoint's UD
// QP (receive slots kept posted, send slots each held until its send
// completes) and the sequence new
// connections draw their request ids from. What is sent when is the
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
  // GRH + message (sending): room to spare for later versions' fields.
  static constexpr size_t kSlotBytes = 40 + 256;
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

  // Encodes `m` into a free send slot and posts it to the endpoint named
  // `to`, through `ah`. A slot stays taken until its send completes (SendDone),
  // so a datagram the device has not sent yet is never overwritten; with every
  // slot taken: EAGAIN, nothing sent (to the protocol, a lost datagram: the
  // sender of a request retries, the peer repeats what wants an answer).
  [[nodiscard]] Status Send(const wire::CmMessage& m,
                            transport::AddressHandle* ah, const wire::Name& to);
  // Sends kVersionRefused (the prefix alone, in this version) to `to`.
  [[nodiscard]] Status SendVersionRefused(const wire::Name& from,
                                          transport::AddressHandle* ah,
                                          const wire::Name& to);
  // The send of the slot in work request `wr_id` completed (or was flushed):
  // the slot is free again.
  void SendDone(uint64_t wr_id);
  // Send slots whose send has not completed.
  uint32_t sends_in_flight() const { return sends_in_flight_; }
  // A completion of a receive slot: true, with the datagram past its GRH in
  // `bytes` and `len`, when it carries one. Valid until Repost(wc).
  bool Received(const transport::WorkCompletion& wc, const uint8_t** bytes,
                size_t* len) const;
  // Posts the slot of `wc` again (not after a flush: the QP is going away).
  void Repost(const transport::WorkCompletion& wc);

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
  // Takes a free send slot (the one after the last taken, or the next free
  // one after it), or kBuffers when every slot is in flight.
  uint32_t TakeSendSlot();
  // Posts `len` bytes of send slot `slot` to `to` through `ah`.
  Status PostSlot(uint32_t slot, size_t len, transport::AddressHandle* ah,
                  const wire::Name& to);

  uint32_t send_next_ = 0;
  bool send_busy_[kBuffers] = {};
  uint32_t sends_in_flight_ = 0;
  uint64_t next_request_id_ = 1;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_CM_CHANNEL_H_
