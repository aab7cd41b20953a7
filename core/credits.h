// Credits: the flow control between two connected endpoints.
//
// A sender may have at most the granted number of SENDs unconsumed at a peer
// (the receive buffers the peer set aside for it). The receiver returns
// credits by RDMA-writing a running total into a word the sender registered
// and announced in its CM message, so returning credits never consumes a
// receive and the core never provokes RNR. Totals are written back in batches
// of a quarter of the grant. Not thread-safe (the endpoint's owner serialises).
#ifndef SOFTFAB_CORE_CREDITS_H_
#define SOFTFAB_CORE_CREDITS_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/pinned_memory.h"
#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

// One connection's credits, both ways.
struct PeerCredits {
  // Credits we may spend: granted + returned total (written by the peer into
  // our word for it) - sends.
  uint64_t granted = 0;
  uint64_t sends = 0;
  // Credits we granted the peer (our CM messages to it say so): at most the
  // receive buffers we set aside for it (Endpoint::GrantFor); 0 until
  // decided. `grant_held` while it counts against our buffers.
  uint32_t grant_out = 0;
  bool grant_held = false;
  // Credits we owe the peer: buffers of theirs we have consumed and freed.
  uint64_t freed = 0;
  uint64_t freed_written = 0;
  bool write_pending = false;
  // The peer's word for us (from its CM message).
  uint64_t remote_addr = 0;
  uint32_t remote_rkey = 0;
};

// An endpoint's credit words (one per peer, written by that peer), the
// sources its own write-backs are read from, and the peers owed one.
class Credits {
 public:
  // Allocates and registers the words and sources of `peers_max` peers under
  // `pd` (words first).
  [[nodiscard]] Status Register(transport::ProtectionDomain* pd,
                                uint32_t peers_max);
  // Releases both registrations (words first); the memory stays until the
  // object goes.
  void Deregister();

  // What a CM message to `peer` announces: where it writes our credits back.
  uint64_t word_address(uint32_t peer) const {
    return reinterpret_cast<uint64_t>(&words_[peer]);
  }
  uint32_t word_rkey() const { return words_mr_->rkey(); }
  // The grant and write-back address in the peer's CM message.
  static void Grant(PeerCredits& c, const wire::CmMessage& m) {
    c.granted = m.credits;
    c.remote_addr = m.credit_addr;
    c.remote_rkey = m.credit_rkey;
  }

  // Credits left to spend at `peer`.
  uint64_t Available(const PeerCredits& c, uint32_t peer) const {
    // Written by the (simulated or real) HCA on the peer's RDMA WRITE.
    const uint64_t returned = std::atomic_ref<const uint64_t>(words_[peer])
                                  .load(std::memory_order_acquire);
    return c.granted + returned - c.sends;
  }
  // A SEND to the peer was posted.
  static void Spend(PeerCredits& c) { ++c.sends; }
  // One of the peer's buffers is free again; a write-back becomes due once a
  // batch (a quarter of what we granted it) has gathered.
  void Return(PeerCredits& c, uint32_t peer);

  bool writes_due() const { return !due_.empty(); }
  // `peer`'s connection is gone and a new one is about to be made: its word
  // reads 0 again and no write-back to it stays due. Only once the old QP is
  // destroyed, so that no late RDMA WRITE of the old connection lands on the
  // new one's word.
  void Forget(uint32_t peer);
  // Where and how a write-back to a peer is posted.
  struct WriteTarget {
    PeerCredits* credits = nullptr;
    transport::QueuePair* qp = nullptr;  // nullptr: not now.
    uint64_t wr_id = 0;
    bool signaled = true;
  };
  // Writes the running totals of the peers owed one back (RDMA WRITEs, in
  // the order they fell due). For each, `writable(peer)` returns its
  // WriteTarget, with a null QP when the connection cannot take a WRITE now;
  // `written(peer, target)` accounts a posted one. Peers not written stay
  // due.
  template <typename Writable, typename Written>
  void FlushWrites(Writable writable, Written written) {
    size_t kept = 0;
    for (size_t i = 0; i < due_.size(); ++i) {
      const uint32_t peer = due_[i];
      const WriteTarget t = writable(peer);
      if (t.qp == nullptr || !PostWrite(peer, t)) {
        due_[kept++] = peer;
        continue;
      }
      written(peer, t);
    }
    due_.resize(kept);
  }
  // Posts the WRITE of the running total to `peer` (also when none is due:
  // rewriting the same total changes nothing there, and a signaled one
  // retires the unsignaled work before it); false when the QP refused it.
  bool PostWrite(uint32_t peer, const WriteTarget& t);

 private:
  PinnedVector<uint64_t> words_;    // Written by peers.
  PinnedVector<uint64_t> sources_;  // What we write to them.
  transport::MemoryRegion* words_mr_ = nullptr;
  transport::MemoryRegion* sources_mr_ = nullptr;
  std::vector<uint32_t> due_;  // Peers with credits to write back.
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_CREDITS_H_
