// The deterministic simulated fabric: nodes with one HCA/port each, links, a
// fault plan, a virtual clock and one event queue. Hands out transport::Device
// objects.
//
// Same config (including master_seed) and the same sequence of calls -> the
// same events in the same order and the same digest(), in any build mode, on
// any machine. Fabrics share nothing: several may live in one process. A fabric
// and its devices are single-threaded.
#ifndef SOFTFAB_BACKENDS_SIM_SIM_FABRIC_H_
#define SOFTFAB_BACKENDS_SIM_SIM_FABRIC_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::sim {

// A point-to-point path between two nodes (both directions). Pairs without an
// entry use SimConfig::default_link; a node talking to itself uses it too.
struct SimLinkConfig {
  int32_t node_a = 0;
  int32_t node_b = 0;
  uint64_t latency_ns = 1000;
  uint64_t bandwidth_bps =
      100'000'000'000ull;  // bits per second; 0 = unlimited.
  transport::Mtu mtu = transport::Mtu::k4096;
};

enum class PacketFaultKind : uint8_t {
  kDrop,              // the packet vanishes.
  kDuplicate,         // a second copy arrives `delay_ns` later.
  kReorder,           // held back by `delay_ns` so later packets overtake it.
  kDelayFixed,        // arrives `delay_ns` late.
  kDelayExponential,  // arrives late by an exponential variate with mean
                      // `delay_ns`.
  kCorrupt,  // bits flipped on the wire: the receiver drops it (ICRC failure).
};

// Opcode scope bits for PacketFault::opcode_mask.
inline constexpr uint32_t kFaultOpSend = 1u
                                         << 0;  // SEND / SEND_WITH_IMM packets
inline constexpr uint32_t kFaultOpWrite = 1u << 1;  // RDMA WRITE (+IMM) packets
inline constexpr uint32_t kFaultOpReadReq = 1u << 2;   // RDMA READ requests
inline constexpr uint32_t kFaultOpReadResp = 1u << 3;  // RDMA READ responses
inline constexpr uint32_t kFaultOpAck = 1u << 4;       // ACK / NAK packets
inline constexpr uint32_t kFaultOpUd = 1u << 5;        // UD sends
inline constexpr uint32_t kFaultOpAll = (1u << 6) - 1;

// A per-packet fault, applied to each packet put on the wire that matches every
// scope.
struct PacketFault {
  PacketFaultKind kind = PacketFaultKind::kDrop;
  double probability =
      1.0;  // per matching packet, drawn from the fabric's fault stream.
  int32_t src_node = -1;  // -1: any
  int32_t dst_node = -1;  // -1: any
  uint32_t qp_num = 0;    // 0: any; else the sending or receiving QP number.
  uint32_t opcode_mask = kFaultOpAll;
  uint64_t start_ns = 0;  // active in [start_ns, end_ns) of virtual time.
  uint64_t end_ns = UINT64_MAX;
  uint64_t delay_ns = 0;            // for kDuplicate, kReorder, kDelay*.
  uint32_t count_max = UINT32_MAX;  // applies at most this many times.
};

enum class TimedFaultKind : uint8_t {
  kLinkDown,  // node's port (or only the path to peer_node if >= 0) goes down.
  kLinkUp,    // and comes back.
  kQpError,   // QP `qp_num` on `node` is forced to ERROR (QP_FATAL event).
  kReceiverStall,  // node fetches no receive requests for duration_ns: RNR
                   // storm.
};

struct TimedFault {
  TimedFaultKind kind = TimedFaultKind::kLinkDown;
  uint64_t time_ns = 0;
  int32_t node = 0;
  int32_t peer_node = -1;
  uint32_t qp_num = 0;
  uint64_t duration_ns = 0;
};

struct FaultPlan {
  std::vector<PacketFault> packet_faults;
  std::vector<TimedFault> timed_faults;
};

// Device personalities. Where real devices differ from the IB spec or from
// each other, the simulated HCA behaves as the device its personality names
// (backends/sim/README.md, "Device personalities", has the sources):
//
//   case                        kRxe (default)           kMlx5
//   UD send longer than the     nothing sent; completes  LOC_LEN_ERR, QP to SQE
//   path MTU                    successfully, QP stays   (field reports; not in
//                               RTS (spec C10-93.1.1)    the driver sources)
//   RC SEND into a receive too  receive LOC_QP_OP_ERR,   up to 32 bytes:
//   receive small for it                sender REM_OP_ERR (NAK   LOC_LEN_ERR,
//   sender
//                               remote operational       succeeds, QPs
//                               unchanged error), both QPs to      (scatter to
//                               CQE); ERROR                    larger: receive
//                                                        LOC_LEN_ERR, sender
//                                                        REM_INV_REQ_ERR, both
//                                                        QPs to ERROR
//   UD datagram into a receive  receive LOC_QP_OP_ERR,   receive LOC_LEN_ERR,
//   without room for the GRH    QP to ERROR              QP unchanged
//   and the payload
//
// The default is Soft-RoCE's (rxe), the device the verbs tests run on in CI,
// so that the simulator agrees with them (tests/device_personality_test.cc
// runs the same cases on both).
enum class DevicePersonality : uint8_t {
  kRxe = 0,   // drivers/infiniband/sw/rxe
  kMlx5 = 1,  // ConnectX-4 and later: rdma-core providers/mlx5 and the kernel
};

