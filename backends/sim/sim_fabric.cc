// The simulated fabric. One FabricImpl owns the virtual clock, the event queue,
// the fault plan and the devices; every object below is reached from it by
// index, never by a global.
//
// Data model choices (written down because real hardware leaves them open):
// - RC payload bytes are read from the requester's registered buffers when a
// packet arrives
//   at the responder (the requester may not touch them until its WR completes,
//   so this equals reading them at transmit time), and written straight into
//   the responder's buffers. A packet whose requester WR no longer exists (QP
//   destroyed, reset or flushed meanwhile) is dropped on arrival, as if it had
//   been lost.
// - UD payloads are copied into a pooled buffer when sent (the send completes
// as the packet
//   leaves the port), so duplicates and late packets never read reused user
//   memory.
// - A CQ overrun keeps every completion (in order, in an overflow list), raises
// CQ_ERR and
//   moves the QP that overran it to ERROR with QP_FATAL, as hardware does;
//   nothing vanishes.
// - Responder errors (receive too small, remote access, local protection on the
// receive
//   buffer) move BOTH QPs to ERROR, as the IB spec's class C/D responder errors
//   do.
#include "backends/sim/sim_fabric.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "backends/sim/internal/event_queue.h"
#include "backends/sim/internal/rng.h"

namespace softfab::sim {
namespace {

using transport::AddressHandle;
using transport::AhAttr;
using transport::AsyncEvent;
using transport::AsyncEventType;
using transport::CompletionQueue;
using transport::DeviceAttr;
using transport::Gid;
using transport::MemoryRegion;
using transport::Mtu;
using transport::PortAttr;
using transport::PortState;
using transport::ProtectionDomain;
using transport::QpAttr;
using transport::QpCap;
using transport::QpInitAttr;
using transport::QpState;
using transport::QpType;
using transport::QueuePair;
using transport::RecvWr;
using transport::SendWr;
using transport::Sge;
using transport::SharedReceiveQueue;
using transport::SrqAttr;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WorkCompletion;
using transport::WrOpcode;

constexpr uint32_t kQpnBase = 0x100;
constexpr uint32_t kPsnMask = 0xffffff;
constexpr uint32_t kGrhBytes = 40;
constexpr uint32_t kHeaderBytes =
    58;  // Eth + IPv4 + UDP + BTH + ICRC + FCS, roughly.
constexpr uint64_t kSgeZeroLength = 1ull << 31;
constexpr size_t kAsyncEventsMax = 4096;
constexpr uint8_t kGrhPoison = 0xa5;

// Vendor error numbers in error completions (arbitrary but fixed; 0 = none).
constexpr uint32_t kVendorFlush = 0xf9;
constexpr uint32_t kVendorLocal = 0x51;
constexpr uint32_t kVendorRemote = 0x52;
constexpr uint32_t kVendorRetry = 0x81;
constexpr uint32_t kVendorRnr = 0x82;

// The IB min_rnr_timer encodings (5 bits) in ns: 0 = 655.36 ms, 1 = 0.01 ms ...
// 31 = 491.52 ms.
constexpr uint64_t kRnrTimerNs[32] = {
    655360000, 10000,     20000,     30000,    40000,    60000,    80000,
    120000,    160000,    240000,    320000,   480000,   640000,   960000,
    1280000,   1920000,   2560000,   3840000,  5120000,  7680000,  10240000,
    15360000,  20480000,  30720000,  40960000, 61440000, 81920000, 122880000,
    163840000, 245760000, 327680000, 491520000};

inline int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}
inline uint32_t PsnAdd(uint32_t a, uint32_t n) { return (a + n) & kPsnMask; }
// The least power of two >= n (n >= 1): ring storage, so that slots are found
// with a mask instead of a division.
inline uint64_t RingSize(uint64_t n) {
  uint64_t r = 1;
  while (r < n) r <<= 1;
  return r;
}
inline uint64_t SgeLength(const Sge& s) {
  return s.length == 0 ? kSgeZeroLength : s.length;
}

// ------------------------------------------------------------------------------------
// Events: one POD shape for packets and timers.

enum class EvKind : uint8_t {
  kPacket,
  kAckTimer,
  kRnrTimer,
  kUdSendDone,
  kTimedFault,
  kWakeup,  // Nothing happens; the clock reaches its time (Device timers).
};

enum class PktOp : uint8_t {
  kSend,
  kWrite,
  kReadReq,
  kReadResp,
  kAck,
  kUdSend,
};

enum class Syndrome : uint8_t {
  kAck,
  kNakSeq,
  kNakRnr,
  kNakInvReq,
  kNakRemAccess,
  kNakRemOp,
};

constexpr uint8_t kPktFirst = 1;
constexpr uint8_t kPktLast = 2;
constexpr uint8_t kPktCorrupt = 4;
constexpr uint8_t kPktImm = 8;

struct Ev {
  EvKind kind;
  PktOp op;
  uint8_t flags;
  uint8_t syndrome;
  int32_t src_node;
  int32_t dst_node;
  uint32_t src_qpn;
  uint32_t dst_qpn;
  uint32_t psn;
  uint32_t length;
  uint32_t aux;  // read: packet count; RNR NAK: timer code; UD: pool slot;
                 // fault: index.
  uint64_t offset;
  uint64_t wqe_seq;
};

class FabricImpl;
class DeviceImpl;
class PdImpl;
class CqImpl;
class SrqImpl;
class QpImpl;

// ------------------------------------------------------------------------------------

class MrImpl final : public MemoryRegion {
 public:
  MrImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index, uint8_t* addr,
         uint64_t length, uint32_t access, uint8_t tag)
      : dev_(dev),
        pd_(pd),
        index_(index),
        addr_(addr),
        length_(length),
        access_(access),
        lkey_((index << 8) | tag),
        rkey_(((index << 8) | tag) ^ 0x5a) {}
  uint64_t addr() const override { return reinterpret_cast<uint64_t>(addr_); }
  uint64_t length() const override { return length_; }
  uint32_t lkey() const override { return lkey_; }
  uint32_t rkey() const override { return rkey_; }
  uint32_t access() const override { return access_; }
  Status Destroy() override;

  // True if [a, a+len) lies inside the region (overflow-safe).
  bool Contains(uint64_t a, uint64_t len) const {
    const uint64_t base = addr();
    return a >= base && len <= length_ && a - base <= length_ - len;
  }

  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  uint8_t* addr_;
  uint64_t length_;
  uint32_t access_;
  uint32_t lkey_;
  uint32_t rkey_;
};

class AhImpl final : public AddressHandle {
 public:
  AhImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index, int32_t node)
      : dev_(dev), pd_(pd), index_(index), node_(node) {}
  Status Destroy() override;
  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  int32_t node_;
};

class PdImpl final : public ProtectionDomain {
 public:
  PdImpl(DeviceImpl* dev, uint32_t index) : dev_(dev), index_(index) {}
  StatusOr<MemoryRegion*> RegMr(void* addr, uint64_t length,
                                uint32_t access) override;
  StatusOr<SharedReceiveQueue*> CreateSrq(const SrqAttr& attr) override;
  StatusOr<QueuePair*> CreateQp(const QpInitAttr& attr) override;
  StatusOr<AddressHandle*> CreateAh(const AhAttr& attr) override;
  Status Destroy() override;
  DeviceImpl* dev_;
  uint32_t index_;
  uint32_t refs_ = 0;
};

class CqImpl final : public CompletionQueue {
 public:
  CqImpl(DeviceImpl* dev, uint32_t index, int32_t cqe)
      : dev_(dev),
        index_(index),
        capacity_(static_cast<size_t>(cqe)),
        ring_(RingSize(capacity_)),
        mask_(ring_.size() - 1) {}
  int Poll(int num_entries, WorkCompletion* wc) override;
  int32_t cqe() const override { return static_cast<int32_t>(capacity_); }
  uint32_t handle() const override { return index_; }
  Status Destroy() override;

  bool empty() const { return count_ == 0 && overflow_.empty(); }
  // Appends a completion; false if the ring was full (kept in overflow_).
  bool Push(const WorkCompletion& wc) {
    if (count_ < capacity_) {
      ring_[(head_ + count_) & mask_] = wc;
      ++count_;
      return overflow_.empty();
    }
    overflow_.push_back(wc);
    return false;
  }

  DeviceImpl* dev_;
  uint32_t index_;
  uint32_t refs_ = 0;
  size_t capacity_;                   // cqe: completions the ring holds
  std::vector<WorkCompletion> ring_;  // RingSize(capacity_) slots
  size_t mask_;
  size_t head_ = 0;
  size_t count_ = 0;
  std::deque<WorkCompletion> overflow_;
  bool overrun_reported_ = false;
  // The time hold (see RunForCq). Watched: polled since the last release that
  // found it holding. Holding = watched and not empty; holding_pos_ is its
  // place in FabricImpl::holding_ (-1: not holding). held_epoch_: the read
  // epoch in which a poll of this CQ was last held.
  bool watched_ = false;
  int32_t holding_pos_ = -1;
  uint64_t held_epoch_ = UINT64_MAX;
};

struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
};

// A bounded FIFO of receive requests with their SGEs stored flat (depth *
// sge_max).
class RecvRing {
 public:
  void Init(uint32_t depth, uint32_t sge_max) {
    depth_ = depth;
    sge_max_ = sge_max;
    const uint64_t slots = RingSize(depth);
    mask_ = slots - 1;
    wqes_.assign(slots, RecvWqe{});
    sges_.assign(slots * sge_max, Sge{});
  }
  uint32_t depth() const { return depth_; }
  uint32_t sge_max() const { return sge_max_; }
  uint32_t count() const { return static_cast<uint32_t>(tail_ - head_); }
  bool full() const { return count() >= depth_; }
  void Push(const RecvWr& wr) {
    const size_t slot = tail_ & mask_;
    wqes_[slot] = RecvWqe{wr.wr_id, static_cast<uint32_t>(wr.num_sge)};
    for (int i = 0; i < wr.num_sge; ++i)
      sges_[slot * sge_max_ + i] = wr.sg_list[i];
    ++tail_;
  }
  // Pops the head into *wqe / sges (capacity sge_max); false if empty.
  bool Pop(RecvWqe* wqe, Sge* sges) {
    if (head_ == tail_) return false;
    const size_t slot = head_ & mask_;
    *wqe = wqes_[slot];
    for (uint32_t i = 0; i < wqe->num_sge; ++i)
      sges[i] = sges_[slot * sge_max_ + i];
    ++head_;
    return true;
  }
  void Clear() { head_ = tail_ = 0; }

 private:
  uint32_t depth_ = 0;
  uint32_t sge_max_ = 0;
  uint64_t mask_ = 0;  // storage holds RingSize(depth_) slots
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
  std::vector<RecvWqe> wqes_;
  std::vector<Sge> sges_;
};

class SrqImpl final : public SharedReceiveQueue {
 public:
  SrqImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index)
      : dev_(dev), pd_(pd), index_(index) {}
  Status PostRecv(const RecvWr* wr, const RecvWr** bad_wr) override;
  Status Modify(const SrqAttr& attr, uint32_t attr_mask) override;
  Status Query(SrqAttr* attr) const override;
  uint32_t handle() const override { return index_; }
  Status Destroy() override;

  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  uint32_t refs_ = 0;
  uint32_t limit_ = 0;
  RecvRing ring_;
};

struct SendWqe {
  uint64_t wr_id;
  uint64_t seq;
  uint64_t length;
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t imm;
  uint32_t first_psn;
  uint32_t npkts;
  uint32_t read_done;
  uint32_t ud_qpn;
  uint32_t ud_qkey;
  int32_t ud_node;
  uint32_t num_sge;
  WrOpcode opcode;
  uint32_t send_flags;
  bool signaled;
  bool done;  // UD: left the port.
  WcStatus error;
  // DeviceImpl::mr_epoch_ + 1 when Pump's local SGE check passed (0: not
  // checked): while no MR has been deregistered since, it still passes.
  uint64_t mr_checked;
};

