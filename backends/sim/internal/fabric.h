// The simulated fabric (FabricImpl, the object behind SimFabric): owner of the
// nodes with their HCAs (every object is reached from it by index, never by a
// global) and of the parts that belong to no one HCA, each a class of its
// own: the virtual clock and the event queue (event_loop.h), the links
// (link.h) and the per-packet fault plan (packet_faults.h), the UD payload
// pool (ud_pool.h), the time hold (time_hold.h), and the digest, trace and
// counters (recorder.h). FabricImpl joins them: it takes events and hands
// each to the part it is for (packets, after the arrival checks, to the QP's
// responder or completer, qp.h; timers to the QP), puts packets on the wire,
// adds completions to CQs and applies timed faults. Its methods are defined
// by part: sim_fabric.cc (construction), sim_event_loop.cc (Step, Dispatch),
// sim_links_faults.cc (Transmit, timed faults), sim_wire.cc (packet arrival),
// sim_completer.cc (the timers' events), sim_cq.cc (Completed); RunForCq is
// here, inline, because every poll runs it.
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
#include "backends/sim/internal/event_loop.h"
#include "backends/sim/internal/link.h"
#include "backends/sim/internal/packet_faults.h"
#include "backends/sim/internal/packet_tap.h"
#include "backends/sim/internal/personality.h"
#include "backends/sim/internal/recorder.h"
#include "backends/sim/internal/time_hold.h"
#include "backends/sim/internal/ud_pool.h"
#include "backends/sim/sim_fabric.h"

namespace softfab::sim::internal {

// One node: its HCA and the state of its port.
struct Node {
  std::unique_ptr<DeviceImpl> device;
  uint64_t port_free_ns = 0;    // the port serialises one packet at a time
  bool port_down = false;       // timed fault: port events, packets dropped
  uint64_t stall_until_ns = 0;  // timed fault: no receive is fetched until
};

class FabricImpl final : public SimFabric {
 public:
  explicit FabricImpl(const SimConfig& config);

  // ---- SimFabric (sim_event_loop.cc: Step, RunUntil, RunUntilIdle) ----
  int32_t num_devices() const override { return config_.nodes; }
  transport::Device* device(int32_t node) override {
    if (node < 0 || node >= config_.nodes) return nullptr;
    return nodes_[node].device.get();
  }
  const transport::Clock& clock() const override { return loop_; }
  bool Step() override;
  uint64_t RunUntil(uint64_t t_ns) override;
  uint64_t RunUntilIdle(uint64_t events_max) override;
  uint64_t pending_events() const override { return loop_.pending(); }
  uint64_t next_event_ns() const override { return loop_.next_event_ns(); }
  void SetPollHorizon(uint64_t t_ns) override { hold_.SetHorizon(t_ns); }
  uint64_t poll_horizon_ns() const override { return hold_.horizon_ns(); }
  uint64_t digest() const override { return recorder_.digest(); }
  SimStats stats() const override {
    SimStats s = recorder_.stats();
    s.event_queue_max = loop_.pending_max();
    s.polls_held = hold_.polls_held();
    s.hold_releases = hold_.releases();
    return s;
  }
  std::vector<TraceRecord> Trace() const override { return recorder_.Trace(); }

  // ---- polling under the time hold (CqImpl::Poll) ----
  // Runs events until `cq` has a completion, nothing is pending, the poll
  // bound is hit, the next event lies past the poll horizon, or the time
  // hold stops it: events at the current time run freely, but an event later
  // than now runs only if no watched CQ holds unread completions. If one
  // does, the poll is held (returns with the clock unchanged) unless `cq` was
  // already held in this read epoch (see TimeHold::HoldOrRelease).
  // Always inlined into CqImpl::Poll, its one caller, which runs it on every
  // empty poll (bench/instructions_per_message.sh counts it).
  [[gnu::always_inline]] void RunForCq(CqImpl* cq) {
    for (uint32_t i = 0; i < config_.poll_events_max && cq->empty(); ++i) {
      if (loop_.empty()) return;
      if (hold_.engaged() && loop_.TopTime() > loop_.now()) {
        if (loop_.TopTime() > hold_.horizon_ns()) return;
        if (hold_.holding() && hold_.HoldOrRelease(cq)) return;
      }
      Step();
    }
  }
  TimeHold& hold() { return hold_; }

  // ---- for the HCAs' parts ----
  const SimConfig& config() const { return config_; }
  const Quirks& quirks() const { return quirks_; }
  DeviceImpl* dev(int32_t node) { return nodes_[node].device.get(); }
  Node& node(int32_t n) { return nodes_[n]; }
  uint64_t now() const { return loop_.now(); }
  SimStats& mutable_stats() { return recorder_.stats(); }
  uint32_t PathMtu(int32_t a, int32_t b) const { return links_.PathMtu(a, b); }
  uint32_t PortMtuBytes(int32_t n) const { return links_.PortMtuBytes(n); }
  UdPool& ud_pool() { return ud_pool_; }
  // Scratch for one packet's bytes (GRH + payload up to 4096); contents do not
  // outlive the call that fills them.
  uint8_t* staging() { return staging_.data(); }

