// The event loop and the virtual clock: Step pops the next event (time,
// sequence) and dispatches it, RunUntil / RunUntilIdle drive time explicitly,
// and every event is folded into the digest and the trace ring.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

bool FabricImpl::Step() {
  if (queue_.empty()) return false;
  const auto entry = queue_.Pop();
  if (entry.time_ns > now_ns_) now_ns_ = entry.time_ns;
  ++stats_.events;
  Fold(entry.time_ns);
  Fold(entry.seq);
  Dispatch(entry.payload);
  return true;
}

uint64_t FabricImpl::RunUntil(uint64_t t_ns) {
  uint64_t n = 0;
  while (!queue_.empty() && queue_.TopTime() <= t_ns) {
    Step();
    ++n;
  }
  if (t_ns > now_ns_) now_ns_ = t_ns;
  return n;
}

uint64_t FabricImpl::RunUntilIdle(uint64_t events_max) {
  uint64_t n = 0;
  while (n < events_max && Step()) ++n;
  return n;
}

std::vector<TraceRecord> FabricImpl::Trace() const {
  std::vector<TraceRecord> out;
  if (trace_.empty()) return out;
  const uint64_t count = std::min<uint64_t>(trace_next_, trace_.size());
  for (uint64_t i = trace_next_ - count; i < trace_next_; ++i) {
    out.push_back(trace_[i % trace_.size()]);
  }
  return out;
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
    case EvKind::kUdSendDone: {
      QpImpl* qp = dev(ev.src_node)->QpByNum(ev.src_qpn);
      if (qp == nullptr) return;
      SendWqe* w = qp->sq_.Find(ev.wqe_seq);
      if (w == nullptr) return;
      w->done = true;
      qp->Retire();
      return;
    }
    case EvKind::kTimedFault:
      Record(TraceKind::kTimedFault, ev, 0);
      OnTimedFault(config_.faults.timed_faults[ev.aux]);
      return;
    case EvKind::kWakeup:
      return;
  }
}

}  // namespace softfab::sim::internal