class QpImpl final : public QueuePair {
 public:
  QpImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index, const QpInitAttr& init,
         uint32_t send_sge_max, uint32_t inline_max);
  uint32_t qp_num() const override { return kQpnBase + index_; }
  QpType qp_type() const override { return init_.qp_type; }
  QpState state() const override { return attr_.qp_state; }
  Status Modify(const QpAttr& attr, uint32_t attr_mask) override;
  Status Query(QpAttr* attr, QpInitAttr* init_attr) const override;
  Status PostSend(const SendWr* wr, const SendWr** bad_wr) override;
  Status PostRecv(const RecvWr* wr, const RecvWr** bad_wr) override;
  Status Destroy() override;

  // ---- engine (called by FabricImpl) ----
  bool Receiving() const {
    const QpState s = attr_.qp_state;
    return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd ||
           s == QpState::kSqe;
  }
  SendWqe& Slot(uint64_t i) { return sq_[i & sq_mask_]; }
  const Sge* SendSges(uint64_t i) const {
    return &sq_sges_[(i & sq_mask_) * send_sge_max_];
  }
  const uint8_t* InlineData(uint64_t i) const {
    return inline_max_ ? &sq_inline_[(i & sq_mask_) * inline_max_] : nullptr;
  }
  // The WQE with sequence number `seq` if it is still outstanding.
  SendWqe* FindWqe(uint64_t seq) {
    if (seq < sq_head_ || seq >= sq_assigned_) return nullptr;
    SendWqe& w = Slot(seq);
    return w.seq == seq ? &w : nullptr;
  }
  // min(path_mtu, the link's MTU): fixed between Modify() calls.
  uint32_t PathMtuBytes() const { return path_mtu_bytes_; }
  uint32_t ComputePathMtuBytes() const;
  uint64_t AckTimeoutNs() const {
    return attr_.timeout == 0 ? 0 : (4096ull << attr_.timeout);
  }
  bool Signaled(const SendWqe& w) const {
    return init_.sq_sig_all != 0 ||
           (w.send_flags & transport::kSendSignaled) != 0;
  }
  void Pump();
  void Retire();
  void GoBack(uint32_t psn);
  void ArmTimer();
  // Everything before psn_next is acknowledged.
  void ImplicitAck(uint32_t psn_next);
  void ErrorHead(WcStatus status, uint32_t vendor_err);
  void ToError();
  void ToSqe();
  void FlushSend();
  void FlushRecv();
  void CompleteSend(const SendWqe& w, WcStatus status, uint32_t vendor_err);
  void CompleteRecvError(uint64_t wr_id, WcStatus status, uint32_t vendor_err);
  // Takes the next receive request (own RQ or SRQ) into active_; false if none.
  bool FetchRecv();
  void DiscardAll();

  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  QpInitAttr init_;
  QpAttr attr_{};
  CqImpl* send_cq_;
  CqImpl* recv_cq_;
  SrqImpl* srq_;
  uint32_t send_sge_max_;
  uint32_t inline_max_;
  uint32_t sq_depth_;  // max_send_wr; storage holds RingSize(sq_depth_)
  uint64_t sq_mask_;
  std::vector<SendWqe> sq_;
  std::vector<Sge> sq_sges_;
  std::vector<uint8_t> sq_inline_;
  RecvRing rq_;

  // Requester.
  uint64_t sq_head_ = 0;  // oldest WQE not yet completed
  uint64_t sq_assigned_ =
      0;                  // WQEs before this have PSNs (have been transmitted)
  uint64_t sq_tail_ = 0;  // next free slot
  uint64_t tx_wqe_ = 0;   // transmit cursor: WQE ...
  uint32_t tx_pkt_ = 0;   // ... and packet within it
  uint64_t wqe_seq_next_ = 0;
  uint32_t next_psn_ = 0;
  uint32_t una_psn_ = 0;  // oldest unacknowledged PSN
  uint8_t retry_left_ = 0;
  uint8_t rnr_left_ = 0;
  bool rnr_wait_ = false;
  bool tx_blocked_ = false;  // the WQE at blocked_at_ failed local checks
  uint64_t blocked_at_ = 0;
  bool timer_pending_ = false;
  bool drained_reported_ = false;
  uint64_t timer_deadline_ns_ = 0;
  int32_t dest_node_ = -1;
  uint32_t path_mtu_bytes_ = 0;  // PathMtuBytes()

  // Responder.
  uint32_t epsn_ = 0;
  bool nak_sent_ = false;
  bool recv_active_ = false;
  RecvWqe active_{};
  std::vector<Sge> active_sges_;
  uint64_t active_capacity_ = 0;
  uint64_t active_bytes_ = 0;
  bool last_wqe_reported_ = false;
};

struct Node {
  std::unique_ptr<DeviceImpl> device;
  uint64_t port_free_ns = 0;
  bool port_down = false;
  uint64_t stall_until_ns = 0;
};

struct Link {
  uint64_t latency_ns;
  uint64_t bandwidth_bps;
  uint32_t mtu_bytes;
  bool down;
  // Serialisation times remembered (packet sizes repeat, so this saves a
  // division per packet): header-only packets (ACKs), and the last other size.
  uint64_t header_ser_ns = 0;
  uint64_t ser_bytes = 0;
  uint64_t ser_ns = 0;

  static uint64_t WireNs(uint64_t bytes, uint64_t bandwidth_bps) {
    return bandwidth_bps == 0 ? 0 : bytes * 8'000'000'000ull / bandwidth_bps;
  }
  // Wire time of a packet of `bytes` bytes (headers included) in ns.
  uint64_t SerializationNs(uint64_t bytes) {
    if (bytes == kHeaderBytes) return header_ser_ns;
    if (bytes != ser_bytes) {
      ser_bytes = bytes;
      ser_ns = WireNs(bytes, bandwidth_bps);
    }
    return ser_ns;
  }
};

struct UdBuffer {
  std::vector<uint8_t> bytes;
  uint32_t refs = 0;
};

class DeviceImpl final : public transport::Device {
 public:
  DeviceImpl(FabricImpl* fabric, int32_t node);
  const char* name() const override { return name_; }
  Status QueryDevice(DeviceAttr* attr) const override;
  Status QueryPort(uint8_t port_num, PortAttr* attr) const override;
  Status QueryGid(uint8_t port_num, int index, Gid* gid) const override;
  StatusOr<ProtectionDomain*> AllocPd() override;
  StatusOr<CompletionQueue*> CreateCq(int32_t cqe) override;
  Status GetAsyncEvent(AsyncEvent* event) override;
  const transport::Clock& clock() const override;
  void ScheduleWakeup(uint64_t t_ns) override;

  void Raise(AsyncEventType type, uint32_t qp_num, uint32_t cq, uint32_t srq);
  MrImpl* MrByKey(uint32_t key) const {
    const uint32_t index = key >> 8;
    return index < mrs_.size() ? mrs_[index].get() : nullptr;
  }
  QpImpl* QpByNum(uint32_t qpn) const {
    if (qpn < kQpnBase) return nullptr;
    const uint32_t index = qpn - kQpnBase;
    return index < qps_.size() ? qps_[index].get() : nullptr;
  }

  FabricImpl* fabric_;
  int32_t node_;
  char name_[24];
  std::vector<std::unique_ptr<PdImpl>> pds_;
  std::vector<std::unique_ptr<MrImpl>> mrs_;
  std::vector<std::unique_ptr<CqImpl>> cqs_;
  std::vector<std::unique_ptr<SrqImpl>> srqs_;
  std::vector<std::unique_ptr<QpImpl>> qps_;
  std::vector<std::unique_ptr<AhImpl>> ahs_;
  std::deque<AsyncEvent> events_;
  uint32_t mr_tag_ = 1;
  uint64_t mr_epoch_ = 0;  // +1 per deregistration (MrImpl::Destroy)
};

Gid GidOfNode(int32_t node) {
  Gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = 10;
  g.raw[13] = static_cast<uint8_t>(node >> 16);
  g.raw[14] = static_cast<uint8_t>(node >> 8);
  g.raw[15] = static_cast<uint8_t>(node);
  return g;
}