// What a fabric shared by several processes (backends/simd) needs to see of
// the simulator's work: where it writes and reads the nodes' memory, and when
// a node gets something to look at. Called from inside Step() and friends;
// every method may be left as is. Not owned by the fabric.
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  // `len` bytes at `addr` of registered memory were written (a receive, an
  // RDMA WRITE, a READ response landing).
  virtual void OnMemoryWritten(const void* addr, uint64_t len) {
    (void)addr;
    (void)len;
  }
  // `len` bytes at `addr` are about to be read as an RDMA READ's source: the
  // last chance to bring them up to date.
  virtual void BeforeMemoryRead(const void* addr, uint64_t len) {
    (void)addr;
    (void)len;
  }
  // A completion was added to a CQ of `node`, or an async event raised there.
  virtual void OnNodeEvent(int32_t node) { (void)node; }
  // An async event was queued on `node`'s device (OnNodeEvent came first).
  virtual void OnAsyncEvent(int32_t node) { (void)node; }
  // A completion was added to `cq` (of `node`); OnNodeEvent came first.
  virtual void OnCompletionAdded(int32_t node,
                                 const transport::CompletionQueue* cq) {
    (void)node;
    (void)cq;
  }
};

struct SimConfig {
  int32_t nodes = 2;
  std::vector<SimLinkConfig> links;  // explicit pairs; others use default_link.
  SimLinkConfig default_link{};
  uint64_t master_seed = 1;
  FaultPlan faults;
  // Device limits reported by QueryDevice and enforced.
  int32_t max_qp_wr = 16384;
  int32_t max_sge = 32;
  int32_t max_cqe = 1 << 22;
  int32_t max_srq_wr = 16384;
  uint32_t max_inline_data = 256;
  transport::Mtu active_mtu = transport::Mtu::k4096;
  // A node's port MTU where it differs from active_mtu (index: node; missing
  // entries: active_mtu). A port sends nothing larger than its MTU and drops
  // an arriving packet larger than it, as a NIC drops an oversized frame.
  std::vector<transport::Mtu> port_mtu;
  // How every node's HCA behaves where devices differ (see above).
  DevicePersonality personality = DevicePersonality::kRxe;
  // Trace: the last trace_capacity events are kept (0 = no trace; the digest is
  // always on).
  uint32_t trace_capacity = 0;
  // Most events a Poll() on an empty CQ runs before returning 0.
  uint32_t poll_events_max = 1u << 16;
  // Several processes share the fabric (backends/simd): a Poll() never runs
  // events (time moves only when the daemon advances it), and while doorbells
  // are held (SimFabric::HoldDoorbells) what a post or a modify would send
  // and the wakeups nodes ask for wait, so that requests arriving between two
  // advances in any order leave the same fabric.
  bool shared_by_processes = false;
  // How a device numbers its QPs. 0: it never gives a number again (each QP
  // takes the next). N > 0: the numbers cycle through N values, a new QP
  // taking the first free one after the last given, as rxe's pool does
  // (xa_alloc_cyclic) over its 128 K numbers: a destroyed QP's number comes
  // back once the others have been given, and a packet still on its way to
  // the old QP reaches the new one. A small N brings that reuse into a short
  // test. Creating a QP while all N numbers are in use fails (ENOMEM).
  uint32_t qp_number_cycle = 0;
  SimObserver* observer = nullptr;
};

// Polling and virtual time (the "time hold"). Poll() on an empty CQ runs the
// fabric's events so that a busy-poll loop written for hardware makes
// progress. In a single-threaded run with several nodes that must not move
// the clock past a completion another node's owner would have read "at the
// same instant", so, for a Poll() with num_entries > 0 on CQ X:
//  1. X becomes *watched* (its owner is known to poll it). A CQ that is
//     watched and holds unread completions is *holding*.
//  2. While X is empty, events whose time equals the current time run freely
//     (at most poll_events_max per Poll, as before).
//  3. Before the first event later than now, if some CQ in the fabric (any
//     node) is holding, the poll is *held*: it returns 0 and the clock stays.
//  4. Fallback: a poll of X is held at most once per *read epoch*; the epoch
//     ends whenever any Poll() returns completions, or at a release. If X is
//     polled empty again in the same epoch, a full round of polls has passed
//     without anyone reading the holding CQs, so their owners are not reading
//     them: the hold is *released* (every holding CQ is unwatched until it is
//     polled again, the epoch ends) and X's poll advances time as before,
//     still subject to rule 3 for CQs that become holding afterwards.
// So a CQ that is never polled (an ignored send CQ) never holds time; one that
// stops being polled holds it for at most one round of polls; a poller that
// spins on one CQ alone loses at most one poll per epoch. Besides the hold, a
// poll never runs an event later than the poll horizon (SetPollHorizon; none
// by default), which a wait with a deadline sets so that polling cannot
// carry the clock past it. Step(), RunUntil() and RunUntilIdle() drive time
// explicitly and ignore the hold and the horizon. The rule depends only on
// the sequence of calls, so runs stay deterministic.
// SimStats::polls_held and hold_releases count rules 3 and 4.

