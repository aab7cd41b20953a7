// Running the event loop (internal/event_loop.h): Step takes the next event
// (time, sequence), folds it into the digest and dispatches it to the part it
// is for; RunUntil / RunUntilIdle drive time explicitly.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

bool FabricImpl::Step() {
  if (loop_.empty()) return false;
  const EventLoop::Entry entry = loop_.Take();
  ++recorder_.stats().events;
  recorder_.Fold(entry.time_ns);
  recorder_.Fold(entry.seq);
  Dispatch(entry.payload);
  SettleTimers();  // the front may be a timer disarmed meanwhile
  return true;
}

uint64_t FabricImpl::RunUntil(uint64_t t_ns) {
  uint64_t n = 0;
  while (!loop_.empty() && loop_.TopTime() <= t_ns) {
    Step();
    ++n;
  }
  loop_.AdvanceTo(t_ns);
  return n;
}

uint64_t FabricImpl::RunUntilIdle(uint64_t events_max) {
  uint64_t n = 0;
  while (n < events_max && Step()) ++n;
  return n;
}

void FabricImpl::Dispatch(const Ev& ev) {
  switch (ev.kind) {
    case EvKind::kPacket:
      OnPacket(ev);
      return;
    case EvKind::kAckTimer:
      OnAckTimer(ev);
      return;
    case EvKind::kRnrTimer:
      OnRnrTimer(ev);
      return;
    case EvKind::kUdSendDone:
      OnUdSendDone(ev);
      return;
    case EvKind::kTimedFault:
      recorder_.Record(TraceKind::kTimedFault, ev, 0, now());
      OnTimedFault(config_.faults.timed_faults[ev.aux]);
      return;
    case EvKind::kWakeup:
      return;
  }
}

}  // namespace softfab::sim::internal