// ------------------------------------------------------------------------------------

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
  uint64_t digest() const override { return digest_; }
  SimStats stats() const override {
    SimStats s = stats_;
    s.event_queue_max = queue_.size_max();
    return s;
  }
  std::vector<TraceRecord> Trace() const override;

  // Runs events until `cq` has a completion, nothing is pending, or the poll
  // bound is hit.
  void ScheduleWakeup(int32_t node, uint64_t t_ns) {
    Ev ev{};
    ev.kind = EvKind::kWakeup;
    ev.src_node = node;
    queue_.Push(std::max(t_ns, now_ns_), ev);
  }

  // Runs events until `cq` has a completion, nothing is pending, the poll
  // bound is hit, or the time hold stops it: events at the current time run
  // freely, but an event later than now runs only if no watched CQ holds
  // unread completions. If one does, the poll is held (returns with the clock
  // unchanged) unless `cq` was already held in this read epoch (no completion
  // has been read anywhere since): then a full round of polls has passed
  // without the holding CQs being read, so their owners are not reading them;
  // they are released (unwatched until polled again) and time moves on.
  void RunForCq(CqImpl* cq) {
    for (uint32_t i = 0; i < config_.poll_events_max && cq->empty(); ++i) {
      if (queue_.empty()) return;
      if (!holding_.empty() && queue_.TopTime() > now_ns_) {
        if (cq->held_epoch_ != read_epoch_) {
          cq->held_epoch_ = read_epoch_;
          ++stats_.polls_held;
          return;
        }
        ReleaseHold();
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
  void Completed(CqImpl* cq, const WorkCompletion& wc, QpImpl* qp);

  uint8_t* staging() { return staging_.data(); }

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
};

// ------------------------------------------------------------------------------------
// Fabric core.

Link MakeLink(const SimLinkConfig& c) {
  return Link{c.latency_ns,
              c.bandwidth_bps,
              transport::MtuBytes(c.mtu),
              false,
              Link::WireNs(kHeaderBytes, c.bandwidth_bps),
              0,
              0};
}

FabricImpl::FabricImpl(const SimConfig& config)
    : config_(config),
      default_link_(MakeLink(config.default_link)),
      staging_(4096 + kGrhBytes) {
  nodes_.resize(config_.nodes);
  for (int32_t n = 0; n < config_.nodes; ++n) {
    nodes_[n].device = std::make_unique<DeviceImpl>(this, n);
  }
  link_index_.assign(static_cast<size_t>(config_.nodes) * config_.nodes, -1);
  for (const SimLinkConfig& l : config_.links) {
    const int32_t idx = static_cast<int32_t>(links_.size());
    links_.push_back(MakeLink(l));
    link_index_[static_cast<size_t>(l.node_a) * config_.nodes + l.node_b] = idx;
    link_index_[static_cast<size_t>(l.node_b) * config_.nodes + l.node_a] = idx;
  }
  for (size_t i = 0; i < config_.faults.packet_faults.size(); ++i) {
    fault_rngs_.emplace_back(
        internal::DeriveSeed(config_.master_seed, 1000 + i));
  }
  fault_counts_.assign(config_.faults.packet_faults.size(), 0);
  trace_.resize(config_.trace_capacity);
  for (size_t i = 0; i < config_.faults.timed_faults.size(); ++i) {
    Ev ev{};
    ev.kind = EvKind::kTimedFault;
    ev.aux = static_cast<uint32_t>(i);
    queue_.Push(config_.faults.timed_faults[i].time_ns, ev);
  }
  Fold(config_.master_seed);
}

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

uint32_t FabricImpl::UdAlloc(uint64_t bytes) {
  uint32_t slot;
  if (!ud_free_.empty()) {
    slot = ud_free_.back();
    ud_free_.pop_back();
  } else {
    slot = static_cast<uint32_t>(ud_pool_.size());
    ud_pool_.emplace_back();
  }
  ud_pool_[slot].bytes.resize(bytes);
  ud_pool_[slot].refs = 1;
  return slot;
}

uint32_t FaultOpBit(PktOp op) {
  switch (op) {
    case PktOp::kSend:
      return kFaultOpSend;
    case PktOp::kWrite:
      return kFaultOpWrite;
    case PktOp::kReadReq:
      return kFaultOpReadReq;
    case PktOp::kReadResp:
      return kFaultOpReadResp;
    case PktOp::kAck:
      return kFaultOpAck;
    case PktOp::kUdSend:
      return kFaultOpUd;
  }
  return 0;
}

void FabricImpl::Transmit(Ev pkt, uint32_t payload_bytes) {
  pkt.kind = EvKind::kPacket;
  ++stats_.packets_sent;
  const int32_t src = pkt.src_node;
  const int32_t dst = pkt.dst_node;
  Link& link = MutableLinkFor(src, dst);
  Node& sn = nodes_[src];
  auto drop = [&](uint64_t seq_hint) {
    ++stats_.packets_dropped;
    Record(TraceKind::kPacketDropped, pkt, seq_hint);
    if (pkt.op == PktOp::kUdSend) UdRelease(pkt.aux);
  };
  if (sn.port_down || nodes_[dst].port_down || link.down) {
    drop(queue_.next_seq());
    return;
  }
  const uint64_t bytes = payload_bytes + kHeaderBytes;
  const uint64_t ser = link.SerializationNs(bytes);
  const uint64_t depart = std::max(now_ns_, sn.port_free_ns);
  sn.port_free_ns = depart + ser;
  uint64_t t = depart + ser + link.latency_ns;
  bool duplicate = false;
  uint64_t dup_delay = 0;
  const auto& faults = config_.faults.packet_faults;
  for (size_t i = 0; i < faults.size(); ++i) {
    const PacketFault& f = faults[i];
    if (fault_counts_[i] >= f.count_max) continue;
    if (now_ns_ < f.start_ns || now_ns_ >= f.end_ns) continue;
    if (f.src_node >= 0 && f.src_node != src) continue;
    if (f.dst_node >= 0 && f.dst_node != dst) continue;
    if (f.qp_num != 0 && f.qp_num != pkt.src_qpn && f.qp_num != pkt.dst_qpn)
      continue;
    if ((f.opcode_mask & FaultOpBit(pkt.op)) == 0) continue;
    if (!fault_rngs_[i].Chance(f.probability)) continue;
    ++fault_counts_[i];
    switch (f.kind) {
      case PacketFaultKind::kDrop:
        drop(queue_.next_seq());
        return;
      case PacketFaultKind::kCorrupt:
        pkt.flags |= kPktCorrupt;
        break;
      case PacketFaultKind::kDuplicate:
        duplicate = true;
        dup_delay = f.delay_ns;
        break;
      case PacketFaultKind::kReorder:
      case PacketFaultKind::kDelayFixed:
        t += f.delay_ns;
        break;
      case PacketFaultKind::kDelayExponential:
        t += fault_rngs_[i].Exponential(f.delay_ns);
        break;
    }
  }
  queue_.Push(t, pkt);
  if (duplicate) {
    if (pkt.op == PktOp::kUdSend) ++ud_pool_[pkt.aux].refs;
    queue_.Push(t + dup_delay, pkt);
  }
}

void FabricImpl::Completed(CqImpl* cq, const WorkCompletion& wc, QpImpl* qp) {
  ++stats_.completions;
  if (cq->watched_ && cq->holding_pos_ < 0) AddHolding(cq);
  if (cq->Push(wc)) return;
  ++stats_.cq_overruns;
  if (!cq->overrun_reported_) {
    cq->overrun_reported_ = true;
    cq->dev_->Raise(AsyncEventType::kCqErr, 0, cq->index_, 0);
  }
  if (qp != nullptr && qp->attr_.qp_state != QpState::kError &&
      qp->attr_.qp_state != QpState::kReset) {
    qp->dev_->Raise(AsyncEventType::kQpFatal, qp->qp_num(), 0, 0);
    qp->ToError();
  }
}

void FabricImpl::Dispatch(const Ev& ev) {
  switch (ev.kind) {
    case EvKind::kPacket:
      OnPacket(ev);
      return;
    case EvKind::kAckTimer: {
      Record(TraceKind::kAckTimeout, ev, 0);
      QpImpl* qp = dev(ev.dst_node)->QpByNum(ev.dst_qpn);
      if (qp == nullptr) return;
      qp->timer_pending_ = false;
      const QpState s = qp->attr_.qp_state;
      if (qp->timer_deadline_ns_ == 0 ||
          (s != QpState::kRts && s != QpState::kSqd))
        return;
      if (now_ns_ < qp->timer_deadline_ns_) {
        qp->timer_pending_ = true;
        ScheduleQpTimer(EvKind::kAckTimer, ev.dst_node, ev.dst_qpn,
                        qp->timer_deadline_ns_, 0);
        return;
      }
      if (qp->sq_head_ >= qp->sq_assigned_) {
        qp->timer_deadline_ns_ = 0;
        return;
      }
      if (qp->retry_left_ == 0) {
        qp->ErrorHead(WcStatus::kRetryExcErr, kVendorRetry);
        return;
      }
      --qp->retry_left_;
      ++stats_.retransmits;
      qp->timer_deadline_ns_ = 0;
      // Back to the oldest incomplete WR (not una_psn_: a read whose responses
      // were lost may lie before it); the responder discards what it already
      // has.
      qp->GoBack(qp->Slot(qp->sq_head_).first_psn);
      qp->Pump();
      return;
    }
    case EvKind::kRnrTimer: {
      Record(TraceKind::kRnrTimer, ev, 0);
      QpImpl* qp = dev(ev.dst_node)->QpByNum(ev.dst_qpn);
      if (qp == nullptr || !qp->rnr_wait_) return;
      qp->rnr_wait_ = false;
      if (qp->attr_.qp_state != QpState::kRts &&
          qp->attr_.qp_state != QpState::kSqd)
        return;
      ++stats_.retransmits;
      qp->GoBack(ev.psn);
      qp->Pump();
      return;
    }
    case EvKind::kUdSendDone: {
      QpImpl* qp = dev(ev.src_node)->QpByNum(ev.src_qpn);
      if (qp == nullptr) return;
      SendWqe* w = qp->FindWqe(ev.wqe_seq);
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

void FabricImpl::OnTimedFault(const TimedFault& f) {
  Node& n = nodes_[f.node];
  switch (f.kind) {
    case TimedFaultKind::kLinkDown:
    case TimedFaultKind::kLinkUp: {
      const bool down = f.kind == TimedFaultKind::kLinkDown;
      if (f.peer_node >= 0) {
        MutableLinkFor(f.node, f.peer_node).down = down;
        // A shared default link would take every pair down: give the pair its
        // own entry.
        return;
      }
      if (n.port_down == down) return;
      n.port_down = down;
      n.device->Raise(
          down ? AsyncEventType::kPortErr : AsyncEventType::kPortActive, 0, 0,
          0);
      return;
    }
    case TimedFaultKind::kQpError: {
      QpImpl* qp = n.device->QpByNum(f.qp_num);
      if (qp == nullptr || qp->attr_.qp_state == QpState::kReset ||
          qp->attr_.qp_state == QpState::kError) {
        return;
      }
      n.device->Raise(AsyncEventType::kQpFatal, qp->qp_num(), 0, 0);
      qp->ToError();
      return;
    }
    case TimedFaultKind::kReceiverStall:
      n.stall_until_ns = std::max(n.stall_until_ns, now_ns_ + f.duration_ns);
      return;
  }
}

void FabricImpl::SendAck(QpImpl* qp, Syndrome syn, uint32_t psn, uint32_t aux) {
  Ev a{};
  a.op = PktOp::kAck;
  a.syndrome = static_cast<uint8_t>(syn);
  a.src_node = qp->dev_->node_;
  a.dst_node = qp->dest_node_;
  a.src_qpn = qp->qp_num();
  a.dst_qpn = qp->attr_.dest_qp_num;
  a.psn = psn;
  a.aux = aux;
  if (syn == Syndrome::kNakRnr) ++stats_.rnr_naks;
  Transmit(a, 0);
}

// Copies `len` bytes starting at byte `offset` of the SGE list into `dst`.
void Gather(const Sge* sges, uint32_t n, uint64_t offset, uint8_t* dst,
            uint64_t len) {
  for (uint32_t i = 0; i < n && len > 0; ++i) {
    const uint64_t sl = SgeLength(sges[i]);
    if (offset >= sl) {
      offset -= sl;
      continue;
    }
    const uint64_t take = std::min(sl - offset, len);
    std::memcpy(dst, reinterpret_cast<const uint8_t*>(sges[i].addr + offset),
                take);
    dst += take;
    len -= take;
    offset = 0;
  }
}

// Copies `len` bytes from `src` into the SGE list at byte `offset` of the list.
void Scatter(const Sge* sges, uint32_t n, uint64_t offset, const uint8_t* src,
             uint64_t len) {
  for (uint32_t i = 0; i < n && len > 0; ++i) {
    const uint64_t sl = SgeLength(sges[i]);
    if (offset >= sl) {
      offset -= sl;
      continue;
    }
    const uint64_t take = std::min(sl - offset, len);
    std::memcpy(reinterpret_cast<uint8_t*>(sges[i].addr + offset), src, take);
    src += take;
    len -= take;
    offset = 0;
  }
}

// The address of the `len` bytes at byte `offset` of the SGE list if one SGE
// holds them all, else nullptr.
uint8_t* InOneSge(const Sge* sges, uint32_t n, uint64_t offset, uint64_t len) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t sl = SgeLength(sges[i]);
    if (offset >= sl) {
      offset -= sl;
      continue;
    }
    return len <= sl - offset
               ? reinterpret_cast<uint8_t*>(sges[i].addr + offset)
               : nullptr;
  }
  return nullptr;
}

// Scatter() of `len` bytes from `src`, with the result a copy through a
// private buffer would give even if `src` (user memory unless `src_private`)
// overlaps the destination: one SGE takes them with memmove; else `src` is
// staged first unless it is private.
void FabricImpl::PlaceBytes(const Sge* sges, uint32_t n, uint64_t offset,
                            const uint8_t* src, uint64_t len,
                            bool src_private) {
  if (len == 0) return;
  if (uint8_t* dst = InOneSge(sges, n, offset, len)) {
    std::memmove(dst, src, len);
    return;
  }
  if (!src_private) {
    std::memcpy(staging_.data(), src, len);
    src = staging_.data();
  }
  Scatter(sges, n, offset, src, len);
}

// Checks each SGE against the device's MRs (PD, bounds, and `access_needed`);
// returns the total length or -1.
int64_t CheckSges(DeviceImpl* dev, PdImpl* pd, const Sge* sges, uint32_t n,
                  uint32_t access_needed) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const MrImpl* mr = dev->MrByKey(sges[i].lkey);
    const uint64_t len = SgeLength(sges[i]);
    if (mr == nullptr || mr->lkey_ != sges[i].lkey || mr->pd_ != pd ||
        (mr->access_ & access_needed) != access_needed ||
        !mr->Contains(sges[i].addr, len)) {
      return -1;
    }
    total += len;
  }
  return static_cast<int64_t>(total);
}

// The responder's target for an RDMA access, or nullptr (REM_ACCESS_ERR).
uint8_t* RemoteTarget(QpImpl* qp, uint32_t rkey, uint64_t addr, uint64_t len,
                      uint32_t access) {
  const MrImpl* mr = qp->dev_->MrByKey(rkey);
  if (mr == nullptr || mr->rkey_ != rkey || mr->pd_ != qp->pd_ ||
      (mr->access_ & access) != access ||
      (qp->attr_.qp_access_flags & access) != access ||
      !mr->Contains(addr, len)) {
    return nullptr;
  }
  return reinterpret_cast<uint8_t*>(addr);
}

void FabricImpl::OnPacket(const Ev& ev) {
  Record(TraceKind::kPacketArrive, ev, 0);
  DeviceImpl* d = nodes_[ev.dst_node].device.get();
  QpImpl* qp = d->QpByNum(ev.dst_qpn);
  const bool drop = (ev.flags & kPktCorrupt) != 0 || qp == nullptr ||
                    !qp->Receiving() || nodes_[ev.dst_node].port_down;
  if (drop) {
    ++stats_.packets_dropped;
    if (ev.op == PktOp::kUdSend) UdRelease(ev.aux);
    return;
  }
  if (ev.op == PktOp::kUdSend) {
    OnUd(qp, ev);
    UdRelease(ev.aux);
    return;
  }
  if (qp->qp_type() != QpType::kRc || ev.src_node != qp->dest_node_ ||
      ev.src_qpn != qp->attr_.dest_qp_num) {
    ++stats_.packets_dropped;
    return;
  }
  if (ev.op == PktOp::kAck || ev.op == PktOp::kReadResp) {
    OnResponse(qp, ev);
  } else {
    OnRequest(qp, ev);
  }
}

void FabricImpl::SendReadResponses(QpImpl* qp, const Ev& req) {
  const uint32_t n = req.aux;
  const uint32_t mtu = qp->PathMtuBytes();
  for (uint32_t i = 0; i < n; ++i) {
    Ev r{};
    r.op = PktOp::kReadResp;
    r.flags = static_cast<uint8_t>((i == 0 ? kPktFirst : 0) |
                                   (i + 1 == n ? kPktLast : 0));
    r.src_node = qp->dev_->node_;
    r.dst_node = qp->dest_node_;
    r.src_qpn = qp->qp_num();
    r.dst_qpn = qp->attr_.dest_qp_num;
    r.psn = PsnAdd(req.psn, i);
    r.offset = static_cast<uint64_t>(i) * mtu;
    const uint64_t left = req.offset > r.offset ? req.offset - r.offset
                                                : 0;  // req.offset = length
    r.length = static_cast<uint32_t>(std::min<uint64_t>(left, mtu));
    r.wqe_seq = req.wqe_seq;
    Transmit(r, r.length);
  }
}

void FabricImpl::OnRequest(QpImpl* qp, const Ev& ev) {
  const int32_t diff = PsnDiff(ev.psn, qp->epsn_);
  if (diff < 0) {
    // Duplicate: re-execute a read (its responses may have been lost), else
    // re-acknowledge.
    if (ev.op == PktOp::kReadReq) {
      QpImpl* req_qp = dev(ev.src_node)->QpByNum(ev.src_qpn);
      SendWqe* w = req_qp ? req_qp->FindWqe(ev.wqe_seq) : nullptr;
      if (w && RemoteTarget(qp, w->rkey, w->remote_addr, w->length,
                            transport::kAccessRemoteRead)) {
        SendReadResponses(qp, ev);
      }
      return;
    }
    SendAck(qp, Syndrome::kAck, PsnAdd(qp->epsn_, kPsnMask), 0);
    return;
  }
  if (diff > 0) {
    if (!qp->nak_sent_) {
      qp->nak_sent_ = true;
      SendAck(qp, Syndrome::kNakSeq, qp->epsn_, 0);
    }
    return;
  }
  qp->nak_sent_ = false;
  QpImpl* req_qp = dev(ev.src_node)->QpByNum(ev.src_qpn);
  SendWqe* w = req_qp ? req_qp->FindWqe(ev.wqe_seq) : nullptr;
  if (w == nullptr) {
    ++stats_.packets_dropped;  // the requester's WR is gone; see the file
                               // comment.
    return;
  }
  const bool last = (ev.flags & kPktLast) != 0;
  // A responder error: NAK the requester, complete the receive in progress (if
  // any) with `local_status` (kSuccess: none is involved), and move this QP to
  // ERROR.
  auto fail = [&](Syndrome syn, WcStatus local_status) {
    SendAck(qp, syn, ev.psn, 0);
    if (local_status != WcStatus::kSuccess && qp->recv_active_) {
      qp->recv_active_ = false;
      qp->CompleteRecvError(qp->active_.wr_id, local_status, kVendorLocal);
    }
    qp->ToError();
  };
  // Payload bytes of this packet.
  // Payload bytes of this packet, contiguous: in the inline copy, in the one
  // requester SGE that holds them all, or gathered into staging_. `private`:
  // not user memory (the inline copy or staging_), so it cannot overlap the
  // destination.
  const uint8_t* data = staging_.data();
  bool data_private = true;
  if (ev.op != PktOp::kReadReq && ev.length > 0) {
    if (w->send_flags & transport::kSendInline) {
      data = req_qp->InlineData(ev.wqe_seq) + ev.offset;
    } else {
      const Sge* sges = req_qp->SendSges(ev.wqe_seq);
      // Pump checked the SGEs at the first transmission; only a deregistration
      // since then can make them fail.
      if (w->mr_checked != req_qp->dev_->mr_epoch_ + 1 &&
          CheckSges(req_qp->dev_, req_qp->pd_, sges, w->num_sge, 0) < 0) {
        ++stats_.packets_dropped;  // deregistered since it was posted
        return;
      }
      data = InOneSge(sges, w->num_sge, ev.offset, ev.length);
      if (data != nullptr) {
        data_private = false;
      } else {
        Gather(sges, w->num_sge, ev.offset, staging_.data(), ev.length);
        data = staging_.data();
      }
    }
  }
  switch (ev.op) {
    case PktOp::kSend: {
      if (ev.flags & kPktFirst) {
        if (!qp->FetchRecv()) {
          SendAck(qp, Syndrome::kNakRnr, ev.psn, qp->attr_.min_rnr_timer);
          return;
        }
        if (qp->active_capacity_ == UINT64_MAX) {
          fail(Syndrome::kNakRemOp, WcStatus::kLocProtErr);
          return;
        }
      }
      if (!qp->recv_active_) {
        // A middle/last packet with no message in progress: only possible after
        // the responder was reset mid-message. Dropped; the requester's retry
        // sorts it out.
        ++stats_.packets_dropped;
        return;
      }
      if (qp->active_bytes_ + ev.length > qp->active_capacity_ ||
          (last && ev.offset + ev.length > qp->active_capacity_)) {
        fail(Syndrome::kNakInvReq, WcStatus::kLocLenErr);
        return;
      }
      PlaceBytes(qp->active_sges_.data(), qp->active_.num_sge, ev.offset, data,
                 ev.length, data_private);
      qp->active_bytes_ = ev.offset + ev.length;
      qp->epsn_ = PsnAdd(qp->epsn_, 1);
      if (last) {
        qp->recv_active_ = false;
        WorkCompletion wc{};
        wc.wr_id = qp->active_.wr_id;
        wc.opcode = WcOpcode::kRecv;
        wc.byte_len = static_cast<uint32_t>(ev.offset + ev.length);
        wc.qp_num = qp->qp_num();
        wc.src_qp = ev.src_qpn;
        wc.slid = static_cast<uint16_t>(ev.src_node + 1);
        if (ev.flags & kPktImm) {
          wc.wc_flags = transport::kWcWithImm;
          wc.imm_data = w->imm;
        }
        SendAck(qp, Syndrome::kAck, ev.psn, 0);
        Completed(qp->recv_cq_, wc, qp);
      }
      return;
    }
    case PktOp::kWrite: {
      uint8_t* target = RemoteTarget(qp, w->rkey, w->remote_addr, w->length,
                                     transport::kAccessRemoteWrite);
      if (target == nullptr) {
        fail(Syndrome::kNakRemAccess, WcStatus::kSuccess);
        return;
      }
      const bool with_imm = (ev.flags & kPktImm) != 0;
      if (last && with_imm) {
        if (!qp->FetchRecv()) {
          SendAck(qp, Syndrome::kNakRnr, ev.psn, qp->attr_.min_rnr_timer);
          return;
        }
        if (qp->active_capacity_ == UINT64_MAX) {
          fail(Syndrome::kNakRemOp, WcStatus::kLocProtErr);
          return;
        }
      }
      if (ev.length > 0) std::memmove(target + ev.offset, data, ev.length);
      qp->epsn_ = PsnAdd(qp->epsn_, 1);
      if (last) {
        SendAck(qp, Syndrome::kAck, ev.psn, 0);
        if (with_imm) {
          qp->recv_active_ = false;
          WorkCompletion wc{};
          wc.wr_id = qp->active_.wr_id;
          wc.opcode = WcOpcode::kRecvRdmaWithImm;
          wc.byte_len = static_cast<uint32_t>(w->length);
          wc.qp_num = qp->qp_num();
          wc.src_qp = ev.src_qpn;
          wc.slid = static_cast<uint16_t>(ev.src_node + 1);
          wc.wc_flags = transport::kWcWithImm;
          wc.imm_data = w->imm;
          Completed(qp->recv_cq_, wc, qp);
        }
      }
      return;
    }
    case PktOp::kReadReq: {
      if (!RemoteTarget(qp, w->rkey, w->remote_addr, w->length,
                        transport::kAccessRemoteRead)) {
        fail(Syndrome::kNakRemAccess, WcStatus::kSuccess);
        return;
      }
      qp->epsn_ = PsnAdd(qp->epsn_, ev.aux);
      SendReadResponses(qp, ev);
      return;
    }
    default:
      return;
  }
}

void FabricImpl::OnResponse(QpImpl* qp, const Ev& ev) {
  if (qp->attr_.qp_state != QpState::kRts &&
      qp->attr_.qp_state != QpState::kSqd)
    return;
  if (ev.op == PktOp::kReadResp) {
    SendWqe* w = qp->FindWqe(ev.wqe_seq);
    if (w == nullptr || w->opcode != WrOpcode::kRdmaRead ||
        ev.psn != PsnAdd(w->first_psn, w->read_done)) {
      return;  // stale or out of order: the ack timer recovers.
    }
    qp->ImplicitAck(w->first_psn);
    QpImpl* resp_qp = dev(ev.src_node)->QpByNum(ev.src_qpn);
    const uint8_t* src =
        resp_qp ? RemoteTarget(resp_qp, w->rkey, w->remote_addr, w->length,
                               transport::kAccessRemoteRead)
                : nullptr;
    if (src == nullptr) return;  // responder MR vanished: treat as lost
    const Sge* sges = qp->SendSges(ev.wqe_seq);
    if (w->mr_checked != qp->dev_->mr_epoch_ + 1 &&
        CheckSges(qp->dev_, qp->pd_, sges, w->num_sge,
                  transport::kAccessLocalWrite) < 0) {
      w->error = WcStatus::kLocProtErr;
      qp->Retire();
      return;
    }
    PlaceBytes(sges, w->num_sge, ev.offset, src + ev.offset, ev.length,
               /*src_private=*/false);
    ++w->read_done;
    // A valid response is forward progress: retry_cnt counts timeouts in a
    // row without any (so a long READ over a lossy link is not failed for
    // needing more than retry_cnt rounds in total).
    qp->retry_left_ = qp->attr_.retry_cnt;
    if (w->read_done == w->npkts) {
      qp->ImplicitAck(PsnAdd(w->first_psn, w->npkts));
      qp->retry_left_ = qp->attr_.retry_cnt;
      qp->Retire();
      qp->ArmTimer();
      qp->Pump();
    }
    return;
  }
  const Syndrome syn = static_cast<Syndrome>(ev.syndrome);
  if (PsnDiff(ev.psn, qp->next_psn_) >= 0)
    return;  // acknowledges nothing we sent
  switch (syn) {
    case Syndrome::kAck: {
      const uint32_t before = qp->una_psn_;
      qp->ImplicitAck(PsnAdd(ev.psn, 1));
      if (qp->una_psn_ != before) {
        qp->retry_left_ = qp->attr_.retry_cnt;
        qp->rnr_left_ = qp->attr_.rnr_retry;
      }
      qp->Retire();
      qp->ArmTimer();
      qp->Pump();
      return;
    }
    case Syndrome::kNakSeq:
      if (PsnDiff(ev.psn, qp->una_psn_) < 0) return;  // stale
      qp->ImplicitAck(ev.psn);
      qp->Retire();
      if (qp->attr_.qp_state == QpState::kError || qp->rnr_wait_) return;
      ++stats_.retransmits;
      qp->GoBack(ev.psn);
      qp->Pump();
      return;
    case Syndrome::kNakRnr: {
      if (PsnDiff(ev.psn, qp->una_psn_) < 0 || qp->rnr_wait_) return;
      qp->ImplicitAck(ev.psn);
      qp->Retire();
      if (qp->attr_.qp_state == QpState::kError) return;
      if (qp->attr_.rnr_retry != 7) {
        if (qp->rnr_left_ == 0) {
          qp->ErrorHead(WcStatus::kRnrRetryExcErr, kVendorRnr);
          return;
        }
        --qp->rnr_left_;
      }
      qp->rnr_wait_ = true;
      qp->timer_deadline_ns_ = 0;
      ScheduleQpTimer(EvKind::kRnrTimer, qp->dev_->node_, qp->qp_num(),
                      now_ns_ + kRnrTimerNs[ev.aux & 31], ev.psn);
      return;
    }
    case Syndrome::kNakInvReq:
    case Syndrome::kNakRemAccess:
    case Syndrome::kNakRemOp: {
      if (PsnDiff(ev.psn, qp->una_psn_) < 0) return;
      qp->ImplicitAck(ev.psn);
      qp->Retire();
      if (qp->attr_.qp_state == QpState::kError) return;
      const WcStatus st = syn == Syndrome::kNakInvReq ? WcStatus::kRemInvReqErr
                          : syn == Syndrome::kNakRemAccess
                              ? WcStatus::kRemAccessErr
                              : WcStatus::kRemOpErr;
      qp->ErrorHead(st, kVendorRemote);
      return;
    }
  }
}

void FabricImpl::OnUd(QpImpl* qp, const Ev& ev) {
  if (qp->qp_type() != QpType::kUd || ev.psn != qp->attr_.qkey) {
    ++stats_.packets_dropped;  // wrong type or Q_Key mismatch: silently
                               // discarded.
    return;
  }
  if (!qp->FetchRecv()) {
    ++stats_.packets_dropped;  // no receive request: UD drops.
    return;
  }
  qp->recv_active_ = false;
  if (qp->active_capacity_ == UINT64_MAX) {
    qp->CompleteRecvError(qp->active_.wr_id, WcStatus::kLocProtErr,
                          kVendorLocal);
    return;
  }
  if (qp->active_capacity_ < kGrhBytes + ev.length) {
    qp->CompleteRecvError(qp->active_.wr_id, WcStatus::kLocLenErr,
                          kVendorLocal);
    return;
  }
  // GRH: RoCEv2 over IPv4 leaves the first 20 bytes undefined (poisoned here),
  // then the IPv4 header.
  uint8_t* grh = staging_.data();
  std::memset(grh, kGrhPoison, 20);
  uint8_t* ip = grh + 20;
  std::memset(ip, 0, 20);
  const uint32_t total = 20 + 8 + 12 + ev.length + 4;
  ip[0] = 0x45;
  ip[2] = static_cast<uint8_t>(total >> 8);
  ip[3] = static_cast<uint8_t>(total);
  ip[8] = 64;
  ip[9] = 17;  // UDP
  const Gid sg = GidOfNode(ev.src_node);
  const Gid dg = GidOfNode(ev.dst_node);
  std::memcpy(ip + 12, sg.raw + 12, 4);
  std::memcpy(ip + 16, dg.raw + 12, 4);
  if (ev.length > 0) {  // An empty datagram's pool buffer may have no data.
    std::memcpy(grh + kGrhBytes, ud_pool_[ev.aux].bytes.data(), ev.length);
  }
  Scatter(qp->active_sges_.data(), qp->active_.num_sge, 0, grh,
          kGrhBytes + ev.length);
  WorkCompletion wc{};
  wc.wr_id = qp->active_.wr_id;
  wc.opcode = WcOpcode::kRecv;
  wc.byte_len = kGrhBytes + ev.length;
  wc.qp_num = qp->qp_num();
  wc.src_qp = ev.src_qpn;
  wc.slid = static_cast<uint16_t>(ev.src_node + 1);
  wc.wc_flags = transport::kWcGrh;
  if (ev.flags & kPktImm) {
    wc.wc_flags |= transport::kWcWithImm;
    wc.imm_data = static_cast<uint32_t>(ev.offset);
  }
  Completed(qp->recv_cq_, wc, qp);
}

// ------------------------------------------------------------------------------------
// Queue pair.

QpImpl::QpImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index,
               const QpInitAttr& init, uint32_t send_sge_max,
               uint32_t inline_max)
    : dev_(dev),
      pd_(pd),
      index_(index),
      init_(init),
      send_cq_(static_cast<CqImpl*>(init.send_cq)),
      recv_cq_(static_cast<CqImpl*>(init.recv_cq)),
      srq_(static_cast<SrqImpl*>(init.srq)),
      send_sge_max_(send_sge_max),
      inline_max_(inline_max),
      sq_depth_(std::max<uint32_t>(init.cap.max_send_wr, 1)),
      sq_mask_(RingSize(sq_depth_) - 1) {
  sq_.assign(sq_mask_ + 1, SendWqe{});
  sq_sges_.assign((sq_mask_ + 1) * send_sge_max_, Sge{});
  sq_inline_.assign((sq_mask_ + 1) * inline_max_, 0);
  if (srq_ == nullptr) {
    rq_.Init(std::max<uint32_t>(init.cap.max_recv_wr, 1),
             init.cap.max_recv_sge);
    active_sges_.resize(init.cap.max_recv_sge);
  } else {
    active_sges_.resize(srq_->ring_.sge_max());
  }
  attr_.cap = init.cap;
  attr_.port_num = 1;
  path_mtu_bytes_ = ComputePathMtuBytes();
}

