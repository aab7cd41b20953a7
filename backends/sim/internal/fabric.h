// The fabric: owner of the virtual clock, the event queue, the links, the fault
// plan and the devices (every object is reached from it by index, never by a
// global). Its methods are defined by part: sim_fabric.cc (construction),
// sim_event_loop.cc (Step, Dispatch), sim_links_faults.cc (Transmit, timed
// faults), sim_wire.cc (packet arrival, UD), sim_responder.cc (OnRequest),
// sim_completer.cc (OnResponse, timers), sim_cq.cc (Completed); the time hold
// (RunForCq and its helpers) is here, inline, because every poll runs it.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_FABRIC_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_FABRIC_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/sim/internal/common.h"
#include "backends/sim/internal/cq.h"
#include "backends/sim/internal/device.h"
#include "backends/sim/internal/event.h"
#include "backends/sim/internal/event_queue.h"
#include "backends/sim/internal/link.h"
#include "backends/sim/internal/packet_tap.h"
#include "backends/sim/internal/personality.h"
#include "backends/sim/internal/rng.h"
#include "backends/sim/sim_fabric.h"

namespace softfab::sim::internal {

// One node: its HCA and the state of its port.
struct Node {
  std::unique_ptr<DeviceImpl> device;
  uint64_t port_free_ns = 0;
  bool port_down = false;
  uint64_t stall_until_ns = 0;
};

// A UD payload in flight (pooled; `refs` counts its copies on the wire).
struct UdBuffer {
  std::vector<uint8_t> bytes;
  uint32_t refs = 0;
};

class FabricImpl final : public SimFabric, public transport::Clock {
 public:
  explicit FabricImpl(const SimConfig& config);

  int32_t num_devices() const override { return config_.nodes; }
  transport::Device* device(int32_t node) override {
    if (node < 0 || node >= config_.nodes) return nullptr;
    return nodes_[node].device.get();
  }
  const transport::Clock& clock() const override { return *this; }
  uint64_t NowNs() const override { return now_ns_; }
  bool Step() override;
  uint64_t RunUntil(uint64_t t_ns) override;
  uint64_t RunUntilIdle(uint64_t events_max) override;
  uint64_t pending_events() const override { return queue_.size(); }
  uint64_t next_event_ns() const override {
    return queue_.empty() ? UINT64_MAX : queue_.TopTime();
  }
  void SetPollHorizon(uint64_t t_ns) override { poll_horizon_ns_ = t_ns; }
  uint64_t poll_horizon_ns() const override { return poll_horizon_ns_; }
  uint64_t digest() const override { return digest_; }
  SimStats stats() const override {
    SimStats s = stats_;
    s.event_queue_max = queue_.size_max();
    return s;
  }
  std::vector<TraceRecord> Trace() const override;

  // A wakeup event for `node` at t_ns (now if t_ns is past): the clock reaches
  // that time and nothing else happens (Device::ScheduleWakeup).
  void ScheduleWakeup(int32_t node, uint64_t t_ns) {
    if (doorbells_held_) {
      held_wakeups_.push_back({node, t_ns});
      return;
    }
    Ev ev{};
    ev.kind = EvKind::kWakeup;
    ev.src_node = node;
    queue_.Push(std::max(t_ns, now_ns_), ev);
  }

  // Runs events until `cq` has a completion, nothing is pending, the poll
  // bound is hit, the next event lies past the poll horizon, or the time
  // hold stops it: events at the current time run freely, but an event later
  // than now runs only if no watched CQ holds unread completions. If one
  // does, the poll is held (returns with the clock unchanged) unless `cq` was
  // already held in this read epoch (no completion has been read anywhere
  // since): then a full round of polls has passed without the holding CQs
  // being read, so their owners are not reading them; they are released
  // (unwatched until polled again) and time moves on.
  // Always inlined into CqImpl::Poll, its one caller, which runs it on every
  // empty poll (bench/instructions_per_message.sh counts it).
  [[gnu::always_inline]] void RunForCq(CqImpl* cq) {
    for (uint32_t i = 0; i < config_.poll_events_max && cq->empty(); ++i) {
      if (queue_.empty()) return;
      if ((!holding_.empty() || poll_horizon_ns_ != UINT64_MAX) &&
          queue_.TopTime() > now_ns_) {
        if (queue_.TopTime() > poll_horizon_ns_) return;
        if (!holding_.empty()) {
          if (cq->held_epoch_ != read_epoch_) {
            cq->held_epoch_ = read_epoch_;
            ++stats_.polls_held;
            return;
          }
          ReleaseHold();
        }
      }
      Step();
    }
  }

  // Poll() on `cq` with room for entries: it is watched from now on.
  void Watch(CqImpl* cq) {
    if (cq->watched_) return;
    cq->watched_ = true;
    if (!cq->empty()) AddHolding(cq);
  }
  // A Poll() returned completions from `cq`.
  void ReadFrom(CqImpl* cq) {
    ++read_epoch_;
    if (cq->empty() && cq->holding_pos_ >= 0) RemoveHolding(cq);
  }
  void AddHolding(CqImpl* cq) {
    cq->holding_pos_ = static_cast<int32_t>(holding_.size());
    holding_.push_back(cq);
  }
  void RemoveHolding(CqImpl* cq) {
    const int32_t pos = cq->holding_pos_;
    holding_[pos] = holding_.back();
    holding_[pos]->holding_pos_ = pos;
    holding_.pop_back();
    cq->holding_pos_ = -1;
  }
  // Every holding CQ was skipped for a full round of polls: unwatch them.
  void ReleaseHold() {
    for (CqImpl* cq : holding_) {
      cq->watched_ = false;
      cq->holding_pos_ = -1;
    }
    holding_.clear();
    ++read_epoch_;
    ++stats_.hold_releases;
  }

