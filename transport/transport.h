// The abstract, verbs-shaped transport that core/ is written against.
//
// Implemented by backends/sim (a deterministic simulated fabric) and
// backends/verbs (libibverbs). Every enum and struct mirrors the libibverbs
// name and numeric value it stands for (ibv_qp_state, ibv_wc_status,
// IBV_SEND_*, IBV_QP_* ...), so the verbs backend translates field by field and
// a reader who knows verbs knows this header.
//
// Conventions for every interface below:
// - Objects are created by their parent (Device -> ProtectionDomain ->
//   MemoryRegion, ...) and are owned by the device that created them. The
//   caller releases one with its Destroy() method, after which the pointer is
//   dangling; Destroy() fails with EBUSY and changes nothing while other
//   objects still reference it (as ibv_dealloc_pd / ibv_destroy_cq do).
//   Destroying the device (or the backend that owns it) releases everything
//   at once.
// - Errors are softfab::Status values whose code is the errno that the
//   matching ibv_* call returns (EINVAL, ENOMEM, EBUSY, ...). A call that
//   fails changes nothing.
// - Threading: an implementation is NOT thread-safe unless a method says so.
//   The simulator is single-threaded by design (it owns time); the verbs
//   backend serialises per device.
// - Completion: every work request that is accepted (post returned OK)
//   completes exactly once, either with a work completion on its CQ (when
//   signaled, or always when it fails) or, for an unsignaled successful send,
//   silently with the next signaled one.
//
// The backend as a whole (devices per node, the clock, waiting) is
// transport/backend.h.
#ifndef SOFTFAB_TRANSPORT_TRANSPORT_H_
#define SOFTFAB_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <optional>

#include "transport/status.h"