uint32_t QpImpl::ComputePathMtuBytes() const {
  return std::min(transport::MtuBytes(attr_.path_mtu),
                  dev_->fabric_->PathMtu(dev_->node_, dest_node_));
}

void QpImpl::CompleteSend(const SendWqe& w, WcStatus status,
                          uint32_t vendor_err) {
  WorkCompletion wc{};
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.qp_num = qp_num();
  if (status == WcStatus::kSuccess) {
    switch (w.opcode) {
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaWriteWithImm:
        wc.opcode = WcOpcode::kRdmaWrite;
        break;
      case WrOpcode::kRdmaRead:
        wc.opcode = WcOpcode::kRdmaRead;
        wc.byte_len = static_cast<uint32_t>(w.length);
        break;
      default:
        wc.opcode = WcOpcode::kSend;
    }
  } else {
    wc.vendor_err = vendor_err;
  }
  dev_->fabric_->Completed(send_cq_, wc, this);
}

void QpImpl::CompleteRecvError(uint64_t wr_id, WcStatus status,
                               uint32_t vendor_err) {
  WorkCompletion wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.qp_num = qp_num();
  wc.vendor_err = vendor_err;
  dev_->fabric_->Completed(recv_cq_, wc, this);
}

bool QpImpl::FetchRecv() {
  FabricImpl* f = dev_->fabric_;
  if (f->now() < f->node(dev_->node_).stall_until_ns) return false;
  if (srq_ != nullptr) {
    if (!srq_->ring_.Pop(&active_, active_sges_.data())) return false;
    if (srq_->limit_ != 0 && srq_->ring_.count() < srq_->limit_) {
      srq_->limit_ = 0;
      dev_->Raise(AsyncEventType::kSrqLimitReached, 0, 0, srq_->index_);
    }
  } else if (!rq_.Pop(&active_, active_sges_.data())) {
    return false;
  }
  recv_active_ = true;
  active_bytes_ = 0;
  const int64_t cap = CheckSges(dev_, pd_, active_sges_.data(), active_.num_sge,
                                transport::kAccessLocalWrite);
  active_capacity_ = cap < 0 ? UINT64_MAX : static_cast<uint64_t>(cap);
  return true;
}

