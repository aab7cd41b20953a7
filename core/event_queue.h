// The messaging core's event queue (fi_eq): connection events of FI_EP_MSG
// endpoints and their listeners, in the order they happened, errors included.
//
// Progress is manual, as for completion queues: reading the queue first runs
// the progress of every endpoint (and listener) bound to it. Not thread-safe.
#ifndef SOFTFAB_CORE_EVENT_QUEUE_H_
#define SOFTFAB_CORE_EVENT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/wire.h"

namespace softfab::core {

class Endpoint;

// A connection request as the listener received it; an accepting endpoint is
// created from it (fi_info's handle).
struct ConnRequest {
  wire::CmMessage request;
  // Accepted or rejected already (one decision per request).
  mutable bool decided = false;
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
  int err = 0;  // Non-zero: an error event (fi_eq_readerr).
};

class EventQueue {
 public:
  explicit EventQueue(size_t size) : size_(size) {}
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  size_t size() const { return size_; }
  // Bound endpoints, progressed by reads in binding order.
  void Add(Endpoint* ep);
  void Remove(Endpoint* ep);
  size_t bound() const { return endpoints_.size(); }

  // Appends an event. Connection events are few (one or two per connection),
  // so a full queue drops the oldest non-error one and counts it.
  void Push(EqEvent event);

  // Runs progress, then: the head event (removed unless `peek`), or EAGAIN
  // when there is none, or kErrAvail when the head is an error.
  static constexpr int kErrAvail = 259;  // FI_EAVAIL
  StatusOr<const EqEvent*> Read(bool peek);
  // Removes and returns the head error event; EAGAIN if the head is not one.
  StatusOr<EqEvent> ReadError();
  void Progress();
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
  std::vector<Endpoint*> endpoints_;
  uint64_t dropped_ = 0;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_EVENT_QUEUE_H_
