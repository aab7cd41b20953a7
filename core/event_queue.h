// The messaging core's event queue (fi_eq): connection events of FI_EP_MSG
// endpoints and their listeners, in the order they happened, errors included.
//
// Progress is manual, as for completion queues: reading the queue first runs
// the progress of every endpoint (and listener) bound to it
// (core/progress_source.h). Not thread-safe.
#ifndef SOFTFAB_CORE_EVENT_QUEUE_H_
#define SOFTFAB_CORE_EVENT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/progress_source.h"
#include "core/wire.h"
#include "transport/status.h"

namespace softfab::core {

// A connection request as the listener received it; an accepting endpoint is
// created from it (fi_info's handle).
class EventQueue;

struct ConnRequest {
  wire::CmMessage request;
  // Accepted or rejected already (one decision per request).
  mutable bool decided = false;
  // The handle peeks of this request's event hand out, and the queue that
  // holds it (EventQueue::PeekHandle); null when there is none.
  mutable EventQueue* peek_queue = nullptr;
  mutable const void* peek_handle = nullptr;
};

// Event numbers are libfabric's.
enum EqEventType : uint32_t {
  kEqConnReq = 1,    // FI_CONNREQ (to a listener)
  kEqConnected = 2,  // FI_CONNECTED
  kEqShutdown = 3,   // FI_SHUTDOWN
};

struct EqEvent {
  uint32_t type = 0;
  void* fid = nullptr;  // The endpoint's or listener's user handle.
  std::shared_ptr<const ConnRequest> info;  // kEqConnReq only.
  std::vector<uint8_t> data;                // Connection private data.
  int err = 0;         // Non-zero: an error event (fi_eq_readerr),
  int prov_errno = 0;  // and its cause (core/prov_errno.h).
};

class EventQueue {
 public:
  explicit EventQueue(size_t size) : size_(size) {}
  // Releases the peek handles still held (see PeekHandle).
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  size_t size() const { return size_; }
  // Bound endpoints and listeners, progressed by reads in binding order.
  ProgressSources<>& progress_sources() { return progress_sources_; }
  size_t bound() const { return progress_sources_.size(); }

  // Appends an event. Connection events are few (one or two per connection),
  // so a full queue drops the oldest non-error one and counts it.
  void Push(EqEvent event);

  // Runs progress, then: the head event (removed unless `peek`), or EAGAIN
  // when there is none, or kErrAvail when the head is an error.
  static constexpr int kErrAvail = 259;  // FI_EAVAIL
  StatusOr<const EqEvent*> Read(bool peek);
  // Removes and returns the head error event; EAGAIN if the head is not one.
  StatusOr<EqEvent> ReadError();
  // The handle (the API's sf_info) that peeks of `request`'s event hand out:
  // made by `make` on the first peek, the same one on every later peek, and
  // owned by this queue: it lives until ReleasePeekHandle gives it back or
  // the queue is destroyed, whichever comes first, so a caller that peeks
  // without freeing leaks nothing and one that frees is not refused. (A
  // consuming read's handle is the caller's alone.)
  const void* PeekHandle(const std::shared_ptr<const ConnRequest>& request,
                         const std::function<std::shared_ptr<void>()>& make);
  // Destroys `handle` if it is `request`'s peek handle, and returns whether
  // it was; false: the handle is not one of ours.
  static bool ReleasePeekHandle(const ConnRequest& request, const void* handle);
  void Progress() { progress_sources_.Run(); }
  void BeforeSleep() { progress_sources_.BeforeSleep(); }
  bool empty() const { return events_.empty(); }
  bool full() const { return events_.size() >= size_; }
  // Drops the events of an object that is going away (their fid would
  // dangle).
  void Purge(void* fid);
  uint64_t dropped() const { return dropped_; }

 private:
  size_t size_;
  std::deque<EqEvent> events_;
  EqEvent last_;  // What Read returned last (valid until the next read).
  ProgressSources<> progress_sources_;
  uint64_t dropped_ = 0;
  // Peek handles held, with their requests (kept alive meanwhile); few: one
  // per connection request peeked and not freed.
  std::vector<
      std::pair<std::shared_ptr<const ConnRequest>, std::shared_ptr<void>>>
      peek_handles_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_EVENT_QUEUE_H_