void QpImpl::ImplicitAck(uint32_t psn_next) {
  if (PsnDiff(psn_next, una_psn_) > 0 && PsnDiff(psn_next, next_psn_) <= 0) {
    una_psn_ = psn_next;
  }
}

void QpImpl::Retire() {
  assert(sq_head_ <= sq_assigned_ && sq_assigned_ <= sq_tail_);
  assert(sq_tail_ - sq_head_ <= sq_depth_);
  while (sq_head_ < sq_assigned_) {
    SendWqe& w = Slot(sq_head_);
    if (w.error != WcStatus::kSuccess) {
      ErrorHead(w.error, kVendorLocal);
      return;
    }
    bool done;
    if (init_.qp_type == QpType::kUd) {
      done = w.done;
    } else if (w.opcode == WrOpcode::kRdmaRead) {
      done = w.read_done == w.npkts;
    } else {
      done = PsnDiff(PsnAdd(w.first_psn, w.npkts), una_psn_) <= 0;
    }
    if (!done) break;
    ++sq_head_;
    if (Signaled(w)) CompleteSend(w, WcStatus::kSuccess, 0);
    if (attr_.qp_state == QpState::kError)
      return;  // the completion overran its CQ
  }
  if (attr_.qp_state == QpState::kSqd && sq_head_ == sq_assigned_ &&
      !drained_reported_) {
    drained_reported_ = true;
    if (attr_.en_sqd_async_notify)
      dev_->Raise(AsyncEventType::kSqDrained, qp_num(), 0, 0);
  }
}

void QpImpl::ArmTimer() {
  const uint64_t to = AckTimeoutNs();
  FabricImpl* f = dev_->fabric_;
  if (to == 0 || rnr_wait_ || sq_head_ >= sq_assigned_) {
    timer_deadline_ns_ = 0;
    return;
  }
  timer_deadline_ns_ = f->now() + to;
  if (!timer_pending_) {
    timer_pending_ = true;
    f->ScheduleQpTimer(EvKind::kAckTimer, dev_->node_, qp_num(),
                       timer_deadline_ns_, 0);
  }
}

void QpImpl::GoBack(uint32_t psn) {
  for (uint64_t i = sq_head_; i < sq_assigned_; ++i) {
    const SendWqe& w = Slot(i);
    const int32_t d = PsnDiff(psn, w.first_psn);
    if (d >= 0 && d < static_cast<int32_t>(w.npkts)) {
      tx_wqe_ = i;
      tx_pkt_ = w.opcode == WrOpcode::kRdmaRead ? 0 : static_cast<uint32_t>(d);
      return;
    }
  }
  tx_wqe_ = sq_assigned_;
  tx_pkt_ = 0;
}

