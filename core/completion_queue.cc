#include "core/completion_queue.h"

#include <algorithm>
#include <cassert>

namespace softfab::core {

CompletionQueue::CompletionQueue(size_t size) : ring_(size), ring_seq_(size) {}

Status CompletionQueue::Reserve(size_t keep_free) {
  const size_t errors = errors_.size() - error_head_;
  // While an operation may write unreserved entries, one slot stays
  // unpromised: its next entry can always be written once the application
  // reads what is there (were every slot promised, it would wait for room
  // that only its own progress could free).
  const size_t spare =
      std::max<size_t>(unreserved_writers_ > 0 ? 1 : 0, keep_free);
  if (count_ + errors + reserved_ + spare >= ring_.size()) {
    refused_ = true;
    return TryAgain("completion queue full: read completions, then retry");
  }
  refused_ = false;
  ++reserved_;
  return Status::Ok();
}

void CompletionQueue::Unreserve() {
  assert(reserved_ > 0);
  --reserved_;
}

bool CompletionQueue::Push(const CqEntry& entry, bool reserved) {
  const size_t errors = errors_.size() - error_head_;
  if (reserved) {
    assert(reserved_ > 0);
    --reserved_;
  } else if (count_ + errors + reserved_ >= ring_.size()) {
    return false;
  }
  size_t tail = head_ + count_;
  if (tail >= ring_.size()) tail -= ring_.size();
  ring_[tail] = entry;
  ring_seq_[tail] = next_seq_++;
  ++count_;
  return true;
}

bool CompletionQueue::PushError(const CqErrEntry& entry, bool reserved) {
  const size_t errors = errors_.size() - error_head_;
  if (reserved) {
    assert(reserved_ > 0);
    --reserved_;
  } else if (count_ + errors + reserved_ >= ring_.size()) {
    return false;
  }
  if (error_head_ > 0 && error_head_ == errors_.size()) {
    errors_.clear();
    error_seq_.clear();
    error_head_ = 0;
  }
  errors_.push_back(entry);
  if (entry.prov_errno == 0) {
    errors_.back().prov_errno = ProvErrnoOf(entry.err);
  }
  error_seq_.push_back(next_seq_++);
  return true;
}

int CompletionQueue::Read(CqEntry* out, size_t count, uint64_t* src) {
  return ReadWith(count, [&](size_t i, const CqEntry& e) {
    out[i] = e;
    if (src) src[i] = e.src_addr;
  });
}

Status CompletionQueue::ReadError(CqErrEntry* out) {
  if (error_head_ == errors_.size()) {
    Progress();
    if (error_head_ == errors_.size()) {
      return TryAgain("no error completion is pending");
    }
  }
  *out = errors_[error_head_++];
  return Status::Ok();
}

}  // namespace softfab::core