namespace softfab::transport {

// ---------------------------------------------------------------------------------------
// Enumerations (values equal to libibverbs).

enum class QpState : uint8_t {  // ibv_qp_state
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,
  kSqe = 5,
  kError = 6,
};
inline constexpr int kQpStateCount = 7;

enum class QpType : uint8_t {  // ibv_qp_type (UC is not modelled)
  kRc = 2,
  kUd = 4,
};

enum class Mtu : uint8_t {  // ibv_mtu
  k256 = 1,
  k512 = 2,
  k1024 = 3,
  k2048 = 4,
  k4096 = 5,
};
inline constexpr uint32_t MtuBytes(Mtu mtu) {
  return 128u << static_cast<uint32_t>(mtu);
}

enum class PortState : uint8_t {  // ibv_port_state
  kNop = 0,
  kDown = 1,
  kInit = 2,
  kArmed = 3,
  kActive = 4,
};

// ibv_access_flags.
inline constexpr uint32_t kAccessLocalWrite = 1u << 0;
inline constexpr uint32_t kAccessRemoteWrite = 1u << 1;
inline constexpr uint32_t kAccessRemoteRead = 1u << 2;
inline constexpr uint32_t kAccessRemoteAtomic = 1u << 3;
inline constexpr uint32_t kAccessAll = kAccessLocalWrite | kAccessRemoteWrite |
                                       kAccessRemoteRead | kAccessRemoteAtomic;

enum class WrOpcode : uint8_t {  // ibv_wr_opcode (atomics are not modelled)
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
};

// ibv_send_flags.
inline constexpr uint32_t kSendFence = 1u << 0;
inline constexpr uint32_t kSendSignaled = 1u << 1;
// Accepted and carried; it matters only to a CQ armed with
// RequestNotify(solicited_only) on a backend with completion channels.
inline constexpr uint32_t kSendSolicited = 1u << 2;
inline constexpr uint32_t kSendInline = 1u << 3;
inline constexpr uint32_t kSendFlagsAll =
    kSendFence | kSendSignaled | kSendSolicited | kSendInline;

enum class WcStatus : uint32_t {  // ibv_wc_status
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};

enum class WcOpcode : uint32_t {  // ibv_wc_opcode
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

// ibv_wc_flags.
inline constexpr uint32_t kWcGrh = 1u << 0;
inline constexpr uint32_t kWcWithImm = 1u << 1;

// ibv_qp_attr_mask.
inline constexpr uint32_t kQpState = 1u << 0;
inline constexpr uint32_t kQpCurState = 1u << 1;
inline constexpr uint32_t kQpEnSqdAsyncNotify = 1u << 2;
inline constexpr uint32_t kQpAccessFlags = 1u << 3;
inline constexpr uint32_t kQpPkeyIndex = 1u << 4;
inline constexpr uint32_t kQpPort = 1u << 5;
inline constexpr uint32_t kQpQkey = 1u << 6;
inline constexpr uint32_t kQpAv = 1u << 7;
inline constexpr uint32_t kQpPathMtu = 1u << 8;
inline constexpr uint32_t kQpTimeout = 1u << 9;
inline constexpr uint32_t kQpRetryCnt = 1u << 10;
inline constexpr uint32_t kQpRnrRetry = 1u << 11;
inline constexpr uint32_t kQpRqPsn = 1u << 12;
inline constexpr uint32_t kQpMaxQpRdAtomic = 1u << 13;
inline constexpr uint32_t kQpAltPath = 1u << 14;
inline constexpr uint32_t kQpMinRnrTimer = 1u << 15;
inline constexpr uint32_t kQpSqPsn = 1u << 16;
inline constexpr uint32_t kQpMaxDestRdAtomic = 1u << 17;
inline constexpr uint32_t kQpPathMigState = 1u << 18;
inline constexpr uint32_t kQpCap = 1u << 19;
inline constexpr uint32_t kQpDestQpn = 1u << 20;
inline constexpr uint32_t kQpAttrMaskAll = (1u << 21) - 1;

// ibv_srq_attr_mask.
inline constexpr uint32_t kSrqMaxWr = 1u << 0;
inline constexpr uint32_t kSrqLimit = 1u << 1;

enum class AsyncEventType : uint32_t {  // ibv_event_type
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kPathMig = 6,
  kPathMigErr = 7,
  kDeviceFatal = 8,
  kPortActive = 9,
  kPortErr = 10,
  kLidChange = 11,
  kPkeyChange = 12,
  kSmChange = 13,
  kSrqErr = 14,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
  kClientReregister = 17,
  kGidChange = 18,
};

// ---------------------------------------------------------------------------------------
// Plain data (field names and widths as in libibverbs).

struct Gid {  // ibv_gid, 16 raw bytes in network order.
  uint8_t raw[16];
};

struct DeviceAttr {  // subset of ibv_device_attr
  uint64_t node_guid = 0;
  uint64_t max_mr_size = 0;
  uint32_t vendor_id = 0;
  uint32_t vendor_part_id = 0;
  int32_t max_qp = 0;
  int32_t max_qp_wr = 0;
  int32_t max_sge = 0;
  int32_t max_cq = 0;
  int32_t max_cqe = 0;
  int32_t max_mr = 0;
  int32_t max_pd = 0;
  int32_t max_qp_rd_atom = 0;       // READs one QP serves at once
  int32_t max_qp_init_rd_atom = 0;  // READs one QP has in flight at once
  int32_t max_srq = 0;
  int32_t max_srq_wr = 0;
  int32_t max_srq_sge = 0;
  int32_t max_ah = 0;
  uint32_t max_inline_data = 0;  // not in ibv_device_attr; per-QP cap limit.
  uint8_t phys_port_cnt = 0;
};

// ibv_port_attr's link_layer values.
constexpr uint8_t kLinkLayerInfiniBand = 1;
constexpr uint8_t kLinkLayerEthernet = 2;

struct PortAttr {  // subset of ibv_port_attr
  PortState state = PortState::kDown;
  Mtu max_mtu = Mtu::k4096;
  Mtu active_mtu = Mtu::k1024;
  int32_t gid_tbl_len = 0;
  uint16_t pkey_tbl_len = 1;  // P_Key table entries (a QP's pkey_index < it)
  uint32_t max_msg_sz = 0;
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  uint8_t link_layer = kLinkLayerEthernet;  // RoCE
};

struct Sge {  // ibv_sge; length 0 means 2^31 bytes.
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

class AddressHandle;

struct SendWr {  // ibv_send_wr
  uint64_t wr_id = 0;
  const SendWr* next = nullptr;
  const Sge* sg_list = nullptr;
  int32_t num_sge = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t send_flags = 0;
  uint32_t imm_data =
      0;  // opaque 32 bits passed through unchanged (ibv: __be32).
  struct {
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
  } rdma;
  struct {
    AddressHandle* ah = nullptr;
    uint32_t remote_qpn = 0;
    uint32_t remote_qkey = 0;
  } ud;
};

struct RecvWr {  // ibv_recv_wr
  uint64_t wr_id = 0;
  const RecvWr* next = nullptr;
  const Sge* sg_list = nullptr;
  int32_t num_sge = 0;
};

struct WorkCompletion {  // ibv_wc
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t wc_flags = 0;
  uint16_t pkey_index = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;
  uint8_t dlid_path_bits = 0;
};

struct GlobalRoute {  // ibv_global_route
  Gid dgid{};
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 0;
  uint8_t traffic_class = 0;
};

struct AhAttr {  // ibv_ah_attr
  GlobalRoute grh{};
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t src_path_bits = 0;
  uint8_t static_rate = 0;
  uint8_t is_global = 0;
  uint8_t port_num = 0;
};

struct QpCap {  // ibv_qp_cap
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  uint32_t max_inline_data = 0;
};

struct QpAttr {  // ibv_qp_attr (the fields this transport models)
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap{};
  AhAttr ah_attr{};
  uint16_t pkey_index = 0;
  uint8_t en_sqd_async_notify = 0;
  uint8_t sq_draining = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;  // 5-bit IB encoding (table of 32 delays).
  uint8_t port_num = 0;
  uint8_t timeout = 0;    // 4.096 us * 2^timeout; 0 = wait forever.
  uint8_t retry_cnt = 0;  // 0..7
  uint8_t rnr_retry = 0;  // 0..7, 7 = retry forever.
};

class CompletionQueue;
class SharedReceiveQueue;

struct QpInitAttr {  // ibv_qp_init_attr
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  SharedReceiveQueue* srq = nullptr;
  QpCap cap{};
  QpType qp_type = QpType::kRc;
  int32_t sq_sig_all = 0;
};

struct SrqAttr {  // ibv_srq_attr
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
};

struct AsyncEvent {  // ibv_async_event; exactly one of the numbers applies per
                     // type.
  AsyncEventType event_type = AsyncEventType::kCqErr;
  uint32_t qp_num = 0;      // QP_* events
  uint32_t cq_handle = 0;   // CQ_ERR: CompletionQueue::handle()
  uint32_t srq_handle = 0;  // SRQ_*: SharedReceiveQueue::handle()
  uint8_t port_num = 0;     // PORT_* events
  uint64_t time_ns =
      0;  // virtual (sim) or monotonic (verbs) time it was raised.
};

// The address of a port itself (its GID and LID, with a GRH as RoCE needs):
// what a QP or AH uses to reach another QP on the same device.
inline AhAttr SelfAddress(const Gid& gid, uint16_t lid) {
  AhAttr ah;
  ah.is_global = 1;
  ah.grh.dgid = gid;
  ah.grh.hop_limit = 64;
  ah.dlid = lid;
  ah.port_num = 1;
  return ah;
}

// ---------------------------------------------------------------------------------------
// Interfaces.

// A source of time for the transport and everything above it. The simulator's
// clock is virtual (advances only as events run); the verbs backend's is
// CLOCK_MONOTONIC.
class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary epoch; never decreases. Cheap; safe to call
  // anywhere.
  virtual uint64_t NowNs() const = 0;
};

class MemoryRegion {
 public:
  // Keys, bounds and access are fixed for the region's life. The memory stays
  // owned by the caller and must outlive the region.
  virtual uint64_t addr() const = 0;
  virtual uint64_t length() const = 0;
  virtual uint32_t lkey() const = 0;
  virtual uint32_t rkey() const = 0;
  virtual uint32_t access() const = 0;
  // Deregisters (ibv_dereg_mr). Work requests that still name the keys later
  // fail with LOC_PROT_ERR / REM_ACCESS_ERR; the memory is never touched again.
  [[nodiscard]] virtual Status Destroy() = 0;