void QpImpl::Pump() {
  assert(sq_head_ <= tx_wqe_ || tx_wqe_ >= sq_assigned_ ||
         sq_head_ == sq_tail_);
  assert(tx_wqe_ <= sq_tail_ && sq_assigned_ <= sq_tail_);
  const QpState s = attr_.qp_state;
  if ((s != QpState::kRts && s != QpState::kSqd) || rnr_wait_) return;
  FabricImpl* f = dev_->fabric_;
  bool sent = false;
  const uint32_t mtu = PathMtuBytes();
  // Retransmissions may still run below a WR that failed its local checks;
  // nothing at or after it is sent.
  while (tx_wqe_ < sq_tail_ && !(tx_blocked_ && tx_wqe_ >= blocked_at_)) {
    SendWqe& w = Slot(tx_wqe_);
    if (tx_wqe_ == sq_assigned_) {
      if (s == QpState::kSqd) break;
      // A fenced WR waits until every earlier RDMA READ has completed; a READ
      // waits while max_rd_atomic reads are outstanding (the responder's
      // resources, IB C9-150).
      if ((w.send_flags & transport::kSendFence) ||
          w.opcode == WrOpcode::kRdmaRead) {
        uint32_t reads_outstanding = 0;
        for (uint64_t i = sq_head_; i < tx_wqe_; ++i) {
          const SendWqe& r = Slot(i);
          if (r.opcode == WrOpcode::kRdmaRead && r.read_done != r.npkts)
            ++reads_outstanding;
        }
        if ((w.send_flags & transport::kSendFence) && reads_outstanding > 0)
          break;
        if (w.opcode == WrOpcode::kRdmaRead &&
            reads_outstanding >= std::max<uint32_t>(attr_.max_rd_atomic, 1)) {
          break;
        }
      }
      // Local checks the HCA makes as it starts the WR.
      WcStatus err = WcStatus::kSuccess;
      if (!(w.send_flags & transport::kSendInline)) {
        const uint32_t need =
            w.opcode == WrOpcode::kRdmaRead ? transport::kAccessLocalWrite : 0;
        if (CheckSges(dev_, pd_, SendSges(tx_wqe_), w.num_sge, need) < 0) {
          err = WcStatus::kLocProtErr;
        } else {
          w.mr_checked = dev_->mr_epoch_ + 1;
        }
      }
      if (init_.qp_type == QpType::kUd && err == WcStatus::kSuccess) {
        if (w.length > f->PathMtu(dev_->node_, w.ud_node) ||
            w.length > transport::MtuBytes(f->config().active_mtu)) {
          err = WcStatus::kLocLenErr;
        }
      }
      if (err != WcStatus::kSuccess) {
        w.error = err;
        tx_blocked_ = true;
        blocked_at_ = tx_wqe_;
        // It completes in error (and the QP leaves RTS) once every WR before it
        // has completed: Retire reaches it in order.
        ++sq_assigned_;
        break;
      }
      w.first_psn = next_psn_;
      if (init_.qp_type == QpType::kUd) {
        w.npkts = 1;
      } else {
        w.npkts = w.length == 0
                      ? 1
                      : static_cast<uint32_t>((w.length + mtu - 1) / mtu);
      }
      next_psn_ = PsnAdd(next_psn_, w.npkts);
      ++sq_assigned_;
      tx_pkt_ = 0;
    }
    Ev p{};
    p.src_node = dev_->node_;
    p.src_qpn = qp_num();
    p.wqe_seq = w.seq;
    if (init_.qp_type == QpType::kUd) {
      p.op = PktOp::kUdSend;
      p.dst_node = w.ud_node;
      p.dst_qpn = w.ud_qpn;
      p.psn = w.ud_qkey;
      p.length = static_cast<uint32_t>(w.length);
      if (w.opcode == WrOpcode::kSendWithImm) {
        p.flags = kPktImm;
        p.offset = w.imm;
      }
      p.aux = f->UdAlloc(w.length);
      if (w.send_flags & transport::kSendInline) {
        std::memcpy(f->Ud(p.aux).bytes.data(), InlineData(tx_wqe_), w.length);
      } else {
        Gather(SendSges(tx_wqe_), w.num_sge, 0, f->Ud(p.aux).bytes.data(),
               w.length);
      }
      const uint64_t seq = w.seq;
      f->Transmit(p, p.length);
      Ev done{};
      done.kind = EvKind::kUdSendDone;
      done.src_node = dev_->node_;
      done.src_qpn = qp_num();
      done.wqe_seq = seq;
      f->Schedule(std::max(f->now(), f->node(dev_->node_).port_free_ns), done);
      ++tx_wqe_;
      continue;
    }
    p.dst_node = dest_node_;
    p.dst_qpn = attr_.dest_qp_num;
    const bool imm = w.opcode == WrOpcode::kSendWithImm ||
                     w.opcode == WrOpcode::kRdmaWriteWithImm;
    if (w.opcode == WrOpcode::kRdmaRead) {
      p.op = PktOp::kReadReq;
      p.psn = w.first_psn;
      p.aux = w.npkts;
      p.offset = w.length;  // the read length travels in `offset`
      p.flags = kPktFirst | kPktLast;
      f->Transmit(p, 16);
      sent = true;
      ++tx_wqe_;
      tx_pkt_ = 0;
      continue;
    }
    p.op = (w.opcode == WrOpcode::kSend || w.opcode == WrOpcode::kSendWithImm)
               ? PktOp::kSend
               : PktOp::kWrite;
    for (; tx_pkt_ < w.npkts; ++tx_pkt_) {
      p.psn = PsnAdd(w.first_psn, tx_pkt_);
      p.offset = static_cast<uint64_t>(tx_pkt_) * mtu;
      p.length =
          static_cast<uint32_t>(std::min<uint64_t>(w.length - p.offset, mtu));
      p.flags = static_cast<uint8_t>((tx_pkt_ == 0 ? kPktFirst : 0) |
                                     (tx_pkt_ + 1 == w.npkts ? kPktLast : 0) |
                                     (imm ? kPktImm : 0));
      f->Transmit(p, p.length);
    }
    sent = true;
    ++tx_wqe_;
    tx_pkt_ = 0;
  }
  if (sent && (timer_deadline_ns_ == 0)) ArmTimer();
  if (tx_blocked_) Retire();
}

void QpImpl::ErrorHead(WcStatus status, uint32_t vendor_err) {
  if (sq_head_ < sq_tail_) {
    const SendWqe w = Slot(sq_head_);
    ++sq_head_;
    if (init_.qp_type == QpType::kUd) {
      CompleteSend(w, status, vendor_err);
      if (attr_.qp_state != QpState::kError) ToSqe();
      return;
    }
    CompleteSend(w, status, vendor_err);
  }
  ToError();
}

void QpImpl::FlushSend() {
  // Completions may overrun the CQ and re-enter ToError; sq_head_ advances
  // first.
  while (sq_head_ < sq_tail_) {
    const SendWqe w = Slot(sq_head_);
    ++sq_head_;
    CompleteSend(w, WcStatus::kWrFlushErr, kVendorFlush);
  }
  sq_assigned_ = tx_wqe_ = sq_tail_;
  tx_pkt_ = 0;
}

void QpImpl::FlushRecv() {
  if (recv_active_) {
    recv_active_ = false;
    CompleteRecvError(active_.wr_id, WcStatus::kWrFlushErr, kVendorFlush);
  }
  if (srq_ != nullptr)
    return;  // an SRQ's requests belong to the SRQ, not to this QP
  RecvWqe r;
  while (rq_.Pop(&r, active_sges_.data())) {
    CompleteRecvError(r.wr_id, WcStatus::kWrFlushErr, kVendorFlush);
  }
}

void QpImpl::ToError() {
  if (attr_.qp_state == QpState::kError) return;
  attr_.qp_state = QpState::kError;
  rnr_wait_ = false;
  timer_deadline_ns_ = 0;
  FlushSend();
  FlushRecv();
  if (srq_ != nullptr && !last_wqe_reported_) {
    last_wqe_reported_ = true;
    dev_->Raise(AsyncEventType::kQpLastWqeReached, qp_num(), 0, 0);
  }
}

void QpImpl::ToSqe() {
  attr_.qp_state = QpState::kSqe;
  tx_blocked_ = false;
  FlushSend();
}

void QpImpl::DiscardAll() {
  // Sequence numbers keep counting, so packets still on the wire never match a
  // new WR.
  sq_head_ = sq_assigned_ = tx_wqe_ = sq_tail_;
  tx_pkt_ = 0;
  rq_.Clear();
  recv_active_ = false;
  rnr_wait_ = false;
  tx_blocked_ = false;
  timer_deadline_ns_ = 0;
  nak_sent_ = false;
  last_wqe_reported_ = false;
  drained_reported_ = false;
}

// The kernel's qp_state_table, for RC (index 0) and UD (index 1).
struct Transition {
  bool valid;
  uint32_t req[2];
  uint32_t opt[2];
};

constexpr uint32_t kRtsOptRc =
    transport::kQpCurState | transport::kQpAltPath | transport::kQpAccessFlags |
    transport::kQpMinRnrTimer | transport::kQpPathMigState;
constexpr uint32_t kUdOpt = transport::kQpCurState | transport::kQpQkey;

constexpr Transition
    kTable[transport::kQpStateCount][transport::kQpStateCount] = {
        // from RESET
        {{true, {0, 0}, {0, 0}},
         {true,
          {transport::kQpPkeyIndex | transport::kQpPort |
               transport::kQpAccessFlags,
           transport::kQpPkeyIndex | transport::kQpPort | transport::kQpQkey},
          {0, 0}},
         {},
         {},
         {},
         {},
         {}},
        // from INIT
        {{true, {0, 0}, {0, 0}},
         {true,
          {0, 0},
          {transport::kQpPkeyIndex | transport::kQpPort |
               transport::kQpAccessFlags,
           transport::kQpPkeyIndex | transport::kQpPort | transport::kQpQkey}},
         {true,
          {transport::kQpAv | transport::kQpPathMtu | transport::kQpDestQpn |
               transport::kQpRqPsn | transport::kQpMaxDestRdAtomic |
               transport::kQpMinRnrTimer,
           0},
          {transport::kQpAltPath | transport::kQpAccessFlags |
               transport::kQpPkeyIndex,
           transport::kQpPkeyIndex | transport::kQpQkey}},
         {},
         {},
         {},
         {true, {0, 0}, {0, 0}}},
        // from RTR
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true,
          {transport::kQpSqPsn | transport::kQpTimeout |
               transport::kQpRetryCnt | transport::kQpRnrRetry |
               transport::kQpMaxQpRdAtomic,
           transport::kQpSqPsn},
          {kRtsOptRc, kUdOpt}},
         {},
         {},
         {true, {0, 0}, {0, 0}}},
        // from RTS
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true, {0, 0}, {kRtsOptRc, kUdOpt}},
         {true,
          {0, 0},
          {transport::kQpEnSqdAsyncNotify, transport::kQpEnSqdAsyncNotify}},
         {},
         {true, {0, 0}, {0, 0}}},
        // from SQD
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true, {0, 0}, {kRtsOptRc, kUdOpt}},
         {true,
          {0, 0},
          {transport::kQpPort | transport::kQpAv | transport::kQpAltPath |
               transport::kQpAccessFlags | transport::kQpPkeyIndex |
               transport::kQpMinRnrTimer | transport::kQpPathMigState |
               transport::kQpTimeout | transport::kQpRetryCnt |
               transport::kQpRnrRetry | transport::kQpMaxQpRdAtomic |
               transport::kQpMaxDestRdAtomic,
           transport::kQpPkeyIndex | transport::kQpQkey}},
         {},
         {true, {0, 0}, {0, 0}}},
        // from SQE
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true, {0, 0}, {0, kUdOpt}},
         {},
         {},
         {true, {0, 0}, {0, 0}}},
        // from ERROR
        {{true, {0, 0}, {0, 0}}, {}, {}, {}, {}, {}, {true, {0, 0}, {0, 0}}},
};

int32_t NodeOfAh(const FabricImpl* f, const AhAttr& ah) {
  if (ah.port_num != 0 && ah.port_num != 1) return -1;
  if (ah.is_global) {
    const uint8_t* g = ah.grh.dgid.raw;
    for (int i = 0; i < 10; ++i) {
      if (g[i] != 0) return -1;
    }
    if (g[10] != 0xff || g[11] != 0xff || g[12] != 10) return -1;
    const int32_t node = (g[13] << 16) | (g[14] << 8) | g[15];
    return node < f->config().nodes ? node : -1;
  }
  if (ah.dlid == 0 || ah.dlid > f->config().nodes) return -1;
  return ah.dlid - 1;
}