  // Shared by processes (SimConfig::shared_by_processes): doorbells and
  // wakeups held between the daemon's advances (SimFabric::HoldDoorbells).
  void HoldDoorbells(bool hold) override;
  void HaltNode(int32_t node) override {
    if (node >= 0 && node < config_.nodes) nodes_[node].port_down = true;
  }
  bool doorbells_held() const { return doorbells_held_; }
  void HoldPump(QpImpl* qp) { held_pumps_.push_back(qp); }
  void ForgetHeldPump(const QpImpl* qp);  // the QP is going
  // The observer (SimConfig::observer) hears of registered memory written.
  // Inline, so a fabric without one pays a test, not a call.
  void Written(const Sge* sges, uint32_t n, uint64_t offset, uint64_t len) {
    if (config_.observer != nullptr) [[unlikely]]
      TellWritten(sges, n, offset, len);
  }
  void TellWritten(const Sge* sges, uint32_t n, uint64_t offset, uint64_t len);

  // A wakeup event for `node` at t_ns (now if t_ns is past): the clock reaches
  // that time and nothing else happens (Device::ScheduleWakeup).
  void ScheduleWakeup(int32_t node, uint64_t t_ns) {
    if (doorbells_held_) [[unlikely]] {
      held_wakeups_.push_back({node, t_ns});
      return;
    }
    Ev ev{};
    ev.kind = EvKind::kWakeup;
    ev.src_node = node;
    loop_.Schedule(std::max(t_ns, loop_.now()), ev);
  }
  void Schedule(uint64_t t, const Ev& ev) { loop_.Schedule(t, ev); }
  // Keeps the front of the event queue a real event: an ACK timer there that
  // was disarmed (everything it guarded acknowledged, the QP in error, reset
  // or destroyed) leaves, and one re-armed for later moves to its deadline,
  // neither moving the clock. Run after every event taken and wherever a
  // QP's timer changes (sim_completer.cc), so a poll with nothing else to run
  // never moves the clock to a timeout that cannot happen (every half round
  // trip of an idle ping-pong did: by the 67 ms default).
  void SettleTimers() {
    if (!loop_.empty() && loop_.TopPayload().kind == EvKind::kAckTimer) {
      SettleTimersAtFront();
    }
  }
  void SettleTimersAtFront();
  // A timer of QP `qpn` (incarnation `incarnation`, QpImpl::incarnation_)
  // on `node`.
  void ScheduleQpTimer(EvKind kind, int32_t node, uint32_t qpn,
                       uint32_t incarnation, uint64_t t, uint32_t psn) {
    Ev ev{};
    ev.kind = kind;
    ev.dst_node = node;
    ev.dst_qpn = qpn;
    ev.aux = incarnation;
    ev.psn = psn;
    loop_.Schedule(t, ev);
  }
  // The QP a timer's or a local completion's event is for: null when it was
  // destroyed (its number free, or given to a later QP).
  QpImpl* TimerQp(int32_t node, uint32_t qpn, uint32_t incarnation);
  // Puts a packet on the wire from node `src` at the current time: the
  // sending port and the link time it, the packet faults act on it
  // (sim_links_faults.cc).
  void Transmit(Ev pkt, uint32_t payload_bytes);
  // Adds `wc` to `cq` (from `qp`, or null), first raising the channel event of
  // an armed CQ. `pkt`: the packet that produced a receive completion, or null
  // (send completions, flushes). As rxe_cq_post's `solicited` argument, the
  // completion counts for a CQ armed with RequestNotify(true) if that packet
  // has the SE bit; it is read only for an armed CQ.
  void Completed(CqImpl* cq, const WorkCompletion& wc, QpImpl* qp,
                 const Ev* pkt);

  // The wire tap (at most one; nullptr detaches). Not owned: the caller
  // detaches it before destroying it.
  PacketTap* tap() const { return tap_; }
  void SetTap(PacketTap* tap) { tap_ = tap; }

 private:
  // Hands an event to the part it is for (sim_event_loop.cc).
  void Dispatch(const Ev& ev);
  // A packet reached its destination port: the checks every packet passes,
  // then the QP's responder or completer (sim_wire.cc).
  void OnPacket(const Ev& ev);
  // An ACK or RNR timer's event: traced, then handed to its QP if it still
  // exists (sim_completer.cc).
  void OnAckTimer(const Ev& ev);
  void OnRnrTimer(const Ev& ev);
  void OnUdSendDone(const Ev& ev);  // sim_requester.cc
  void OnTimedFault(const TimedFault& f);

  SimConfig config_;
  Quirks quirks_;  // of config_.personality
  EventLoop loop_;
  Recorder recorder_;
  std::vector<Node> nodes_;
  LinkTable links_;
  PacketFaults packet_faults_;  // reads config_.faults.packet_faults
  UdPool ud_pool_;
  TimeHold hold_;
  std::vector<uint8_t> staging_;
  PacketTap* tap_ = nullptr;  // SetTap
  // Held between a shared fabric's advances (HoldDoorbells).
  bool doorbells_held_ = false;
  std::vector<QpImpl*> held_pumps_;
  struct HeldWakeup {
    int32_t node;
    uint64_t t_ns;
  };
  std::vector<HeldWakeup> held_wakeups_;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_FABRIC_H_