  const SimConfig& config() const { return config_; }
  const Quirks& quirks() const { return quirks_; }
  DeviceImpl* dev(int32_t node) { return nodes_[node].device.get(); }
  Node& node(int32_t n) { return nodes_[n]; }
  uint64_t now() const { return now_ns_; }
  SimStats& mutable_stats() { return stats_; }

  const Link& LinkFor(int32_t a, int32_t b) const {
    const int32_t idx = link_index_[static_cast<size_t>(a) * config_.nodes + b];
    return idx < 0 ? default_link_ : links_[idx];
  }
  Link& MutableLinkFor(int32_t a, int32_t b) {
    const int32_t idx = link_index_[static_cast<size_t>(a) * config_.nodes + b];
    return idx < 0 ? default_link_ : links_[idx];
  }
  uint32_t PathMtu(int32_t a, int32_t b) const {
    if (a < 0 || b < 0) return 256;
    return std::min(LinkFor(a, b).mtu_bytes,
                    transport::MtuBytes(config_.active_mtu));
  }

  // Puts a packet on the wire from node `src` at the current time.
  void Transmit(Ev pkt, uint32_t payload_bytes);
  void Schedule(uint64_t t, const Ev& ev) { queue_.Push(t, ev); }
  void ScheduleQpTimer(EvKind kind, int32_t node, uint32_t qpn, uint64_t t,
                       uint32_t psn) {
    Ev ev{};
    ev.kind = kind;
    ev.dst_node = node;
    ev.dst_qpn = qpn;
    ev.psn = psn;
    queue_.Push(t, ev);
  }
  // Adds `wc` to `cq` (from `qp`, or null), first raising the channel event of
  // an armed CQ. `pkt`: the packet that produced a receive completion, or null
  // (send completions, flushes). As rxe_cq_post's `solicited` argument, the
  // completion counts for a CQ armed with RequestNotify(true) if that packet
  // has the SE bit; it is read only for an armed CQ.
  void Completed(CqImpl* cq, const WorkCompletion& wc, QpImpl* qp,
                 const Ev* pkt);

  uint8_t* staging() { return staging_.data(); }
  // Shared by processes: the held doorbells (QpImpl::Pump) and wakeups.
  void HoldDoorbells(bool hold) override;
  bool doorbells_held() const { return doorbells_held_; }
  void HoldPump(QpImpl* qp) { held_pumps_.push_back(qp); }
  void ForgetHeldPump(const QpImpl* qp);  // the QP is going
  // The observer (SimConfig::observer) hears of memory written.
  void Written(const Sge* sges, uint32_t n, uint64_t offset, uint64_t len);

  // The wire tap (at most one; nullptr detaches). Not owned: the caller
  // detaches it before destroying it.
  PacketTap* tap() const { return tap_; }
  void SetTap(PacketTap* tap) { tap_ = tap; }

  // UD payload pool.
  uint32_t UdAlloc(uint64_t bytes);
  UdBuffer& Ud(uint32_t slot) { return ud_pool_[slot]; }
  void UdRelease(uint32_t slot) {
    if (--ud_pool_[slot].refs == 0) ud_free_.push_back(slot);
  }

 private:
  void Dispatch(const Ev& ev);
  void OnPacket(const Ev& ev);
  void OnRequest(QpImpl* qp, const Ev& ev);
  void OnResponse(QpImpl* qp, const Ev& ev);
  void OnUd(QpImpl* qp, const Ev& ev);
  void OnAckTimer(const Ev& ev);
  void OnRnrTimer(const Ev& ev);
  void OnTimedFault(const TimedFault& f);
  void SendAck(QpImpl* qp, Syndrome syn, uint32_t psn, uint32_t aux);
  void SendReadResponses(QpImpl* qp, const Ev& req);
  void PlaceBytes(const Sge* sges, uint32_t n, uint64_t offset,
                  const uint8_t* src, uint64_t len, bool src_private);
  void Fold(uint64_t v) {
    digest_ ^= v;
    digest_ *= 0x9e3779b97f4a7c15ull;
    digest_ ^= digest_ >> 29;
  }
  void Record(TraceKind kind, const Ev& ev, uint64_t seq) {
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
        TraceRecord{now_ns_,     seq,        kind,  static_cast<uint8_t>(ev.op),
                    ev.dst_node, ev.dst_qpn, ev.psn};
    ++trace_next_;
  }

  SimConfig config_;
  Quirks quirks_;  // of config_.personality
  uint64_t now_ns_ = 0;
  uint64_t digest_ = 0x736f667466616221ull;
  internal::EventQueue<Ev> queue_;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  Link default_link_;
  std::vector<int32_t> link_index_;
  std::vector<internal::Rng> fault_rngs_;
  std::vector<uint32_t> fault_counts_;
  std::vector<uint8_t> staging_;
  bool doorbells_held_ = false;
  std::vector<QpImpl*> held_pumps_;
  struct HeldWakeup {
    int32_t node;
    uint64_t t_ns;
  };
  std::vector<HeldWakeup> held_wakeups_;
  std::vector<UdBuffer> ud_pool_;
  std::vector<uint32_t> ud_free_;
  std::vector<TraceRecord> trace_;
  uint64_t trace_next_ = 0;
  SimStats stats_;
  // The time hold: CQs that are watched and not empty (order irrelevant: only
  // membership is ever used), and the read epoch (+1 per Poll that returned
  // completions and per release).
  std::vector<CqImpl*> holding_;
  uint64_t read_epoch_ = 0;
  uint64_t poll_horizon_ns_ = UINT64_MAX;  // SetPollHorizon
  PacketTap* tap_ = nullptr;               // SetTap
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_FABRIC_H_