Status QpImpl::Modify(const QpAttr& attr, uint32_t mask) {
  if (mask & ~transport::kQpAttrMaskAll)
    return InvalidArgument("unknown attribute mask bits");
  const QpState cur = attr_.qp_state;
  if ((mask & transport::kQpCurState) && attr.cur_qp_state != cur) {
    return InvalidArgument("cur_qp_state does not match the QP's state");
  }
  if ((mask & transport::kQpCurState) && cur != QpState::kRtr &&
      cur != QpState::kRts && cur != QpState::kSqd && cur != QpState::kSqe) {
    return InvalidArgument(
        "cur_qp_state is only accepted from RTR, RTS, SQD or SQE");
  }
  const QpState next = (mask & transport::kQpState) ? attr.qp_state : cur;
  if (static_cast<uint32_t>(next) >= transport::kQpStateCount) {
    return InvalidArgument("unknown qp_state");
  }
  const Transition& t = kTable[static_cast<int>(cur)][static_cast<int>(next)];
  if (!t.valid) return InvalidArgument("illegal QP state transition");
  const int type = init_.qp_type == QpType::kRc ? 0 : 1;
  if ((mask & t.req[type]) != t.req[type]) {
    return InvalidArgument(
        "a required attribute for this transition is missing");
  }
  if (mask & ~(t.req[type] | t.opt[type] | transport::kQpState)) {
    return InvalidArgument(
        "an attribute not allowed for this transition was given");
  }
  // Value checks before anything changes.
  FabricImpl* f = dev_->fabric_;
  if ((mask & transport::kQpPort) && attr.port_num != 1)
    return InvalidArgument("bad port");
  if ((mask & transport::kQpPkeyIndex) && attr.pkey_index != 0) {
    return InvalidArgument("bad pkey_index");
  }
  if ((mask & transport::kQpAccessFlags) &&
      (attr.qp_access_flags & ~transport::kAccessAll)) {
    return InvalidArgument("unknown access flags");
  }
  if ((mask & transport::kQpPathMtu) &&
      (static_cast<uint32_t>(attr.path_mtu) < 1 ||
       static_cast<uint32_t>(attr.path_mtu) > 5)) {
    return InvalidArgument("bad path_mtu");
  }
  if ((mask & transport::kQpTimeout) && attr.timeout > 31) {
    return InvalidArgument("timeout > 31");
  }
  if ((mask & transport::kQpRetryCnt) && attr.retry_cnt > 7) {
    return InvalidArgument("retry_cnt > 7");
  }
  if ((mask & transport::kQpRnrRetry) && attr.rnr_retry > 7) {
    return InvalidArgument("rnr_retry > 7");
  }
  if ((mask & transport::kQpMinRnrTimer) && attr.min_rnr_timer > 31) {
    return InvalidArgument("min_rnr_timer > 31");
  }
  if ((mask & transport::kQpDestQpn) && attr.dest_qp_num > kPsnMask) {
    return InvalidArgument("dest_qp_num beyond 24 bits");
  }
  int32_t av_node = dest_node_;
  if (mask & transport::kQpAv) {
    av_node = NodeOfAh(f, attr.ah_attr);
    if (av_node < 0) return InvalidArgument("ah_attr names no reachable port");
  }
  // Apply.
  if (mask & transport::kQpAccessFlags)
    attr_.qp_access_flags = attr.qp_access_flags;
  if (mask & transport::kQpPkeyIndex) attr_.pkey_index = attr.pkey_index;
  if (mask & transport::kQpPort) attr_.port_num = attr.port_num;
  if (mask & transport::kQpQkey) attr_.qkey = attr.qkey;
  if (mask & transport::kQpAv) {
    attr_.ah_attr = attr.ah_attr;
    dest_node_ = av_node;
  }
  if (mask & transport::kQpPathMtu) attr_.path_mtu = attr.path_mtu;
  if (mask & transport::kQpTimeout) attr_.timeout = attr.timeout;
  if (mask & transport::kQpRetryCnt) {
    attr_.retry_cnt = attr.retry_cnt;
    retry_left_ = attr.retry_cnt;
  }
  if (mask & transport::kQpRnrRetry) {
    attr_.rnr_retry = attr.rnr_retry;
    rnr_left_ = attr.rnr_retry;
  }
  if (mask & transport::kQpRqPsn) {
    attr_.rq_psn = attr.rq_psn & kPsnMask;  // the kernel masks to 24 bits
    epsn_ = attr_.rq_psn;
  }
  if (mask & transport::kQpSqPsn) {
    attr_.sq_psn = attr.sq_psn & kPsnMask;
    next_psn_ = una_psn_ = attr_.sq_psn;
  }
  if (mask & transport::kQpMaxQpRdAtomic)
    attr_.max_rd_atomic = attr.max_rd_atomic;
  if (mask & transport::kQpMaxDestRdAtomic)
    attr_.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & transport::kQpMinRnrTimer)
    attr_.min_rnr_timer = attr.min_rnr_timer;
  if (mask & transport::kQpDestQpn) attr_.dest_qp_num = attr.dest_qp_num;
  if (mask & transport::kQpEnSqdAsyncNotify) {
    attr_.en_sqd_async_notify = attr.en_sqd_async_notify;
  }
  path_mtu_bytes_ = ComputePathMtuBytes();
  if (next == cur) return Status::Ok();
  switch (next) {
    case QpState::kReset:
      DiscardAll();
      attr_.qp_state = QpState::kReset;
      return Status::Ok();
    case QpState::kError:
      ToError();
      return Status::Ok();
    case QpState::kSqd:
      attr_.qp_state = QpState::kSqd;
      drained_reported_ = false;
      Retire();
      return Status::Ok();
    case QpState::kRts:
      attr_.qp_state = QpState::kRts;
      Pump();
      return Status::Ok();
    default:
      attr_.qp_state = next;
      return Status::Ok();
  }
}

Status QpImpl::Query(QpAttr* attr, QpInitAttr* init_attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  *attr = attr_;
  attr->cur_qp_state = attr_.qp_state;
  attr->sq_draining =
      attr_.qp_state == QpState::kSqd && sq_head_ < sq_assigned_;
  if (init_attr != nullptr) *init_attr = init_;
  return Status::Ok();
}

Status ValidateRecvWr(const RecvWr& wr, uint32_t sge_max) {
  if (wr.num_sge < 0 || static_cast<uint32_t>(wr.num_sge) > sge_max) {
    return InvalidArgument("num_sge exceeds max_recv_sge");
  }
  if (wr.num_sge > 0 && wr.sg_list == nullptr)
    return InvalidArgument("sg_list is null");
  return Status::Ok();
}

Status QpImpl::PostRecv(const RecvWr* wr, const RecvWr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  for (; wr != nullptr; wr = wr->next) {
    Status s;
    if (srq_ != nullptr) {
      s = InvalidArgument("QP uses an SRQ: post to the SRQ");
    } else if (attr_.qp_state == QpState::kReset) {
      s = InvalidArgument("QP is in RESET");
    } else {
      s = ValidateRecvWr(*wr, rq_.sge_max());
      if (s.ok() && rq_.full()) s = NoMemory("receive queue full");
    }
    if (!s.ok()) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return s;
    }
    if (attr_.qp_state == QpState::kError) {
      CompleteRecvError(wr->wr_id, WcStatus::kWrFlushErr, kVendorFlush);
      continue;
    }
    rq_.Push(*wr);
  }
  return Status::Ok();
}

Status QpImpl::PostSend(const SendWr* wr, const SendWr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  for (; wr != nullptr; wr = wr->next) {
    Status s;
    const QpState st = attr_.qp_state;
    const bool is_ud = init_.qp_type == QpType::kUd;
    uint64_t total = 0;
    int32_t ud_node = -1;
    if (st == QpState::kReset || st == QpState::kInit || st == QpState::kRtr) {
      s = InvalidArgument("post_send needs RTS, SQD, SQE or ERROR");
    } else if (static_cast<uint32_t>(wr->opcode) >
               static_cast<uint32_t>(WrOpcode::kRdmaRead)) {
      s = InvalidArgument("unknown opcode");
    } else if (is_ud && wr->opcode != WrOpcode::kSend &&
               wr->opcode != WrOpcode::kSendWithImm) {
      s = InvalidArgument("UD supports SEND and SEND_WITH_IMM only");
    } else if (wr->send_flags & ~transport::kSendFlagsAll) {
      s = InvalidArgument("unknown send flags");
    } else if (wr->num_sge < 0 ||
               static_cast<uint32_t>(wr->num_sge) > send_sge_max_) {
      s = InvalidArgument("num_sge exceeds max_send_sge");
    } else if (wr->num_sge > 0 && wr->sg_list == nullptr) {
      s = InvalidArgument("sg_list is null");
    } else if ((sq_tail_ - sq_head_) >= sq_depth_) {
      s = NoMemory("send queue full");
    } else {
      for (int i = 0; i < wr->num_sge; ++i) total += SgeLength(wr->sg_list[i]);
      if (wr->send_flags & transport::kSendInline) {
        if (wr->opcode == WrOpcode::kRdmaRead) {
          s = InvalidArgument("INLINE with RDMA_READ");
        } else if (total > inline_max_) {
          s = InvalidArgument("inline data exceeds max_inline_data");
        }
      }
      if (s.ok() && is_ud) {
        const AhImpl* ah = static_cast<const AhImpl*>(wr->ud.ah);
        if (ah == nullptr) {
          s = InvalidArgument("UD send without an address handle");
        } else if (ah->pd_ != pd_) {
          s = InvalidArgument("address handle from another PD");
        } else {
          ud_node = ah->node_;
        }
      }
      if (s.ok() && total > kSgeZeroLength)
        s = InvalidArgument("message longer than 2^31");
    }
    if (!s.ok()) {
      if (bad_wr != nullptr) *bad_wr = wr;
      Pump();  // the requests before the bad one are posted and start
      return s;
    }
    const uint64_t idx = sq_tail_;
    SendWqe& w = Slot(idx);
    w = SendWqe{};
    w.wr_id = wr->wr_id;
    w.seq = idx;
    w.length = total;
    w.remote_addr = wr->rdma.remote_addr;
    w.rkey = wr->rdma.rkey;
    w.imm = wr->imm_data;
    w.ud_qpn = wr->ud.remote_qpn;
    w.ud_qkey = wr->ud.remote_qkey;
    w.ud_node = ud_node;
    w.num_sge = static_cast<uint32_t>(wr->num_sge);
    w.opcode = wr->opcode;
    w.send_flags = wr->send_flags;
    w.error = WcStatus::kSuccess;
    Sge* sges = &sq_sges_[(idx & sq_mask_) * send_sge_max_];
    for (int i = 0; i < wr->num_sge; ++i) sges[i] = wr->sg_list[i];
    if (wr->send_flags & transport::kSendInline) {
      Gather(wr->sg_list, w.num_sge, 0,
             &sq_inline_[(idx & sq_mask_) * inline_max_], total);
    }
    ++sq_tail_;
    if (st == QpState::kError || st == QpState::kSqe) {
      // Accepted, and flushed at once.
      ++sq_head_;
      sq_assigned_ = tx_wqe_ = sq_tail_;
      CompleteSend(w, WcStatus::kWrFlushErr, kVendorFlush);
      continue;
    }
  }
  Pump();
  return Status::Ok();
}

Status QpImpl::Destroy() {
  DeviceImpl* d = dev_;
  send_cq_->refs_--;
  recv_cq_->refs_--;
  if (srq_ != nullptr) srq_->refs_--;
  pd_->refs_--;
  d->qps_[index_].reset();  // deletes this
  return Status::Ok();
}

// ------------------------------------------------------------------------------------
// SRQ, CQ, MR, AH, PD.

Status SrqImpl::PostRecv(const RecvWr* wr, const RecvWr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  for (; wr != nullptr; wr = wr->next) {
    Status s = ValidateRecvWr(*wr, ring_.sge_max());
    if (s.ok() && ring_.full()) s = NoMemory("SRQ full");
    if (!s.ok()) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return s;
    }
    ring_.Push(*wr);
  }
  return Status::Ok();
}

Status SrqImpl::Modify(const SrqAttr& attr, uint32_t mask) {
  if (mask & ~(transport::kSrqMaxWr | transport::kSrqLimit)) {
    return InvalidArgument("unknown SRQ attribute mask bits");
  }
  if (mask & transport::kSrqMaxWr)
    return InvalidArgument("SRQ resize is not supported");
  if (mask & transport::kSrqLimit) {
    if (attr.srq_limit > ring_.depth())
      return InvalidArgument("srq_limit above max_wr");
    limit_ = attr.srq_limit;
  }
  return Status::Ok();
}

Status SrqImpl::Query(SrqAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  attr->max_wr = ring_.depth();
  attr->max_sge = ring_.sge_max();
  attr->srq_limit = limit_;
  return Status::Ok();
}

Status SrqImpl::Destroy() {
  if (refs_ != 0) return Busy("SRQ still used by a QP");
  pd_->refs_--;
  dev_->srqs_[index_].reset();
  return Status::Ok();
}

int CqImpl::Poll(int num_entries, WorkCompletion* wc) {
  if (num_entries < 0 || (num_entries > 0 && wc == nullptr)) return -EINVAL;
  FabricImpl* f = dev_->fabric_;
  if (num_entries > 0) {
    f->Watch(this);
    if (empty()) f->RunForCq(this);
  }
  int n = 0;
  while (n < num_entries && count_ > 0) {
    wc[n++] = ring_[head_];
    head_ = (head_ + 1) & mask_;
    --count_;
    if (!overflow_.empty()) {
      ring_[(head_ + count_) & mask_] = overflow_.front();
      overflow_.pop_front();
      ++count_;
    }
  }
  if (overflow_.empty() && count_ < capacity_) overrun_reported_ = false;
  if (n > 0) f->ReadFrom(this);
  return n;
}