 protected:
  virtual ~MemoryRegion() = default;
};

class AddressHandle {
 public:
  // ibv_destroy_ah. Posted UD sends that name it must have completed.
  [[nodiscard]] virtual Status Destroy() = 0;

 protected:
  virtual ~AddressHandle() = default;
};

class CompletionQueue {
 public:
  // Moves up to `num_entries` completions, oldest first, into `wc` and returns
  // how many (ibv_poll_cq); a negative value is -errno (EINVAL for bad
  // arguments). Each completion is returned exactly once. On the simulator,
  // polling an empty CQ first runs the fabric's pending events (bounded) until
  // this CQ has something or nothing is pending, so a busy-poll loop written
  // for hardware makes progress.
  virtual int Poll(int num_entries, WorkCompletion* wc) = 0;
  // Overrun: a completion that finds the CQ full raises CQ_ERR (once per
  // episode) and moves the QP that produced it to ERROR with QP_FATAL, as
  // hardware does. The simulator keeps the overflowing completions, in order,
  // so none is lost; real hardware may drop them.
  // The capacity actually granted (>= the requested cqe), as ibv_cq::cqe.
  virtual int32_t cqe() const = 0;
  // A number naming this CQ in async events (AsyncEvent::cq_handle).
  virtual uint32_t handle() const = 0;
  // ibv_destroy_cq: EBUSY while a QP uses it, and (on a completion channel)
  // while events taken from the channel for this CQ are not yet acked.
  [[nodiscard]] virtual Status Destroy() = 0;
  // Arms the CQ (ibv_req_notify_cq): the next completion added to it (with
  // `solicited_only`, the next receive completion of a message sent with
  // kSendSolicited: rxe and the simulator count no others, although the man
  // page adds unsuccessful ones) raises one event on the CQ's completion
  // channel. One arm gives at most one event. The rule for a
  // sleeper: take the event, ack it, re-arm, then poll again before sleeping,
  // since completions that arrived before the arm raise nothing, and an event
  // may arrive with nothing left to poll. Every backend has completion
  // channels; arming a CQ created without one is allowed and raises nothing.
  [[nodiscard]] virtual Status RequestNotify(bool solicited_only) = 0;
  // RequestNotify(false) for a sleeper that takes every event of the CQ's
  // channel before it arms (api/fabric/wait.cc): a backend may skip the arm
  // while the CQ is still armed from before with no event taken since (a
  // system call saved per sleep on a device). An event raised and not yet
  // taken is then still pending on the channel, so no wake-up is lost.
  [[nodiscard]] virtual Status Rearm() { return RequestNotify(false); }
  // Acknowledges `n` events taken for this CQ from its channel
  // (ibv_ack_cq_events). Every event taken must be acked before the CQ is
  // destroyed; acking more than were taken acks only those taken.
  virtual void AckEvents(uint32_t n) = 0;