// Completion channels and virtual time. A device's completion channel
// (Device::CreateCompChannel) owns a real eventfd, readable while at least one
// event is queued on it; an armed CQ queues its event when the fabric adds the
// completion, that is, while some call runs the fabric's events. Nothing runs
// them in the background: the fabric is single-threaded and its clock is
// virtual, so a program that arms a CQ and then sleeps in poll(2)/epoll on the
// fd waits forever, even with events pending. On the simulator the
// application (or the layer above that owns its loop) must drive the fabric
// between looks at the fd: Step(), RunUntil(), RunUntilIdle(), or a Poll() on
// any CQ (which runs events while that CQ is empty), and look at the fd with a
// zero timeout. The fd is only a readiness signal: which events are queued,
// and in what order (the order the completions fired them), depends only on
// the sequence of calls, so runs stay deterministic, and arming CQs or taking
// events changes nothing the fabric does (digest() included).

// Validates a config: EINVAL for no nodes, links naming unknown nodes,
// probabilities outside [0, 1], faults naming unknown nodes, an unknown
// personality.
Status ValidateSimConfig(const SimConfig& config);

enum class TraceKind : uint8_t {
  kPacketArrive,
  kPacketDropped,
  kAckTimeout,
  kRnrTimer,
  kTimedFault,
  kWakeSend,
};

struct TraceRecord {
  uint64_t time_ns;
  uint64_t seq;
  TraceKind kind;
  uint8_t opcode;
  int32_t node;
  uint32_t qp_num;
  uint32_t psn;
};

struct SimStats {
  uint64_t events = 0;
  uint64_t packets_sent = 0;
  uint64_t packets_dropped = 0;
  uint64_t retransmits = 0;
  uint64_t rnr_naks = 0;
  uint64_t completions = 0;
  uint64_t event_queue_max = 0;  // high-water mark of pending events.
  uint64_t cq_overruns = 0;
  uint64_t polls_held = 0;     // empty polls the time hold returned early.
  uint64_t hold_releases = 0;  // times the hold gave up on unread CQs.
};

class SimFabric {
 public:
  virtual ~SimFabric() = default;
  virtual int32_t num_devices() const = 0;
  // The HCA of `node` (0-based), owned by the fabric; nullptr if out of range.
  virtual transport::Device* device(int32_t node) = 0;
  virtual const transport::Clock& clock() const = 0;
  // Runs the single earliest pending event; false if none is pending.
  virtual bool Step() = 0;
  // Runs every event with time <= t_ns, then sets the clock to t_ns (if later).
  // Returns the number of events run.
  virtual uint64_t RunUntil(uint64_t t_ns) = 0;
  // Runs events until none is pending or events_max have run; returns how many
  // ran.
  virtual uint64_t RunUntilIdle(uint64_t events_max = 1ull << 32) = 0;
  virtual uint64_t pending_events() const = 0;
  // The time of the earliest pending event; UINT64_MAX when none is pending.
  virtual uint64_t next_event_ns() const = 0;
  // Polls (the time hold above) run no event later than t_ns: they return
  // instead, the clock short of it. UINT64_MAX (the default) lifts the
  // limit. For a wait with a deadline, which steps the fabric up to the
  // deadline itself (api/fabric/completion.cc): a poll inside it must not carry
  // the clock past the deadline. Step(), RunUntil() and RunUntilIdle() ignore
  // it. A run in which no poll reaches the horizon is the same run without
  // it (digest included).
  virtual void SetPollHorizon(uint64_t t_ns) = 0;
  virtual uint64_t poll_horizon_ns() const = 0;
  // Only with SimConfig::shared_by_processes: while held, a QP's requester
  // does not start on what was posted (or on a move to RTS) and wakeups are
  // not scheduled; both are queued. Releasing runs the queue in (node, QP
  // number) order for doorbells, then (node, request order) for wakeups, so
  // the result does not depend on the order the requests came in.
  virtual void HoldDoorbells(bool hold) { (void)hold; }
  // The node's HCA stops answering from now on (its process is gone): its
  // port goes down without an event, so its peers' requests time out as
  // the RC retry timers say.
  virtual void HaltNode(int32_t node) { (void)node; }
  // A 64-bit fold of every event run so far (time, sequence, kind, node, QP,
  // PSN, opcode).
  virtual uint64_t digest() const = 0;
  virtual SimStats stats() const = 0;
  // The recorded events, oldest first (at most SimConfig::trace_capacity).
  virtual std::vector<TraceRecord> Trace() const = 0;
};

// Builds a fabric; nullptr if ValidateSimConfig(config) fails.
std::unique_ptr<SimFabric> CreateSimFabric(const SimConfig& config);

}  // namespace softfab::sim

#endif  // SOFTFAB_BACKENDS_SIM_SIM_FABRIC_H_