Status CqImpl::Destroy() {
  if (refs_ != 0) return Busy("CQ still used by a QP");
  if (holding_pos_ >= 0) dev_->fabric_->RemoveHolding(this);
  dev_->cqs_[index_].reset();
  return Status::Ok();
}

Status MrImpl::Destroy() {
  ++dev_->mr_epoch_;
  pd_->refs_--;
  dev_->mrs_[index_].reset();
  return Status::Ok();
}

Status AhImpl::Destroy() {
  pd_->refs_--;
  dev_->ahs_[index_].reset();
  return Status::Ok();
}

StatusOr<MemoryRegion*> PdImpl::RegMr(void* addr, uint64_t length,
                                      uint32_t access) {
  if (addr == nullptr) return InvalidArgument("addr is null");
  if (length == 0) return InvalidArgument("length is 0");
  if (access & ~transport::kAccessAll)
    return InvalidArgument("unknown access flags");
  if ((access &
       (transport::kAccessRemoteWrite | transport::kAccessRemoteAtomic)) &&
      !(access & transport::kAccessLocalWrite)) {
    return InvalidArgument("REMOTE_WRITE/ATOMIC need LOCAL_WRITE");
  }
  if (reinterpret_cast<uint64_t>(addr) + length <
      reinterpret_cast<uint64_t>(addr)) {
    return InvalidArgument("region wraps around");
  }
  const uint32_t index = static_cast<uint32_t>(dev_->mrs_.size());
  if (index >= (1u << 23)) return NoMemory("too many MRs");
  const uint8_t tag = static_cast<uint8_t>(dev_->mr_tag_++ | 1);
  dev_->mrs_.push_back(std::make_unique<MrImpl>(
      dev_, this, index, static_cast<uint8_t*>(addr), length, access, tag));
  ++refs_;
  return static_cast<MemoryRegion*>(dev_->mrs_.back().get());
}

StatusOr<SharedReceiveQueue*> PdImpl::CreateSrq(const SrqAttr& attr) {
  const SimConfig& c = dev_->fabric_->config();
  if (attr.max_wr == 0 || attr.max_wr > static_cast<uint32_t>(c.max_srq_wr)) {
    return InvalidArgument("max_wr out of range");
  }
  if (attr.max_sge > static_cast<uint32_t>(c.max_sge))
    return InvalidArgument("max_sge too big");
  const uint32_t index = static_cast<uint32_t>(dev_->srqs_.size());
  auto srq = std::make_unique<SrqImpl>(dev_, this, index);
  srq->ring_.Init(attr.max_wr, attr.max_sge);
  srq->limit_ = attr.srq_limit;
  dev_->srqs_.push_back(std::move(srq));
  ++refs_;
  return static_cast<SharedReceiveQueue*>(dev_->srqs_.back().get());
}

StatusOr<QueuePair*> PdImpl::CreateQp(const QpInitAttr& attr) {
  const SimConfig& c = dev_->fabric_->config();
  if (attr.qp_type != QpType::kRc && attr.qp_type != QpType::kUd) {
    return InvalidArgument("only RC and UD QPs");
  }
  if (attr.send_cq == nullptr || attr.recv_cq == nullptr)
    return InvalidArgument("CQ is null");
  auto* scq = static_cast<CqImpl*>(attr.send_cq);
  auto* rcq = static_cast<CqImpl*>(attr.recv_cq);
  if (scq->dev_ != dev_ || rcq->dev_ != dev_)
    return InvalidArgument("CQ of another device");
  auto* srq = static_cast<SrqImpl*>(attr.srq);
  if (srq != nullptr && srq->dev_ != dev_)
    return InvalidArgument("SRQ of another device");
  const QpCap& cap = attr.cap;
  if (cap.max_send_wr == 0 ||
      cap.max_send_wr > static_cast<uint32_t>(c.max_qp_wr) ||
      cap.max_send_sge > static_cast<uint32_t>(c.max_sge) ||
      cap.max_inline_data > c.max_inline_data) {
    return InvalidArgument("send queue capabilities out of range");
  }
  if (srq == nullptr && (cap.max_recv_wr == 0 ||
                         cap.max_recv_wr > static_cast<uint32_t>(c.max_qp_wr) ||
                         cap.max_recv_sge > static_cast<uint32_t>(c.max_sge))) {
    return InvalidArgument("receive queue capabilities out of range");
  }
  const uint32_t index = static_cast<uint32_t>(dev_->qps_.size());
  if (index + kQpnBase > kPsnMask) return NoMemory("QP numbers exhausted");
  QpInitAttr init = attr;
  if (srq != nullptr) {
    init.cap.max_recv_wr = 0;
    init.cap.max_recv_sge = 0;
  }
  dev_->qps_.push_back(std::make_unique<QpImpl>(
      dev_, this, index, init, cap.max_send_sge, cap.max_inline_data));
  ++refs_;
  ++scq->refs_;
  ++rcq->refs_;
  if (srq != nullptr) ++srq->refs_;
  return static_cast<QueuePair*>(dev_->qps_.back().get());
}

StatusOr<AddressHandle*> PdImpl::CreateAh(const AhAttr& attr) {
  const int32_t node = NodeOfAh(dev_->fabric_, attr);
  if (node < 0) return InvalidArgument("address names no reachable port");
  const uint32_t index = static_cast<uint32_t>(dev_->ahs_.size());
  dev_->ahs_.push_back(std::make_unique<AhImpl>(dev_, this, index, node));
  ++refs_;
  return static_cast<AddressHandle*>(dev_->ahs_.back().get());
}

Status PdImpl::Destroy() {
  if (refs_ != 0) return Busy("PD still has MRs, QPs, SRQs or AHs");
  dev_->pds_[index_].reset();
  return Status::Ok();
}

// ------------------------------------------------------------------------------------
// Device.

DeviceImpl::DeviceImpl(FabricImpl* fabric, int32_t node)
    : fabric_(fabric), node_(node) {
  std::snprintf(name_, sizeof(name_), "softfab_sim%d", node);
}

Status DeviceImpl::QueryDevice(DeviceAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  const SimConfig& c = fabric_->config();
  *attr = DeviceAttr{};
  attr->node_guid = 0x5f5f000000000000ull | static_cast<uint64_t>(node_);
  attr->max_mr_size = 1ull << 40;
  attr->vendor_id = 0x5f5f;
  attr->vendor_part_id = 1;
  attr->max_qp = static_cast<int32_t>(kPsnMask - kQpnBase);
  attr->max_qp_wr = c.max_qp_wr;
  attr->max_sge = c.max_sge;
  attr->max_cq = 1 << 20;
  attr->max_cqe = c.max_cqe;
  attr->max_mr = 1 << 23;
  attr->max_pd = 1 << 20;
  attr->max_qp_rd_atom = 16;
  attr->max_srq = 1 << 20;
  attr->max_srq_wr = c.max_srq_wr;
  attr->max_srq_sge = c.max_sge;
  attr->max_ah = 1 << 20;
  attr->max_inline_data = c.max_inline_data;
  attr->phys_port_cnt = 1;
  return Status::Ok();
}

Status DeviceImpl::QueryPort(uint8_t port_num, PortAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  if (port_num != 1) return InvalidArgument("the device has port 1 only");
  *attr = PortAttr{};
  attr->state =
      fabric_->node(node_).port_down ? PortState::kDown : PortState::kActive;
  attr->max_mtu = Mtu::k4096;
  attr->active_mtu = fabric_->config().active_mtu;
  attr->gid_tbl_len = 1;
  attr->max_msg_sz = 1u << 31;
  attr->lid = static_cast<uint16_t>(node_ + 1);
  attr->sm_lid = 1;
  return Status::Ok();
}

void DeviceImpl::ScheduleWakeup(uint64_t t_ns) {
  fabric_->ScheduleWakeup(node_, t_ns);
}

Status DeviceImpl::QueryGid(uint8_t port_num, int index, Gid* gid) const {
  if (gid == nullptr) return InvalidArgument("gid is null");
  if (port_num != 1 || index != 0) return InvalidArgument("no such GID");
  *gid = GidOfNode(node_);
  return Status::Ok();
}

StatusOr<ProtectionDomain*> DeviceImpl::AllocPd() {
  const uint32_t index = static_cast<uint32_t>(pds_.size());
  pds_.push_back(std::make_unique<PdImpl>(this, index));
  return static_cast<ProtectionDomain*>(pds_.back().get());
}

StatusOr<CompletionQueue*> DeviceImpl::CreateCq(int32_t cqe) {
  if (cqe < 1 || cqe > fabric_->config().max_cqe)
    return InvalidArgument("cqe out of range");
  const uint32_t index = static_cast<uint32_t>(cqs_.size());
  cqs_.push_back(std::make_unique<CqImpl>(this, index, cqe));
  return static_cast<CompletionQueue*>(cqs_.back().get());
}

Status DeviceImpl::GetAsyncEvent(AsyncEvent* event) {
  if (event == nullptr) return InvalidArgument("event is null");
  if (events_.empty()) return TryAgain("no async event pending");
  *event = events_.front();
  events_.pop_front();
  return Status::Ok();
}

const transport::Clock& DeviceImpl::clock() const { return fabric_->clock(); }

void DeviceImpl::Raise(AsyncEventType type, uint32_t qp_num, uint32_t cq,
                       uint32_t srq) {
  if (events_.size() >= kAsyncEventsMax)
    return;  // bounded; the oldest are kept
  AsyncEvent e{};
  e.event_type = type;
  e.qp_num = qp_num;
  e.cq_handle = cq;
  e.srq_handle = srq;
  e.port_num = 1;
  e.time_ns = fabric_->now();
  events_.push_back(e);
}

}  // namespace

Status ValidateSimConfig(const SimConfig& c) {
  if (c.nodes < 1 || c.nodes > (1 << 16))
    return InvalidArgument("nodes out of range");
  auto bad_node = [&](int32_t n) { return n < 0 || n >= c.nodes; };
  for (const SimLinkConfig& l : c.links) {
    if (bad_node(l.node_a) || bad_node(l.node_b))
      return InvalidArgument("link names no node");
    if (static_cast<uint32_t>(l.mtu) < 1 || static_cast<uint32_t>(l.mtu) > 5) {
      return InvalidArgument("link mtu");
    }
  }
  if (static_cast<uint32_t>(c.default_link.mtu) < 1 ||
      static_cast<uint32_t>(c.default_link.mtu) > 5 ||
      static_cast<uint32_t>(c.active_mtu) < 1 ||
      static_cast<uint32_t>(c.active_mtu) > 5) {
    return InvalidArgument("mtu");
  }
  for (const PacketFault& f : c.faults.packet_faults) {
    if (!(f.probability >= 0.0 && f.probability <= 1.0)) {
      return InvalidArgument("fault probability outside [0, 1]");
    }
    if ((f.src_node >= 0 && bad_node(f.src_node)) ||
        (f.dst_node >= 0 && bad_node(f.dst_node))) {
      return InvalidArgument("fault names no node");
    }
  }
  for (const TimedFault& f : c.faults.timed_faults) {
    if (bad_node(f.node) || (f.peer_node >= 0 && bad_node(f.peer_node))) {
      return InvalidArgument("timed fault names no node");
    }
    if (f.peer_node >= 0) {
      bool listed = false;
      for (const SimLinkConfig& l : c.links) {
        if ((l.node_a == f.node && l.node_b == f.peer_node) ||
            (l.node_b == f.node && l.node_a == f.peer_node)) {
          listed = true;
        }
      }
      if (!listed)
        return InvalidArgument("a path fault needs that pair in `links`");
    }
  }
  if (c.max_qp_wr < 1 || c.max_sge < 1 || c.max_cqe < 1 || c.max_srq_wr < 1 ||
      c.max_inline_data > 4096 || c.poll_events_max < 1) {
    return InvalidArgument("device limits");
  }
  return Status::Ok();
}

std::unique_ptr<SimFabric> CreateSimFabric(const SimConfig& config) {
  if (!ValidateSimConfig(config).ok()) return nullptr;
  return std::make_unique<FabricImpl>(config);
}

}  // namespace softfab::sim