 protected:
  virtual ~CompletionQueue() = default;
};

// A completion channel (ibv_comp_channel): a file descriptor that becomes
// readable when an armed CQ bound to it (Device::CreateCqOnChannel) gets a
// completion, so a thread can sleep in poll(2)/epoll instead of spinning.
// Owned by the device that created it, like every other object.
class CompletionChannel {
 public:
  // The descriptor to watch for readability; O_NONBLOCK. Owned by the channel.
  virtual int fd() const = 0;
  // Takes one pending event (ibv_get_cq_event without blocking) and names the
  // CQ it is for; EAGAIN when none is pending. Each event taken must later be
  // acked with that CQ's AckEvents(); the CQ is disarmed by the event, so
  // re-arm it (RequestNotify) and poll it again before sleeping.
  [[nodiscard]] virtual Status GetEvent(CompletionQueue** cq) = 0;
  // ibv_destroy_comp_channel: EBUSY while a CQ uses it.
  [[nodiscard]] virtual Status Destroy() = 0;

 protected:
  virtual ~CompletionChannel() = default;
};

class SharedReceiveQueue {
 public:
  // Posts a linked list of receive requests (ibv_post_srq_recv). Stops at the
  // first bad one, stores it in *bad_wr and returns EINVAL (too many SGEs, bad
  // arguments) or ENOMEM (full); the requests before it stay posted, none from
  // it on are. A QP's message takes the request at the head, atomically; which
  // QP gets which buffer is not predictable.
  [[nodiscard]] virtual Status PostRecv(const RecvWr* wr,
                                        const RecvWr** bad_wr) = 0;
  // ibv_modify_srq. kSrqLimit arms the limit (must be <= max_wr):
  // SRQ_LIMIT_REACHED is raised once when the count of posted requests falls
  // below it, and the limit then reads back 0. Resizing (kSrqMaxWr) is not
  // supported and returns EINVAL.
  [[nodiscard]] virtual Status Modify(const SrqAttr& attr,
                                      uint32_t attr_mask) = 0;
  // ibv_query_srq.
  [[nodiscard]] virtual Status Query(SrqAttr* attr) const = 0;
  virtual uint32_t handle() const = 0;
  // ibv_destroy_srq: EBUSY while a QP uses it.
  [[nodiscard]] virtual Status Destroy() = 0;

