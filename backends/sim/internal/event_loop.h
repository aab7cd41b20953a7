// The virtual clock and the one event queue it runs on. Time is the time of
// the last event taken (or what the fabric advanced it to) and never goes
// back; events are taken in (time, sequence) order. The fabric takes them one
// at a time and dispatches them (FabricImpl::Step); every other part only
// schedules. This object is the transport::Clock of every device.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_LOOP_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_LOOP_H_

#include <cstddef>
#include <cstdint>

#include "backends/sim/internal/event.h"
#include "backends/sim/internal/event_queue.h"
#include "transport/transport.h"

namespace softfab::sim::internal {

class EventLoop final : public transport::Clock {
 public:
  using Entry = EventQueue<Ev>::Entry;

  uint64_t NowNs() const override { return now_ns_; }
  uint64_t now() const { return now_ns_; }

  bool empty() const { return queue_.empty(); }
  size_t pending() const { return queue_.size(); }
  size_t pending_max() const { return queue_.size_max(); }  // high-water mark
  // The time of the earliest pending event; the queue must not be empty.
  uint64_t TopTime() const { return queue_.TopTime(); }
  uint64_t next_event_ns() const {
    return queue_.empty() ? UINT64_MAX : queue_.TopTime();
  }
  // The sequence number the next scheduled event will get.
  uint64_t next_seq() const { return queue_.next_seq(); }

  // Schedules `ev` at t_ns. An event in the past runs at once, in order, and
  // leaves the clock where it is.
  void Schedule(uint64_t t_ns, const Ev& ev) {
    queue_.Push(t_ns, ev, StreamOf(ev.kind));
  }
  // Takes the earliest event (the queue must not be empty) and moves the
  // clock to its time.
  Entry Take() {
    const Entry entry = queue_.Pop();
    if (entry.time_ns > now_ns_) now_ns_ = entry.time_ns;
    return entry;
  }
  // What the earliest event is; the queue must not be empty.
  const Ev& TopPayload() const { return queue_.TopPayload(); }
  // Takes the earliest event without moving the clock: one that is not to
  // run (FabricImpl::SettleTimers).
  Entry Discard() { return queue_.Pop(); }
  // Moves the clock to t_ns if that is later (RunUntil with nothing left).
  void AdvanceTo(uint64_t t_ns) {
    if (t_ns > now_ns_) now_ns_ = t_ns;
  }

 private:
  // The queue's stream for an event: packets on the wire (one latency per
  // link, mostly one for all), ACK timers (now plus the QP's timeout) and RNR
  // timers are each nearly monotone in time; the rest are few.
  static int StreamOf(EvKind kind) {
    switch (kind) {
      case EvKind::kPacket:
        return 0;
      case EvKind::kAckTimer:
        return 1;
      case EvKind::kRnrTimer:
        return 2;
      case EvKind::kUdSendDone:
        return 3;
      default:
        return EventQueue<Ev>::kNoStream;
    }
  }
  static_assert(EventQueue<Ev>::kStreams == 4);

  uint64_t now_ns_ = 0;
  EventQueue<Ev> queue_;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_LOOP_H_
