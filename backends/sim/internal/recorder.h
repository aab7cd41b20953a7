// What a run leaves behind to compare and to read, none of which decides
// anything the fabric does: the digest that every event is folded into
// (SimFabric::digest), the ring of the last trace_capacity trace records
// (SimFabric::Trace) and the counters (SimFabric::stats). The event loop folds
// every event it takes; the parts record what they do to packets and count
// it. Nothing reads them back inside the fabric.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_RECORDER_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_RECORDER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/sim/internal/event.h"
#include "backends/sim/sim_fabric.h"

namespace softfab::sim::internal {

class Recorder {
 public:
  explicit Recorder(size_t trace_capacity) : trace_(trace_capacity) {}

  uint64_t digest() const { return digest_; }
  // The counters. event_queue_max is the event loop's to fill in, and
  // polls_held / hold_releases the time hold's (FabricImpl::stats).
  SimStats& stats() { return stats_; }
  const SimStats& stats() const { return stats_; }

  void Fold(uint64_t v) {
    digest_ ^= v;
    digest_ *= 0x9e3779b97f4a7c15ull;
    digest_ ^= digest_ >> 29;
  }
  // Folds what `ev` is into the digest and, when tracing, keeps a record of
  // it at now_ns (`seq`: the event's sequence number, or the one a dropped
  // packet would have had, or 0).
  void Record(TraceKind kind, const Ev& ev, uint64_t seq, uint64_t now_ns) {
    Fold(static_cast<uint64_t>(kind) | (static_cast<uint64_t>(ev.op) << 8) |
         (static_cast<uint64_t>(ev.flags) << 16) |
         (static_cast<uint64_t>(ev.syndrome) << 24) |
         (static_cast<uint64_t>(ev.psn) << 32));
    Fold((static_cast<uint64_t>(ev.dst_qpn) << 32) | ev.src_qpn);
    Fold((static_cast<uint64_t>(static_cast<uint32_t>(ev.dst_node)) << 32) |
         static_cast<uint32_t>(ev.src_node));
    Fold(ev.length ^ (ev.offset << 20));
    if (trace_.empty()) return;
    trace_[trace_next_ % trace_.size()] =
        TraceRecord{now_ns,      seq,        kind,  static_cast<uint8_t>(ev.op),
                    ev.dst_node, ev.dst_qpn, ev.psn};
    ++trace_next_;
  }
  // The kept records, oldest first.
  std::vector<TraceRecord> Trace() const {
    std::vector<TraceRecord> out;
    if (trace_.empty()) return out;
    const uint64_t count = std::min<uint64_t>(trace_next_, trace_.size());
    for (uint64_t i = trace_next_ - count; i < trace_next_; ++i) {
      out.push_back(trace_[i % trace_.size()]);
    }
    return out;
  }

 private:
  uint64_t digest_ = 0x736f667466616221ull;
  std::vector<TraceRecord> trace_;  // a ring; trace_next_ counts every record
  uint64_t trace_next_ = 0;
  SimStats stats_;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_RECORDER_H_
