// The transmit engine of an endpoint (rxm's tx buffer pools; UCX's request
// pool and its rndv state): the table of sends in flight (TxOp), the
// registered bounce slots they are copied into (one per send, and a ring of
// header-only slots for acks), the RDMA READs a rendezvous target has in
// flight (Read), and the device's limits for both (inline data, SGEs per
// READ). What is posted when is the protocol's (send.cc, rendezvous.cc);
// this class only owns the slots and hands them out. Not thread-safe (the
// endpoint's owner serialises).
#ifndef SOFTFAB_CORE_TRANSMIT_ENGINE_H_
#define SOFTFAB_CORE_TRANSMIT_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/pinned_memory.h"
#include "core/rx_context.h"
#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

class TransmitEngine {
 public:
  // A READ scatters into at most a receive's iovecs.
  static constexpr size_t kIovMax = RxContext::kIovMax;
  static constexpr uint32_t kControlSlots = 256;  // Acks in flight.

  // One send in flight (eager or rendezvous), from AcquireTx to FreeTx.
  struct TxOp {
    bool used = false;
    uint32_t peer = 0;
    void* context = nullptr;
    uint64_t flags = 0;  // CQ flags (kSend | kMsg/kTagged) and op flags.
    uint64_t level = 0;  // The completion level it waits for.
    size_t len = 0;
    bool wants_entry = false;  // Writes a CQ entry on success.
    bool reserved = false;     // Holds a CQ reservation (errors always fit).
    bool sent = false;         // SEND posted.
    bool acked = false;        // Target ack (delivery/match) seen.
    bool send_done = false;    // SEND completed at the transport.
    bool rendezvous = false;   // Waits for the target's kReadDone.
    bool fenced = false;       // FI_FENCE: posted once in_flight is 0.
    size_t prefix = 0;         // Rendezvous: payload bytes sent with it.
    transport::MemoryRegion* rdv_mr = nullptr;  // Registered here: released.
    bool rdv_mr_cached = false;     // rdv_mr came from AcquireMr (user buffer).
    std::vector<uint8_t> rdv_copy;  // A vectored large message, gathered.
    wire::Header header;
  };

  // An RDMA READ of a rendezvous payload into a receive.
  struct Read {
    bool used = false;
    uint32_t rx = 0;
    uint32_t peer = 0;
    uint32_t epoch = 0;  // The connection it came on (Peer::epoch).
    wire::Header header;
    void* buf = nullptr;    // Where it lands (first byte).
    size_t len = 0;         // Bytes read (<= header.length).
    uint64_t cq_flags = 0;  // Extra entry flags (kClaim).
    transport::MemoryRegion* mrs[kIovMax] = {};  // Registered here.
    // READ work requests posted and not yet completed: one per
    // read_sge_max() pieces of the receive (PostRead splits when the device
    // takes fewer SGEs than the receive has iovecs).
    uint32_t wrs_pending = 0;
    bool failed = false;  // One of them completed in error,
    int prov_errno = 0;   // and why (the first failure's cause).
    // Into a multi-recv buffer: its entry's room is held (CompletionQueue::
    // Claim) until the READ completes.
    bool claimed = false;
  };

  // The device's limits: bytes a send may carry inline, and SGEs per RDMA
  // READ (at most kIovMax: a receive with more iovecs is read with several).
  void SetLimits(uint32_t inline_max, uint32_t read_sge_max) {
    inline_max_ = inline_max;
    read_sge_max_ = read_sge_max;
  }
  uint32_t inline_max() const { return inline_max_; }
  uint32_t read_sge_max() const { return read_sge_max_; }

  // `ops` send slots, free.
  void InitOps(uint32_t ops);
  // Allocates and registers (under `pd`, local access only) `slots` bounce
  // slots of `slot_bytes` (one per send slot), followed by kControlSlots
  // header-only slots when `control` (RDM and FI_EP_MSG acks; DGRAM has
  // none).
  [[nodiscard]] Status RegisterSlots(transport::ProtectionDomain* pd,
                                     uint32_t slots, size_t slot_bytes,
                                     bool control);
  // Releases the registration (the memory stays until the object goes).
  void Deregister() {
    if (mr_) (void)mr_->Destroy();
  }
  uint32_t lkey() const { return mr_->lkey(); }

  // ---- Sends ----
  uint32_t size() const { return static_cast<uint32_t>(ops_.size()); }
  TxOp& op(uint32_t index) { return ops_[index]; }
  std::vector<TxOp>& ops() { return ops_; }
  // No slot for a new send: all taken, or the free ones all lent out.
  bool full() const { return free_.size() <= lent_; }
  // A send that needs no slot of its own (a small inject, copied inline when
  // posted) still counts against the table until its work request retires,
  // so as many sends are in flight as before, and no more.
  void Lend() { ++lent_; }
  void Unlend() { --lent_; }
  uint32_t lent() const { return lent_; }
  // A free send slot (the caller checked there is one); its TxOp keeps what
  // the last user left.
  uint32_t Take() {
    const uint32_t index = free_.back();
    free_.pop_back();
    return index;
  }
  void Free(uint32_t index) { free_.push_back(index); }
  // Send `index`'s bounce slot (header, then payload).
  uint8_t* Slot(uint32_t index) { return bounce_.data() + index * slot_bytes_; }
  // The next ack slot of the ring (its number, for the wr_id) and where it is.
  uint32_t NextControlSlot() { return control_next_++ % kControlSlots; }
  uint8_t* ControlSlot(uint32_t slot) {
    return bounce_.data() + slot_bytes_ * slots_ + slot * wire::kHeaderBytes;
  }

  // ---- READs ----
  // A free Read slot (a new one when none is free), reset.
  uint32_t TakeRead();
  void FreeRead(uint32_t index) {
    reads_[index].used = false;
    reads_free_.push_back(index);
  }
  Read& read(uint32_t index) { return reads_[index]; }
  uint32_t read_count() const { return static_cast<uint32_t>(reads_.size()); }
  std::vector<Read>& reads() { return reads_; }

 private:
  std::vector<TxOp> ops_;
  std::vector<uint32_t> free_;
  uint32_t lent_ = 0;  // Lend() less Unlend()
  PinnedVector<uint8_t> bounce_;
  transport::MemoryRegion* mr_ = nullptr;
  size_t slot_bytes_ = 0;
  uint32_t slots_ = 0;
  uint32_t control_next_ = 0;
  uint32_t inline_max_ = 0;
  uint32_t read_sge_max_ = 1;
  std::vector<Read> reads_;
  std::vector<uint32_t> reads_free_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_TRANSMIT_ENGINE_H_