 protected:
  virtual ~SharedReceiveQueue() = default;
};

class QueuePair {
 public:
  virtual uint32_t qp_num() const = 0;
  virtual QpType qp_type() const = 0;
  // The current state without a query (ibv_qp::state).
  virtual QpState state() const = 0;
  // ibv_modify_qp: transitions and attribute masks as the kernel's
  // qp_state_table (RESET, INIT, RTR, RTS, SQD, SQE, ERROR). An illegal
  // transition, a missing required or an unexpected attribute, or an
  // out-of-range value returns EINVAL and changes nothing. Moving to ERROR
  // flushes every outstanding request (WR_FLUSH_ERR, exactly once each); moving
  // to RESET discards them without completions, as hardware does.
  [[nodiscard]] virtual Status Modify(const QpAttr& attr,
                                      uint32_t attr_mask) = 0;
  // ibv_query_qp: fills every modelled field of *attr and, if non-null,
  // *init_attr.
  [[nodiscard]] virtual Status Query(QpAttr* attr,
                                     QpInitAttr* init_attr) const = 0;
  // ibv_post_send. EINVAL in RESET/INIT/RTR or for a malformed request, ENOMEM
  // when the send queue is full; the first failing request goes to *bad_wr and
  // it and all after it are not posted. In SQE or ERROR requests are accepted
  // and complete with WR_FLUSH_ERR. Buffers (except INLINE ones, copied at
  // post) must stay valid until the request completes.
  [[nodiscard]] virtual Status PostSend(const SendWr* wr,
                                        const SendWr** bad_wr) = 0;
  // ibv_post_recv. EINVAL in RESET or when the QP uses an SRQ; ENOMEM when
  // full. In ERROR the request is accepted and flushed.
  [[nodiscard]] virtual Status PostRecv(const RecvWr* wr,
                                        const RecvWr** bad_wr) = 0;
  // ibv_destroy_qp: outstanding requests are discarded without completions.
  [[nodiscard]] virtual Status Destroy() = 0;

 protected:
  virtual ~QueuePair() = default;
};

class ProtectionDomain {
 public:
  // ibv_reg_mr over caller-owned memory [addr, addr+length). EINVAL for a null
  // address, zero length, unknown access bits, or REMOTE_WRITE without
  // LOCAL_WRITE (as ibv requires).
  [[nodiscard]] virtual StatusOr<MemoryRegion*> RegMr(void* addr,
                                                      uint64_t length,
                                                      uint32_t access) = 0;
  // ibv_create_srq; attr.max_wr/max_sge are bounded by the device attributes
  // (EINVAL).
  [[nodiscard]] virtual StatusOr<SharedReceiveQueue*> CreateSrq(
      const SrqAttr& attr) = 0;
  // ibv_create_qp; the QP starts in RESET. The CQs/SRQ must belong to the same
  // device.
  [[nodiscard]] virtual StatusOr<QueuePair*> CreateQp(
      const QpInitAttr& attr) = 0;
  // ibv_create_ah; EINVAL for an address no port can reach.
  [[nodiscard]] virtual StatusOr<AddressHandle*> CreateAh(
      const AhAttr& attr) = 0;
  // ibv_dealloc_pd: EBUSY while MRs, QPs, SRQs or AHs use it.
  [[nodiscard]] virtual Status Destroy() = 0;

