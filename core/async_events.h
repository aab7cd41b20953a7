// The asynchronous events of one device (ibv_get_async_event), read on behalf
// of every endpoint on it and handed to the endpoints they concern.
//
// A device has one queue of async events however many endpoints use it (and
// on a simulated fabric several domains of a process share one node's
// device), so one dispatcher serves them all: the API makes one per device,
// hands it to each endpoint in EndpointAttr::async_events, and keeps it until
// the last endpoint on it is gone. Endpoints join when created and leave when
// destroyed, in that order (events are handed out in joining order).
//
// When events are read. Endpoint progress calls Poll(). Where the device
// tells cheaply whether an event is pending (Device::AsyncEventPending: a
// simulated fabric, in-process or shared through its daemon), Poll reads
// exactly when one is, so an event is handled at the first progress after it
// was raised, at the same point of every run (reading changes nothing in the
// simulator). A fixed interval of virtual time would not do there: time only
// moves with the fabric's events, and on an idle fabric a wait jumps straight
// to its deadline. Where it cannot tell (a real device: a read is a system
// call), Poll reads at most once per kPollIntervalNs of the device's clock,
// and the waits of the API wake every few milliseconds to run progress. A
// connection that fails reads at once (PollNow), since the event that
// explains the failure may be waiting. So an event reaches its endpoints
// within milliseconds while the program drives progress (reads a CQ or an
// EQ, or waits in sf_cq_sread), well inside the bound the API promises (one
// second or the RC retry time, whichever is longer).
//
// What each event does (the endpoint's side is Endpoint::OnAsyncEvent):
// - QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, PATH_MIG_ERR: to the endpoint owning
//   the QP. An RC connection's peer fails (kProvQpFatal); the CM's datagram
//   QP failing breaks the endpoint (no connection can be made any more).
// - CQ_ERR (an endpoint's CQ), SRQ_ERR (its SRQ): that endpoint breaks.
// - DEVICE_FATAL: every endpoint breaks. A broken endpoint fails every peer
//   with the cause and refuses every later post (EIO, naming it).
// - PORT_ERR: the port is down. Every endpoint with an event queue gets an
//   error event (ENETDOWN, kProvPortDown). Nothing is refused: a link that
//   comes back within the RC retry budget loses nothing. A connection that
//   fails for want of answers while the port is down, or within an RC retry
//   time of its coming back, names kProvPortDown instead of its retries.
// - PORT_ACTIVE: the port is up again; no event (libfabric has none for it).
// - LID_CHANGE, GID_CHANGE: endpoints whose name no longer matches the port
//   get an error event (EADDRNOTAVAIL, kProvAddressChanged).
// - The rest (PKEY_CHANGE, SM_CHANGE, CLIENT_REREGISTER, COMM_EST,
//   SQ_DRAINED, PATH_MIG, SRQ_LIMIT_REACHED, QP_LAST_WQE_REACHED) are counted
//   and change nothing.
// Not thread-safe: used from the endpoints' progress, which the owner
// serialises.
#ifndef SOFTFAB_CORE_ASYNC_EVENTS_H_
#define SOFTFAB_CORE_ASYNC_EVENTS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "transport/transport.h"

namespace softfab::core {

class Endpoint;

class AsyncEventDispatcher {
 public:
  // The device clock's time between two reads from Poll().
  static constexpr uint64_t kPollIntervalNs = 1'000'000;
  // Events handled by one read at most (the rest wait for the next one).
  static constexpr int kEventsPerReadMax = 64;

  // `device` must outlive the dispatcher's use (its endpoints).
  explicit AsyncEventDispatcher(transport::Device* device) : device_(device) {}
  AsyncEventDispatcher(const AsyncEventDispatcher&) = delete;
  AsyncEventDispatcher& operator=(const AsyncEventDispatcher&) = delete;

  transport::Device* device() const { return device_; }

  // An endpoint on this device starts / stops taking events. Leave is a
  // no-op for one that never joined.
  void Join(Endpoint* endpoint);
  void Leave(Endpoint* endpoint);

  // Polls between two looks at the clock, where the device cannot say.
  static constexpr uint32_t kPollsPerClockLook = 64;

  // Reads and hands out the pending events: when the device says one is
  // pending, or, where it cannot say, when kPollIntervalNs of the device's
  // clock has passed since the last read, looked at once in
  // kPollsPerClockLook calls (every endpoint's progress makes one, and a
  // clock read is a system call where the kernel gives no vDSO clock, as in
  // the rxe VM: one per progress made every poll of a busy loop one).
  void Poll() {
    const std::optional<bool> pending = device_->AsyncEventPending();
    if (pending.has_value()) {
      if (*pending) PollNow();
      return;
    }
    if (++polls_since_look_ < kPollsPerClockLook) return;
    polls_since_look_ = 0;
    if (device_->clock().NowNs() >= next_read_ns_) PollNow();
  }
  // Reads and hands out the pending events now.
  void PollNow();

  // The port's state as the events told it (up until a PORT_ERR).
  bool port_down() const { return port_down_; }
  // The port is down at `now_ns`, or came up less than `window_ns` before.
  bool PortDownWithin(uint64_t now_ns, uint64_t window_ns) const {
    return port_down_ || (port_up_ns_ != 0 && now_ns - port_up_ns_ < window_ns);
  }
  bool device_fatal() const { return device_fatal_; }

  // Events read, by what they did.
  struct Stats {
    uint64_t read = 0;
    uint64_t qp_errors = 0;     // QP_FATAL and its kin, for a QP found.
    uint64_t queue_errors = 0;  // CQ_ERR, SRQ_ERR for an endpoint's queue.
    uint64_t port_down = 0;
    uint64_t port_active = 0;
    uint64_t address_changes = 0;  // LID_CHANGE, GID_CHANGE.
    uint64_t device_fatal = 0;
    // Informational ones, and those naming an object no endpoint owns.
    uint64_t ignored = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  void Dispatch(const transport::AsyncEvent& event);

  transport::Device* device_;
  std::vector<Endpoint*> endpoints_;  // In joining order.
  uint64_t next_read_ns_ = 0;
  uint32_t polls_since_look_ = 0;
  bool reading_ = false;  // Inside PollNow.
  bool port_down_ = false;
  uint64_t port_up_ns_ = 0;  // When PORT_ACTIVE ended a down (0: never).
  bool device_fatal_ = false;
  Stats stats_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_ASYNC_EVENTS_H_
