// The messaging core's completion queue (fi_cq): successful entries in one
// bounded ring, error entries in another, both in completion order.
//
// Space is reserved when an operation that will complete is posted (Reserve),
// so a completion can never be lost to a full queue: a post that finds no room
// fails with EAGAIN instead, and reading entries makes room. Entries are kept
// in the richest format (tagged); readers copy out the fields their format has.
//
// Progress is manual: reading a queue first runs the progress of every
// endpoint bound to it (core/progress_source.h; endpoints register when they
// bind), which polls the transport and may add entries. Not thread-safe.
#ifndef SOFTFAB_CORE_COMPLETION_QUEUE_H_
#define SOFTFAB_CORE_COMPLETION_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/progress_source.h"
#include "core/prov_errno.h"
#include "transport/status.h"

namespace softfab::core {

struct CqEntry {
  void* op_context = nullptr;
  uint64_t flags = 0;
  size_t len = 0;
  void* buf = nullptr;
  uint64_t data = 0;
  uint64_t tag = 0;
  uint64_t src_addr = ~uint64_t{0};  // For readfrom; ~0 = not available.
};

struct CqErrEntry {
  void* op_context = nullptr;
  uint64_t flags = 0;
  size_t len = 0;
  void* buf = nullptr;
  uint64_t data = 0;
  uint64_t tag = 0;
  size_t olen = 0;  // Bytes that did not fit (FI_ETRUNC).
  int err = 0;      // Positive error number (FI_E*).
  // Its cause (core/prov_errno.h). PushError fills in the one `err` implies
  // when the writer left it 0.
  int prov_errno = 0;
  uint64_t src_addr = ~uint64_t{0};
};

class CompletionQueue {
 public:
  explicit CompletionQueue(size_t size);

  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  size_t size() const { return ring_.size(); }

  // Claims room for one future entry (success or error). EAGAIN when every
  // slot is taken or promised, or when fewer than `keep_free` would stay
  // unpromised after this one (for a post whose completion needs another
  // post to the same queue first).
  Status Reserve(size_t keep_free = 0);
  // Operations that may write entries no one reserved (a multi-recv
  // buffer's per-message entries) register while they are posted; Reserve
  // then keeps one slot free for them.
  void AddUnreservedWriter() { ++unreserved_writers_; }
  // Takes one slot of room for an entry written later (a multi-recv
  // buffer's message still being read into it, taken because the CQ had
  // room): false, and nothing taken, when there is none.
  bool Claim() {
    if (room() == 0) return false;
    ++reserved_;
    return true;
  }
  void RemoveUnreservedWriter() { --unreserved_writers_; }
  // Gives back a promise that will not be used (the operation was cancelled
  // without an entry, or completed silently).
  void Unreserve();
  // The last Reserve was refused (an endpoint whose unsignaled sends hold
  // reservations retires them then: Endpoint::KickWanted).
  bool refused() const { return refused_; }

  // Writes an entry; consumes a reservation if `reserved`, otherwise needs
  // free room (false when there is none: the caller must not lose the entry,
  // so it must only write unreserved entries it can afford to count as lost).
  bool Push(const CqEntry& entry, bool reserved);
  bool PushError(const CqErrEntry& entry, bool reserved);

  // fi_cq_read semantics: copies up to `count` entries out (oldest first)
  // after running progress. Returns the number copied, or EAGAIN when none is
  // ready, or EIO-like "error available" (kErrAvail) when the oldest pending
  // completion is an error (read it with ReadError).
  static constexpr int kErrAvail = 259;  // FI_EAVAIL
  int Read(CqEntry* out, size_t count, uint64_t* src = nullptr);
  // Read's semantics, handing each entry to `take(i, entry)` straight from
  // the ring (the API writes it in the application's format, with no copy
  // in between).
  template <typename Take>
  int ReadWith(size_t count, Take&& take) {
    Progress();
    const bool error_pending = error_head_ < errors_.size();
    const uint64_t first_error = error_pending ? error_seq_[error_head_] : 0;
    size_t n = 0;
    while (n < count && count_ > 0) {
      if (error_pending && ring_seq_[head_] > first_error) break;
      take(n, ring_[head_]);
      if (++head_ == ring_.size()) head_ = 0;
      --count_;
      ++n;
    }
    if (n > 0) return static_cast<int>(n);
    return error_pending ? -kErrAvail : -EAGAIN;
  }
  // Copies the oldest error entry out and removes it; EAGAIN if none.
  Status ReadError(CqErrEntry* out);

  // Room for one more unreserved entry.
  bool HasRoom() const { return room() > 0; }
  // Unreserved entries that fit now.
  size_t room() const {
    const size_t used = count_ + (errors_.size() - error_head_) + reserved_;
    return used < ring_.size() ? ring_.size() - used : 0;
  }
  bool has_error() const { return error_head_ < errors_.size(); }
  size_t pending() const { return count_; }

  // The endpoints bound to it, whose progress reads run (binding order).
  ProgressSources<>& progress_sources() { return progress_sources_; }
  // Runs every bound endpoint's progress once (what a read does first).
  void Progress() { progress_sources_.Run(); }
  void BeforeSleep() { progress_sources_.BeforeSleep(); }

 private:
  std::vector<CqEntry> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<CqErrEntry> errors_;  // FIFO, bounded by the same reservations.
  size_t error_head_ = 0;
  size_t reserved_ = 0;
  bool refused_ = false;
  size_t unreserved_writers_ = 0;  // See AddUnreservedWriter.
  // Error entries interleave with successes; this sequence keeps fi_cq_read
  // from returning successes that completed after a pending error.
  std::vector<uint64_t> ring_seq_;
  std::vector<uint64_t> error_seq_;
  uint64_t next_seq_ = 0;
  ProgressSources<> progress_sources_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_COMPLETION_QUEUE_H_
