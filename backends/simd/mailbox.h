// The mailbox of a node session: one request slot and one reply slot in the
// process's shared window (protocol.h), with sequence numbers and sleep
// flags in its header page. A call is a copy into a slot and a store, read
// by the other side while it spins; only a side that sleeps is rung, with a
// one-byte doorbell on the session's socket (the README's design section).
//
// Each side writes only its own fields and keeps its own counters in private
// memory: a process may scribble on its window, which harms only itself,
// and the daemon copies a request out of the slot once before reading it.
#ifndef SOFTFAB_BACKENDS_SIMD_MAILBOX_H_
#define SOFTFAB_BACKENDS_SIMD_MAILBOX_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/simd/protocol.h"

namespace softfab::simd {

class Mailbox {
 public:
  // Offsets of the fields in the header page (between the clock and the CQ
  // bytes), each a uint32_t.
  static constexpr uint64_t kRequestSeq = 8;
  static constexpr uint64_t kRequestBytes = 12;
  static constexpr uint64_t kReplySeq = 16;
  static constexpr uint64_t kReplyBytes = 20;
  static constexpr uint64_t kReplyTaken = 24;
  static constexpr uint64_t kClientSleeps = 28;
  static constexpr uint64_t kDaemonSleeps = 32;
  static_assert(kDaemonSleeps + 4 <= kAsyncEventFlagOffset &&
                kAsyncEventFlagOffset < kCqFlagsOffset);

  explicit Mailbox(uint8_t* window) : w_(window) {}

  // Client: request number `seq` (one more than the last) into the slot.
  // True when the daemon sleeps and must be rung.
  bool PutRequest(uint32_t seq, const uint8_t* bytes, size_t n) {
    return Put(kRequestArea, kRequestSeq, kRequestBytes, kDaemonSleeps, seq,
               bytes, n);
  }
  // Daemon: reply number `seq`. True when the client sleeps.
  bool PutReply(uint32_t seq, const uint8_t* bytes, size_t n) {
    return Put(kReplyArea, kReplySeq, kReplyBytes, kClientSleeps, seq, bytes,
               n);
  }

  // Daemon: the request after `*seen` copied into `out` (kMessageBytesMax
  // bytes), `*seen` moved on. Its size; 0 when none is waiting; -1 when the
  // size the client wrote is out of bounds (a broken client).
  long TakeRequest(uint32_t* seen, uint8_t* out) const {
    return Take(kRequestArea, kRequestSeq, kRequestBytes, seen, out);
  }
  // Client: the reply after `*seen`, then marks it taken.
  long TakeReply(uint32_t* seen, uint8_t* out) {
    const long n = Take(kReplyArea, kReplySeq, kReplyBytes, seen, out);
    if (n > 0) Store(kReplyTaken, *seen);
    return n;
  }

  bool RequestWaiting(uint32_t seen) const { return Load(kRequestSeq) != seen; }
  bool ReplyWaiting(uint32_t seen) const { return Load(kReplySeq) != seen; }
  // Daemon: whether the client has not yet taken reply `last`.
  bool ReplyUnread(uint32_t last) const { return Load(kReplyTaken) != last; }

  // A side about to sleep sets its flag, then looks once more (the other
  // side stores its number, then reads the flag: one of them sees the other).
  void SetClientSleeps(bool on) { Store(kClientSleeps, on ? 1 : 0); }
  void SetDaemonSleeps(bool on) { Store(kDaemonSleeps, on ? 1 : 0); }

 private:
  uint32_t* Field(uint64_t at) const {
    return reinterpret_cast<uint32_t*>(w_ + at);
  }
  uint32_t Load(uint64_t at) const {
    return __atomic_load_n(Field(at), __ATOMIC_SEQ_CST);
  }
  void Store(uint64_t at, uint32_t v) {
    __atomic_store_n(Field(at), v, __ATOMIC_SEQ_CST);
  }

  bool Put(uint64_t area, uint64_t seq_at, uint64_t bytes_at,
           uint64_t peer_sleeps_at, uint32_t seq, const uint8_t* bytes,
           size_t n) {
    std::memcpy(w_ + area, bytes, n);
    __atomic_store_n(Field(bytes_at), static_cast<uint32_t>(n),
                     __ATOMIC_RELAXED);
    Store(seq_at, seq);
    return Load(peer_sleeps_at) != 0;
  }

  long Take(uint64_t area, uint64_t seq_at, uint64_t bytes_at, uint32_t* seen,
            uint8_t* out) const {
    const uint32_t seq = Load(seq_at);
    if (seq == *seen) return 0;
    const uint32_t n = __atomic_load_n(Field(bytes_at), __ATOMIC_RELAXED);
    if (n == 0 || n > kMessageBytesMax) return -1;
    std::memcpy(out, w_ + area, n);
    *seen = seq;
    return static_cast<long>(n);
  }

  uint8_t* w_;
};

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_MAILBOX_H_
