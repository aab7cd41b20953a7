#include "core/event_queue.h"

#include <algorithm>

#include "core/endpoint.h"

namespace softfab::core {

void EventQueue::Add(Endpoint* ep) {
  if (std::find(endpoints_.begin(), endpoints_.end(), ep) == endpoints_.end()) {
    endpoints_.push_back(ep);
  }
}

void EventQueue::Remove(Endpoint* ep) {
  auto it = std::find(endpoints_.begin(), endpoints_.end(), ep);
  if (it != endpoints_.end()) endpoints_.erase(it);
}

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

void EventQueue::Progress() {
  // Index loop: an endpoint's progress does not bind or unbind endpoints.
  for (size_t i = 0; i < endpoints_.size(); ++i) endpoints_[i]->Progress();
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
