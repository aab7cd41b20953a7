// The event queue (fi_eq): events in order, reads and peeks, and the
// handles peeks of connection requests hand out.
#include "core/event_queue.h"

#include <algorithm>

namespace softfab::core {

void EventQueue::Push(EqEvent event) {
  if (events_.size() >= size_) {
    auto it = std::find_if(events_.begin(), events_.end(),
                           [](const EqEvent& e) { return e.err == 0; });
    if (it == events_.end()) {
      ++dropped_;
      return;
    }
    events_.erase(it);
    ++dropped_;
  }
  events_.push_back(std::move(event));
}

void EventQueue::Purge(void* fid) {
  std::erase_if(events_, [fid](const EqEvent& e) { return e.fid == fid; });
}

StatusOr<const EqEvent*> EventQueue::Read(bool peek) {
  Progress();
  if (events_.empty()) return TryAgain("no event is ready");
  if (events_.front().err != 0) {
    return Status(kErrAvail, "an error event is next: read it with readerr");
  }
  if (peek) {
    last_ = events_.front();
  } else {
    last_ = std::move(events_.front());
    events_.pop_front();
  }
  return &last_;
}

EventQueue::~EventQueue() {
  for (auto& [request, handle] : peek_handles_) {
    request->peek_queue = nullptr;
    request->peek_handle = nullptr;
  }
}

const void* EventQueue::PeekHandle(
    const std::shared_ptr<const ConnRequest>& request,
    const std::function<std::shared_ptr<void>()>& make) {
  if (request->peek_handle == nullptr) {
    std::shared_ptr<void> handle = make();
    request->peek_queue = this;
    request->peek_handle = handle.get();
    peek_handles_.emplace_back(request, std::move(handle));
  }
  return request->peek_handle;
}

bool EventQueue::ReleasePeekHandle(const ConnRequest& request,
                                   const void* handle) {
  if (handle == nullptr || request.peek_handle != handle) return false;
  EventQueue* q = request.peek_queue;
  request.peek_queue = nullptr;
  request.peek_handle = nullptr;
  auto& held = q->peek_handles_;
  auto it = std::find_if(held.begin(), held.end(), [handle](const auto& h) {
    return h.second.get() == handle;
  });
  if (it != held.end()) held.erase(it);  // Destroys the handle.
  return true;
}

StatusOr<EqEvent> EventQueue::ReadError() {
  Progress();
  if (events_.empty() || events_.front().err == 0) {
    return TryAgain("no error event is next");
  }
  EqEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

}  // namespace softfab::core