 protected:
  virtual ~ProtectionDomain() = default;
};

// One HCA with one port (port_num 1).
class Device {
 public:
  virtual const char* name() const = 0;
  [[nodiscard]] virtual Status QueryDevice(DeviceAttr* attr) const = 0;
  // EINVAL for a port other than 1.
  [[nodiscard]] virtual Status QueryPort(uint8_t port_num,
                                         PortAttr* attr) const = 0;
  // The port's GID at `index` (0 only): RoCEv2 IPv4-mapped (::ffff:a.b.c.d).
  [[nodiscard]] virtual Status QueryGid(uint8_t port_num, int index,
                                        Gid* gid) const = 0;
  [[nodiscard]] virtual StatusOr<ProtectionDomain*> AllocPd() = 0;
  // ibv_create_cq; EINVAL if cqe < 1 or > max_cqe.
  [[nodiscard]] virtual StatusOr<CompletionQueue*> CreateCq(int32_t cqe) = 0;
  // ibv_create_comp_channel.
  [[nodiscard]] virtual StatusOr<CompletionChannel*> CreateCompChannel() = 0;
  // ibv_create_cq with a completion channel (which may serve several CQs);
  // the channel must come from this device and outlives the CQ (its Destroy
  // fails with EBUSY meanwhile). A null channel is CreateCq(cqe).
  [[nodiscard]] virtual StatusOr<CompletionQueue*> CreateCqOnChannel(
      int32_t cqe, CompletionChannel* channel) = 0;
  // Takes the oldest pending async event (ibv_get_async_event without
  // blocking): EAGAIN when none is pending. Events are queued (bounded; the
  // oldest are kept) in the order raised.
  [[nodiscard]] virtual Status GetAsyncEvent(AsyncEvent* event) = 0;
  // Whether GetAsyncEvent would find an event, where the backend can tell
  // without a system call or a round trip: a simulated fabric from its own
  // state (the same answer at the same point of every run). Empty where it
  // cannot (a real device, whose events only a read of its async fd finds):
  // a caller that asks often then calls GetAsyncEvent now and then, by the
  // clock.
  virtual std::optional<bool> AsyncEventPending() const { return std::nullopt; }
  // The clock that timestamps this device's events.
  virtual const Clock& clock() const = 0;
  // True promises that a poll only reads the CQ (a real device:
  // ibv_poll_cq), so one that returned fewer entries than asked found it
  // empty at that moment, and progress need not poll again at once. False
  // where an empty poll does work of its own: the simulator runs its events
  // there (and its time hold counts the polls), so progress polls until a CQ
  // comes back empty; the shared simulator's client gains nothing either (a
  // second poll after a short one reads a byte, it asks the daemon nothing).
  virtual bool PollsOnlyRead() const { return false; }
  // Asks to regain control at clock time `t_ns` even if nothing else happens
  // by then, for protocol timers (a connection request to retry). The
  // simulator queues an event that does nothing, so polling an empty CQ
  // advances virtual time to it; real hardware needs nothing (its clock runs).
  virtual void ScheduleWakeup(uint64_t t_ns) = 0;
  // A random 64-bit number from the transport's own source: on a simulated
  // fabric a stream per node seeded from the fabric's seed (the same run
  // draws the same numbers), on a device the kernel's (getrandom). The core
  // takes its only randomness from here (a connection's initial PSN).
  virtual uint64_t Random() = 0;

 protected:
  virtual ~Device() = default;
};

}  // namespace softfab::transport

#endif  // SOFTFAB_TRANSPORT_TRANSPORT_H_
