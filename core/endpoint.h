// Endpoint: fi_msg(3) and fi_tagged(3) semantics over core/transport.h.
//
// Protocol (the same on every backend):
// - Wiring (RDM): each endpoint owns a UD QP that serves as its connection
//   manager. The first send to a peer creates an RC QP and sends a CM request
//   (QP number, PSN, credit word, credits granted); the peer connects its own
//   RC QP and replies. Lost datagrams are retried on a timer; a duplicate
//   request gets the same reply. When both sides start at once, the endpoint
//   with the smaller name keeps its request and the other answers it.
// - Eager: messages up to eager_max travel in one SEND (header + payload) into
//   bounce buffers on the endpoint's shared receive queue; the matcher decides
//   where they land, and unexpected ones are copied aside so the bounce buffer
//   goes back at once.
// - Credits: a sender may have at most `credits` SENDs unconsumed at a peer.
//   The receiver returns credits by RDMA-writing a running total into a word
//   the sender registered, so returning credits never consumes a receive and
//   the core never provokes RNR. No credit, no send queue room or no CQ room:
//   the call returns EAGAIN, and reading the CQs frees them (Progress()).
// - Completion levels: inject-complete when the data is copied out of the
//   user's buffer; transmit-complete when the RC SEND is acknowledged;
//   delivery-complete when the target's core has placed or buffered the
//   message and acknowledged it; match-complete when a receive matched it (or
//   it was discarded) and the target acknowledged that.
//
// Where each part lives (laid out like libfabric's rxm provider and UCX's ucp):
// - endpoint.cc: set-up (Create, Init, the UD QP), teardown, binds, options,
//   the peer a destination address names.
// - connection_table.{h,cc}: ConnectionTable, the peers (state of each
//   connection, lookup by name, QP number and AV index, the busy list), the
//   CM channel, an FI_EP_MSG connection's life, and the credits.
// - wireup.cc: the RDM connection manager (requests, replies, retries); RC QP
//   set-up and peer failure for both endpoint types.
// - msg_connection.cc: FI_EP_MSG listen, connect, accept, reject, shutdown.
// - cm_channel.{h,cc}: the CM's datagram slots and request-id sequence.
// - send.cc: every send (checks, tx slots, posting, completion levels), acks.
// - transmit_engine.{h,cc}: TransmitEngine, the sends and READs in flight
//   and the registered bounce slots they use.
// - message_arrival.cc: bounce buffers; acks and messages arriving, handed
//   to the receive context to match or keep; the endpoint's receive checks.
// - rendezvous.cc: the sender exposes its buffer, the target READs it.
// - credits.{h,cc}: Credits, the credit words and their write-backs.
// - rx_context.{h,cc}: RxContext, which owns receives, matching, unexpected
//   messages and receive completions; the endpoint is its RxClient.
// - peek_claim_discard.cc: RxContext's FI_PEEK/FI_CLAIM/FI_DISCARD and
//   buffered receives.
// - dgram.cc: FI_EP_DGRAM over the UD QP.
// - progress.cc: CQ polling and dispatch, timers, queued work.
// - async_events.{h,cc}: the device's asynchronous events (QP fatal, port
//   down, CQ error, device fatal, ...), read for every endpoint on the device
//   and handled by the one they concern.
//
// Not thread-safe: the owner serialises calls (manual progress).
#ifndef SOFTFAB_CORE_ENDPOINT_H_
#define SOFTFAB_CORE_ENDPOINT_H_

#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "core/address_vector.h"
#include "core/async_events.h"
#include "core/completion_queue.h"
#include "core/connection_table.h"
#include "core/credits.h"
#include "core/event_queue.h"
#include "core/flags.h"
#include "core/matcher.h"
#include "core/mr_cache.h"
#include "core/pinned_memory.h"
#include "core/progress_source.h"
#include "core/rx_context.h"  // RecvArgs, RecvContext, RxContext.
#include "core/transmit_engine.h"
#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

enum class EndpointType : uint8_t { kMsg, kRdm, kDgram };

// The class of service of a path: the GRH's traffic class (RoCEv2: the IP TOS
// byte, DSCP << 2 | ECN), the service level (0..15) and the port's P_Key
// table index; all 0 is the fabric's default class.
struct ClassOfService {
  uint8_t traffic_class = 0;
  uint8_t service_level = 0;
  uint16_t pkey_index = 0;
};

struct EndpointAttr {
  EndpointType type = EndpointType::kRdm;
  uint32_t tx_size = 256;  // Sends in flight (including queued ones).
  uint32_t rx_size = 256;  // Receives posted at once.
  // Largest message sent eagerly; larger ones use rendezvous (READ).
  uint32_t eager_max = 8192;
  // Largest message a send may carry (ep_attr->max_msg_size); FI_VARIABLE_MSG
  // lifts it to what one READ reaches (see max_msg_size()).
  uint64_t max_msg_size = 1ull << 30;
  uint32_t inject_size = 256;
  uint32_t credits = 64;      // SENDs in flight to one peer.
  uint32_t peers_max = 1024;  // Connections one endpoint can hold.
  uint64_t op_flags = 0;      // Default completion level (0: transmit).
  uint64_t caps = 0;          // kDirectedRecv, ...
  // CM request retry interval and tries: 200 us x 50 suits the simulator's
  // virtual time; on a real device the API uses 10 ms x 500 (a peer that
  // makes no progress for a while must not fail the connection).
  uint32_t cm_retry_ns = 200000;
  // RC local ack timeout, as the IB exponent: 4.096 us * 2^rc_timeout before
  // an unacknowledged packet is resent (14: 67 ms, a common default).
  uint8_t rc_timeout = 14;
  // RC retries of an unacknowledged packet (ibv_qp_attr.retry_cnt) before
  // the connection fails: 0..6. Not 7: Soft-RoCE (rxe, Linux 6.1) takes 7
  // as "retry forever", so a dead peer would never be detected there.
  uint8_t rc_retry_count = 6;
  uint32_t cm_retries_max = 50;
  // The class of service of every path the endpoint makes (RC connections,
  // datagrams, the CM's own datagrams). The API takes it from sf_fabric_attr
  // or the environment.
  ClassOfService class_of_service;
  // FI_BUFFERED_RECV (or FI_VARIABLE_MSG): see RxContext::Attr::buffered.
  bool buffered = false;
  // Registrations the protocol makes of user buffers (rendezvous) come from
  // here when set (shared by the domain's endpoints, outliving them); null:
  // registered and deregistered per operation.
  MrCache* mr_cache = nullptr;
  // Eager sends and injects small enough for the QP's inline data are posted
  // inline (the device copies them at post); small injects then need no tx
  // slot (PostInject). The backend's choice (BackendTuning::inline_sends).
  bool inline_sends = false;
  // Freed receive buffers go back to the SRQ later, in chains of up to
  // kPollBatch: when a poll finds nothing, and each before any credit for it
  // is written back (Endpoint::Repost). The backend's choice
  // (BackendTuning::defer_reposts).
  bool defer_reposts = false;
  // Where the endpoint's transport CQs raise events for a sleeping waiter
  // (ArmCompletions); null: no channel (the simulator, busy polling).
  transport::CompletionChannel* channel = nullptr;
  // The reader of the device's asynchronous events (core/async_events.h),
  // shared by every endpoint on the device and outliving them; null: the
  // events are not read (a QP the device fails is noticed by its flushed
  // completions alone, a port down not at all).
  AsyncEventDispatcher* async_events = nullptr;
};

// desc[i], when given, is the registration covering iov[i] (the API layer
// validates it); without one the core copies (eager) or registers on the fly
// (rendezvous). RecvArgs, the receive's arguments, is in core/rx_context.h.

// One send of any flavour (send, sendv, sendmsg, inject, senddata, t*).
struct SendArgs {
  const struct iovec* iov = nullptr;
  size_t iov_count = 0;
  transport::MemoryRegion* const* desc = nullptr;
  uint64_t dest = 0;
  uint64_t tag = 0;
  uint64_t data = 0;
  void* context = nullptr;
  uint64_t flags = 0;  // kRemoteCqData, kInject, kCompletion, levels, ...
  bool tagged = false;
};

// The API-facing endpoint (fi_endpoint, fi_passive_ep). It owns its
// transport objects (the UD QP, its two transport CQs, the SRQ and the RC QPs
// through its peers), the receive bounce buffers, the DGRAM state, and three
// parts with headers of their own: the ConnectionTable (peers, connections
// and their wireup, credits), the TransmitEngine (sends and READs in
// flight, tx bounce slots) and, unless it shares one, its RxContext
// (receives and matching). It runs the protocol between them, as the
// RxClient of its receive context and the ProgressSource of the queues it is
// bound to.
class Endpoint final : public RxClient {
 public:
  // Work requests one connection's send queue holds: every post to it
  // (sends, READs, acks, credit writes) waits while peer_send_budget() are
  // outstanding there, control messages while qp_send_depth() are; each RC
  // QP is sized for exactly that (README "Memory per peer").
  static constexpr uint32_t kQpControlSends = 8;
  // The smallest grant a peer gets when full windows have run out (README
  // "Receive buffers and credits").
  static constexpr uint32_t kMinGrant = 2;
  // Sends one connection may have posted and not completed: no more than its
  // credits let be unconsumed at the peer anyway (64 by default, where
  // tx_size, 256, is the whole endpoint's), so a peer's send queue stays
  // small however deep the endpoint's is.
  uint32_t peer_send_budget() const {
    return std::min(attr_.tx_size, attr_.credits);
  }
  uint32_t qp_send_depth() const {
    return peer_send_budget() + kQpControlSends;
  }
  // Whether `wrs` more work requests (signaled or not: a failed one always
  // completes) fit the send CQ's budget: the
  // room every QP of the endpoint shares (all complete into send_cq_), less
  // the CM's own send slots, which are bounded apart. Every post of a send,
  // an ack, a READ or a credit write asks first, and waits (queued, or
  // -FI_EAGAIN to the caller) while it says no; the per-peer bounds above
  // alone let 23 peers of 72 outstanding each overrun the 1,640 entries of
  // the default size (README "Memory per peer"), and an overrun takes every
  // QP of the endpoint down.
  // The last kKickReserve entries are kept for KickUnsignaled, which must
  // be able to post even when unsignaled work holds all the rest.
  bool SendCqHasRoom(uint32_t wrs = 1) const {
    return send_cq_used_ + wrs + kKickReserve <= send_cq_room_;
  }
  // Selective signaling (send_queue.cc): at least one work request in
  // signal_every() to a connection is signaled.
  static constexpr uint32_t kSignalEvery = 16;
  static constexpr uint32_t kKickReserve = 16;
  uint32_t signal_every() const {
    return std::max<uint32_t>(
        1, std::min<uint32_t>(kSignalEvery, peer_send_budget() / 4));
  }
  static constexpr size_t kIovMax = RxContext::kIovMax;
  static constexpr size_t kMinMultiRecvDefault = 8192;

  // Creates an endpoint on `pd`'s device. `pd` must outlive it.
  static StatusOr<std::unique_ptr<Endpoint>> Create(
      transport::Device* device, transport::ProtectionDomain* pd,
      const EndpointAttr& attr);
  ~Endpoint();

  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // fi_ep_bind. `flags`: kSend and/or kRecv, plus kSelectiveCompletion.
  // Reads of `cq` run this endpoint's progress from then on (a CQ the call
  // replaces in both roles stops); `cq` must outlive the endpoint.
  static constexpr uint64_t kSelectiveCompletion = 1ull << 59;
  Status BindCq(CompletionQueue* cq, uint64_t flags);
  Status BindAv(AddressVector* av);
  // fi_enable: needs a bound AV (RDM) and CQs for both directions.
  Status Enable();
  bool enabled() const { return enabled_; }

  const wire::Name& name() const { return name_; }
  const EndpointAttr& attr() const { return attr_; }
  // FI_EP_DGRAM: every buffer starts with this much prefix space, where a
  // received datagram's GRH lands (FI_MSG_PREFIX, msg_prefix_size).
  static constexpr size_t kMsgPrefixBytes = 40;
  size_t msg_prefix_size() const {
    return attr_.type == EndpointType::kDgram ? kMsgPrefixBytes : 0;
  }
  size_t max_msg_size() const {
    if (attr_.type == EndpointType::kDgram) return kMsgPrefixBytes + dgram_mtu_;
    // FI_VARIABLE_MSG lifts the limit as far as one RDMA READ reaches.
    return (attr_.caps & kVariableMsg) ? UINT32_MAX : attr_.max_msg_size;
  }

  Status Send(const SendArgs& args);
  Status Recv(const RecvArgs& args) override;
  // fi_cancel: the oldest posted receive with `context` completes with
  // ECANCELED. ENOENT when there is none.
  Status Cancel(void* context);

  Status SetMinMultiRecv(size_t bytes);
  size_t min_multi_recv() const { return rx_->min_multi_recv(); }
  // fi_ep_bind to a shared receive context (before Enable; not DGRAM).
  Status BindRx(RxContext* rx);
  RxContext* rx_context() const { return rx_; }
  // FI_OPT_BUFFERED_LIMIT of the endpoint's receive context (<= eager_max).
  Status SetBufferedLimit(size_t bytes);
  size_t buffered_limit() const { return rx_->attr().buffered_limit; }
  // FI_OPT_BUFFERED_MIN: a buffered receiver sees at least this many bytes of
  // a rendezvous message at once. Announced to peers when connecting; a
  // rendezvous request carries the larger of both sides' values.
  Status SetBufferedMin(size_t bytes);
  size_t buffered_min() const { return buffered_min_; }

  // Polls the transport and runs the protocol. Run by reads of the queues it
  // is bound to (it registers with them as it binds: BindCq, BindEq, Enable).
  void Progress() override;
  void BeforeSleep() override;
  // Arms the endpoint's transport CQs (EndpointAttr::channel) so that the
  // next completion on either raises an event on the channel. A waiter arms,
  // runs Progress once more (completions that came before the arm raise
  // nothing), then sleeps on the channel's fd. EINVAL without a channel. A
  // CQ armed before with no event taken since stays as it is
  // (transport::CompletionQueue::Rearm): the waiter takes every event first.
  [[nodiscard]] Status ArmCompletions();

  // An asynchronous event of the device, from the dispatcher
  // (core/async_events.h says what each does). True when it concerns this
  // endpoint: the QP, CQ or SRQ it names is ours, or it is the port's or
  // the device's.
  bool OnAsyncEvent(const transport::AsyncEvent& event);

  // ---- FI_EP_MSG: connection management (fi_cm(3)) ----
  // A listener (fi_passive_ep): receives connection requests and reports each
  // as a kEqConnReq event with a ConnRequest. Its name is the address to
  // connect to.
  // It tracks up to `requests_max` connectors at once; an entry is reused
  // once its request was decided and its connector has gone quiet. `like`,
  // when given, lends its channel and CM timing.
  static StatusOr<std::unique_ptr<Endpoint>> CreateListener(
      transport::Device* device, transport::ProtectionDomain* pd,
      uint32_t requests_max = 4096, const EndpointAttr* like = nullptr);
  bool listener() const { return listener_; }
  // The API's object for this endpoint, reported as the events' fid and a
  // buffered receive's RecvContext::ep.
  void set_user_handle(void* handle) { user_handle_ = handle; }
  // fi_ep_bind / fi_pep_bind to an event queue (before connect or listen).
  // Every endpoint type may bind one: FI_EP_MSG endpoints and listeners get
  // their connection events there, and every endpoint its asynchronous
  // errors (port down, its device or queues failing; core/async_events.h).
  Status BindEq(EventQueue* eq);
  // fi_listen.
  Status Listen();
  // fi_connect: to a listener's name, with up to kCmDataMax bytes of private
  // data. kEqConnected (with the acceptor's data) or an error event
  // (ECONNREFUSED, ETIMEDOUT) follows on the bound event queue.
  Status Connect(const wire::Name& to, const void* data, size_t len);
  // fi_accept: this endpoint takes the request; kEqConnected follows once the
  // connector confirms (or its first message arrives).
  Status Accept(const ConnRequest& request, const void* data, size_t len);
  // fi_reject (on the listener that reported the request).
  Status Reject(const ConnRequest& request, const void* data, size_t len);
  // fi_shutdown: the peer gets kEqShutdown; sends still queued fail.
  Status Shutdown();

  // Counters for tests and reports.
  struct Stats {
    uint64_t eagain = 0;
    uint64_t cm_requests = 0;
    uint64_t cm_retries = 0;
    uint64_t credit_writes = 0;
    uint64_t unexpected = 0;
    uint64_t bad_headers = 0;
    // CM datagrams in another version of the format, answered with
    // kVersionRefused.
    uint64_t cm_versions_refused = 0;
    uint64_t dgram_dropped = 0;  // DGRAM: arrived with no receive posted.
    // Messages kept as unexpected right now (a gauge, not a count): at most
    // 2 x credits per peer and connection, two connections' worth.
    uint64_t unexpected_held = 0;
    // Unexpected messages dropped from a peer that sent past its credits.
    uint64_t overrun_dropped = 0;
    // Credit grants made (one per peer connected), and those below `credits`
    // because full windows had run out (GrantFor).
    uint64_t grants = 0;
    uint64_t grants_reduced = 0;
    // Failed RDM connections made anew (ResetPeer).
    uint64_t reconnects = 0;
    // Unexpected messages dropped because their peer connected twice more
    // while they were kept (ResetPeer keeps one connection's worth).
    uint64_t stale_dropped = 0;
    // Receive buffers flushed by a failing QP (and put back).
    uint64_t bounce_flushed = 0;
    // Work requests posted without a completion of their own (selective
    // signaling, send_queue.cc), and the signaled credit writes posted to
    // retire such work that nothing else would (KickUnsignaled).
    uint64_t unsignaled = 0;
    uint64_t kicks = 0;
    // Bounce buffers of one batch of arrivals posted back together, one
    // chain of more than one (FlushReposts).
    uint64_t repost_chains = 0;
    // Injects sent inline without a tx op of their own (PostInject).
    uint64_t injects_inline = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  Endpoint(transport::Device* device, transport::ProtectionDomain* pd,
           const EndpointAttr& attr);
  Status Init();
  Status InitRdm();
  // A UD QP in RTS with our Q_Key (the RDM CM's, or the DGRAM data QP).
  StatusOr<transport::QueuePair*> NewUdQp(uint32_t send_depth,
                                          uint32_t recv_depth);

  using Peer = ConnectionTable::Peer;
  using PeerState = ConnectionTable::PeerState;

  using TxOp = TransmitEngine::TxOp;
  using Read = TransmitEngine::Read;
  using RxOp = RxContext::RxOp;

  // Peers (endpoint.cc; the table is core/connection_table.h).
  StatusOr<uint32_t> PeerFor(uint64_t dest);
  // RxClient: a peer's source address (UnknownSource while the AV does not
  // hold it), and the peer of a name.
  uint64_t SourceOf(uint32_t peer) const override {
    return conns_.SourceOf(av_, peer);
  }
  std::optional<uint32_t> PeerNamed(const wire::Name& name) const override {
    return conns_.Find(name);
  }

  // Sending (send.cc).
  // Enabled, and a usable iov list (what every post checks first).
  Status CheckPostable(const struct iovec* iov, size_t count) const;
  Status CheckSend(const SendArgs& args, size_t* len) const;
  // Takes a tx slot and a CQ reservation for a send of `len` bytes to
  // `peer` (kNil on DGRAM); EAGAIN when either is exhausted.
  StatusOr<uint32_t> AcquireTx(const SendArgs& args, size_t len, uint32_t peer);
  // The CQ reservation every send to `peer` holds, once the tx table has
  // room for it (the caller then takes or lends a place); EAGAIN when either
  // is exhausted.
  Status ReserveSend(uint32_t peer);
  Status PostTx(uint32_t op_index);
  // A plain fi_inject (no fence, no completion flag, at most transmit
  // level, no context: an error entry is made from the wr_id, which has no
  // room for one; an fi_sendmsg with FI_INJECT may carry one) small enough
  // to go inline: PostInject sends it to a connected `peer` that has a
  // credit without a tx op (README "The data path").
  bool InjectsInline(const SendArgs& args, size_t len) const {
    return (args.flags & ~kRemoteCqData) == kInject &&
           args.context == nullptr && attr_.inline_sends &&
           wire::kHeaderBytes + len <= tx_.inline_max() &&
           !(attr_.op_flags & (kDeliveryComplete | kMatchComplete));
  }
  Status PostInject(const SendArgs& args, size_t len, uint32_t peer);
  // Whether PostInject's injects hold a CQ reservation until they retire
  // (all of an endpoint's do, or none: the level is fixed at creation), so
  // tx_.lent() of them hold one now.
  bool InjectsHoldEntries() const {
    return (attr_.op_flags & kCompletionLevels) != kInjectComplete;
  }
  // Posts one SEND of `sge` to `p` as `wr_id` (kind and index; the queue's
  // sequence is added), signaled when `awaited` or the unsignaled run is
  // long enough; on success a credit is spent and the ring holds it.
  Status PostSendWr(Peer& p, uint64_t wr_id, const transport::Sge& sge,
                    bool awaited, bool inline_data);
  // A send's CQ entry (err 0) or error entry, into its reserved room.
  void PushTxEntry(void* context, uint64_t flags, int err, int prov_errno);
  // An error entry carries `prov_errno` (core/prov_errno.h; 0: the one
  // `err` implies).
  void CompleteTx(uint32_t op_index, int err, int prov_errno = 0);
  void MaybeFinishTx(uint32_t op_index);
  // Releases tx slot `index` (and its rendezvous registration).
  void FreeTx(uint32_t index);
  // A registration of a user buffer for the protocol (EndpointAttr::mr_cache,
  // else a fresh one), and its release (rendezvous.cc).
  StatusOr<transport::MemoryRegion*> AcquireMr(const void* addr, uint64_t len,
                                               uint32_t access);
  void ReleaseMr(transport::MemoryRegion* mr);
  void ReleaseRdvMr(TxOp& op);
  // Sends an ack now, or queues it until the peer has a credit again.
  void SendAck(uint32_t peer, uint32_t epoch, uint64_t msg_id,
               wire::Op op = wire::Op::kAck) override;
  Status PostAck(uint32_t peer, uint64_t msg_id, wire::Op op);
  // ---- A connection's send queue (send_queue.cc) ----
  // Whether the next work request to `p` must be signaled: when its own
  // completion is awaited, or the run of unsignaled ones is long enough.
  bool MustSignal(const Peer& p, bool awaited) const {
    return awaited || p.unsignaled_run + 1 >= signal_every();
  }
  // The wr_id the next work request to `p` (or the one `ahead` after it, in
  // a chain) gets: `wr_id` (kind and index) with its queue's post sequence in
  // bits 32-55 (endpoint_common.h).
  static uint64_t Sequenced(const Peer& p, uint64_t wr_id, uint32_t ahead = 0) {
    return wr_id | (uint64_t{(p.sq_seq + ahead) & 0xffffffu} << 32);
  }
  // A work request with that wr_id was posted to `p`: in the ring, and on the
  // send CQ's budget (even unsignaled: a failed one always completes).
  void Posted(Peer& p, uint64_t wr_id, bool signaled) {
    if (p.sq_ring.empty()) [[unlikely]]
      SizeRing(p);
    p.sq_ring[(p.sq_head + p.sq_outstanding) & p.sq_mask] = wr_id;
    ++p.sq_seq;
    ++p.sq_outstanding;
    ++send_cq_used_;
    if (signaled) {
      unsignaled_total_ -= p.unsignaled_run;
      p.unsignaled_run = 0;
    } else {
      ++p.unsignaled_run;
      ++unsignaled_total_;
      ++stats_.unsignaled;
    }
  }
  // Makes `p`'s ring: a power of two at least the QP's depth.
  void SizeRing(Peer& p);
  // A completion for `wr_id` was read on `peer`'s queue: the unsignaled work
  // before it is done (and finished as such), and it leaves the ring.
  void RetireThrough(uint32_t peer, uint64_t wr_id);
  // What a send-side work request's end does (a completion read, or an
  // unsignaled one retired with `cause` 0): finish the op it belongs to.
  void OnSendWrDone(uint64_t wr_id, std::optional<uint32_t> from, int status,
                    int cause);
  // Runs of unsignaled work that nothing retires, when something waits for
  // what they hold (tx slots, CQ reservations, the send CQ's budget, a
  // fence): a signaled credit write to each such peer retires them.
  bool KickWanted() const;
  void KickUnsignaled();
  // A signaled credit write to `peer` (false if it could not be posted).
  bool Kick(uint32_t peer);
  // When `peer` fails: its trailing unsignaled run, already done or about
  // to be flushed, gets a signaled request behind it (FailPeer).
  void RetireUnsignaledOf(uint32_t peer);

  // Rendezvous (rendezvous.cc).
  // Registers (or gathers and registers) the payload of tx op `op_index` for
  // the target to READ, and puts where it is in its header.
  Status ExposeForRead(uint32_t op_index, const SendArgs& args, size_t len);
  // READ the payload into receive `rx_index` (any capacity; truncates), then
  // kReadDone to the sender.
  void StartRead(uint32_t rx_index, uint32_t peer, uint32_t epoch,
                 const wire::Header& h, uint64_t cq_flags) override;
  void OnReadDone(uint32_t read_index, bool ok);
  // One READ work request of `read_index` completed with `status` (a
  // transport::WcStatus; 0: success);
  // the last one ends it.
  void OnReadWrDone(uint32_t read_index, int status);
  // Posts the READs of `read_index`: all of them, or none (EAGAIN) when the
  // send queue lacks room for them all.
  Status PostRead(uint32_t read_index);
  // PostRead, or, when it is refused for a lasting reason, the read's
  // receive fails; false: it waits for room (EAGAIN, ENOMEM).
  bool ReadOrFail(uint32_t read_index);

  // What arrives on RC connections (message_arrival.cc).
  void OnBounce(const transport::WorkCompletion& wc);
  // Whether the message in bounce completion `wc` must wait in held_: it may
  // write an unreserved entry and the receive CQ has no room for one.
  bool ArrivalWaitsForRoom(const transport::WorkCompletion& wc) const;
  // A message arrived from `peer` on connection `epoch` (its current one, or
  // the one before: OnBounce): matched, or kept as unexpected. False when its
  // credit is withheld until a receive takes it.
  bool OnMessage(uint32_t peer, uint32_t epoch, const wire::Header& h,
                 const uint8_t* payload, size_t len);
  Status RepostBounce(uint32_t index);
  uint8_t* BounceAt(uint32_t index) const {
    return rx_chunks_[index / attr_.credits].get() +
           static_cast<size_t>(index % attr_.credits) * rx_slot_bytes_;
  }
  // Bounce buffer `index` as a receive's scatter entry.
  transport::Sge BounceSge(uint32_t index) const {
    return {reinterpret_cast<uint64_t>(BounceAt(index)),
            static_cast<uint32_t>(rx_slot_bytes_),
            rx_chunk_mrs_[index / attr_.credits]->lkey()};
  }
  // Posts one more chunk of bounce buffers, if the SRQ has room for it.
  Status AddBounceChunk();
  // Puts a bounce buffer back on the SRQ; one the SRQ refuses (in error)
  // waits in rx_unposted_ for the next progress.
  void RepostOrKeep(uint32_t index);
  // The same for the buffers of a batch of more than one receive completion
  // (repost_later_). On the simulators (no attr_.defer_reposts) they are
  // gathered while Progress handles the batch, then posted as one chain
  // (FlushReposts) before anything can poll a CQ again or post to the SRQ
  // otherwise: only a poll runs the simulator's events, so the fabric finds
  // the SRQ as it would have with each buffer posted at once; the shared
  // simulator makes one request to its daemon per batch instead of one per
  // buffer. A batch of one is posted at once there: a chain would only cost.
  // With attr_.defer_reposts (a device) the chain gathers across progress
  // calls, every freed buffer going to it (the verbs backend posts it with
  // one ibv_post_srq_recv per 16 buffers): it is posted by the first poll
  // that finds the receive CQ empty (the endpoint has time), when full,
  // before any credit write-back, a kick's included (a write-back gives the
  // peer back every buffer freed so far: none of them may then be off the
  // SRQ, so a peer's send never finds its buffer missing, no RNR wait),
  // before a grant is decided and before a chunk is added. Buffers the SRQ
  // once refused (rx_unposted_) are retried one by one beside the chain. A busy
  // ping-pong then posts a message's buffer while it waits for the next one,
  // not between the message's arrival and its completion reaching the
  // application (a device's progress stops polling at a short batch, so the
  // arrival's call makes no empty poll).
  void Repost(uint32_t index) {
    if (repost_later_) {
      RepostLater(index);
    } else {
      RepostOrKeep(index);
    }
  }
  void RepostLater(uint32_t index);
  void FlushReposts() {
    if (repost_count_ != 0) PostReposts();
  }
  void PostReposts();
  // The credits we grant `peer` (decided once, in its first CM message that
  // carries a grant): `credits`, or half of the buffers left beyond
  // kMinGrant for every other peer the endpoint may yet hold if that is less,
  // never below kMinGrant. Held against the buffers until the peer fails
  // (ReleaseGrant).
  uint32_t GrantFor(uint32_t peer);
  void ReleaseGrant(uint32_t peer);

  // Receives (message_arrival.cc): the endpoint's checks, then its receive
  // context (core/rx_context.h) posts and matches.
  Status CheckRecv(const RecvArgs& args) const;
  // RxClient: a kept message from `peer` is gone.
  void UnexpectedReleased(uint32_t peer, uint32_t epoch,
                          bool credit_held) override;

  // Writes back the credits owed to peers that can take a WRITE now
  // (progress.cc).
  void FlushCreditWrites();
  // Whether Progress polls the send CQ this time (progress.cc), and the
  // poll: its completions, in batches into `wc`, until it is empty.
  bool SendCqWorthALook();
  void PollSendCq(transport::WorkCompletion* wc);

  // Connection management (wireup.cc).
  Status StartConnect(uint32_t peer);
  Status ConnectToSelf(uint32_t peer);
  Status SendCm(uint32_t peer, wire::CmType type);
  void OnCm(const uint8_t* bytes, size_t len);
  // Connects `peer`'s RC QP to the one `their` CM message names, with the
  // path MTU and READs in flight both ends allow.
  Status ConnectQp(Peer& peer, const wire::CmMessage& their);
  // Fills what a CM message says of this endpoint's port and device (MTU,
  // READs in flight), from which the other end connects.
  void DescribePort(wire::CmMessage* m) const;
  // The initial send PSN of a new RC connection: random (drawn from the
  // transport, seeded on a simulator), as rdma_cm makes it, so that packets
  // of an earlier connection on the same QP numbers are not taken as this
  // one's.
  uint32_t NewPsn() {
    return static_cast<uint32_t>(device_->Random()) & 0xFFFFFF;
  }
  // A CM datagram from `from` in another version of the format: answered
  // with kVersionRefused, nothing else changes.
  void RefuseVersion(const wire::CmPrefix& from);
  // A peer refused our version: a connection we were making to it fails,
  // its sends with SF_PROV_CM_VERSION.
  void OnVersionRefused(const wire::CmPrefix& from);
  // An address handle no longer wanted: destroyed once no CM send that may
  // use it is in flight (a UD send looks its address up when it goes), or
  // with the endpoint.
  void RetireAh(transport::AddressHandle* ah);
  void DestroyRetiredAhs();
  StatusOr<transport::QueuePair*> NewRcQp();
  void OnConnected(uint32_t peer, bool ready);
  // Marks `peer` failed (its queued sends complete with `err` and the cause
  // `prov_errno`, core/prov_errno.h); on an FI_EP_MSG endpoint also reports
  // it on the event queue.
  void FailPeer(uint32_t peer, int err, int prov_errno,
                const wire::CmMessage* cm = nullptr);
  // RDM reconnection (as rxm's): whether failed `peer` may be connected
  // anew now: the endpoint is not broken and nothing of the old connection
  // is still to be reported (its operations have completed).
  bool CanReconnect(uint32_t peer) const;
  // Destroys a failed peer's QP and resets what its connection held
  // (credits, grant, counters), leaving it idle for a new connection.
  void ResetPeer(uint32_t peer);
  // The time an RC connection retries an unanswered packet before it fails
  // (ack timeout x tries).
  uint64_t RcRetryNs() const;

  // Asynchronous events (async_events.cc).
  // The peer whose RC QP is `qp_num`, connected or not.
  std::optional<uint32_t> PeerOfQp(uint32_t qp_num) const;
  // The endpoint can no longer be used (its CQ, SRQ, CM QP or device
  // failed): an error event, every peer failed with `prov_errno`, and every
  // later post refused (EIO, BrokenReason).
  void Break(int prov_errno);
  // The cause to report for a failure of `peer`'s connection that the
  // transport reported as `prov_errno`: the device's event, read first,
  // when one failed the connection (the flushed completions it leaves name
  // none); kProvPortDown for a want of answers while the local port is down
  // (or came up less than a retry time ago); else `prov_errno` unchanged.
  int Explain(uint32_t peer, int prov_errno);
  // The messages of refused posts: to a peer failed with `prov_errno`, and
  // on an endpoint broken with it.
  static const char* RefusalFor(int prov_errno);
  static const char* BrokenReason(int prov_errno);

  // The address of the endpoint named `name` as this endpoint's port reaches
  // it, in the endpoint's class of service (core/internal/endpoint_common.h).
  transport::AhAttr AddressOf(const wire::Name& name) const;
  // The next CM retry for `p`, cm_retry_ns after `now`.
  void ArmCmTimer(Peer& p, uint64_t now);
  // Resends the requests of connecting peers whose timer ran out; fails
  // those out of retries, and accepted ones whose peer never spoke (sends
  // waiting) by their deadline.
  void RetryConnects(uint64_t now);
  wire::CmType RequestType() const {
    return attr_.type == EndpointType::kMsg ? wire::CmType::kConnect
                                            : wire::CmType::kRequest;
  }

  // FI_EP_MSG connections (msg_connection.cc).
  void OnMsgCm(const wire::CmMessage& m);
  void PushEvent(uint32_t type, int err, const uint8_t* data, size_t len,
                 int prov_errno = 0);
  void MsgTimers(uint64_t now);
  // Connect/Accept preconditions (`not_msg`: the error for a wrong type).
  Status CheckStartCm(const char* not_msg, const void* data, size_t len) const;
  void SetCmData(const void* data, size_t len);  // Private data we send.
  // A listener's peer entry that may serve a new connector (table full).
  std::optional<uint32_t> ListenerSlotToReuse(uint64_t now) const;

  // FI_EP_DGRAM (dgram.cc).
  Status InitDgram();
  Status SendDgram(const SendArgs& args, size_t len);
  void OnDgram(const transport::WorkCompletion& wc);

  transport::Device* device_;
  const bool polls_only_read_;  // device_->PollsOnlyRead(), asked once
  transport::ProtectionDomain* pd_;
  EndpointAttr attr_;
  bool enabled_ = false;
  // Why the endpoint can no longer be used (Break); 0 while it can.
  int broken_cause_ = 0;
  wire::Name name_;
  transport::PortAttr port_{};
  // READs one of our QPs may have in flight / serve (the device's limits).
  uint8_t reads_initiated_ = 1;
  uint8_t reads_served_ = 1;
  transport::Gid gid_{};

  CompletionQueue* tx_cq_ = nullptr;
  CompletionQueue* rx_cq_ = nullptr;
  bool tx_selective_ = false;
  bool rx_selective_ = false;
  std::unique_ptr<RxContext> own_rx_;
  RxContext* rx_ = nullptr;  // own_rx_ or a shared context.
  size_t buffered_min_ = 0;
  // FI_EP_MSG.
  bool listener_ = false;
  EventQueue* eq_ = nullptr;
  void* user_handle_ = nullptr;
  AddressVector* av_ = nullptr;

  transport::CompletionQueue* send_cq_ = nullptr;
  transport::CompletionQueue* recv_cq_ = nullptr;
  // The send CQ's budget (SendCqHasRoom): signaled work requests posted
  // outside the CM and not yet read back from send_cq_, and how many may be.
  // A completion the CQ gives back frees its entry, flushed ones too; a QP
  // is destroyed only with nothing outstanding (CanReconnect) or with the
  // endpoint.
  uint32_t send_cq_used_ = 0;
  // Where PostInject puts an inject's header and payload together (copied
  // by the device when posted: inline).
  std::vector<uint8_t> inject_stage_;
  uint32_t send_cq_room_ = 0;
  // Unsignaled work requests with no signaled one after them, all peers
  // (the sum of their unsignaled_run), and whether a post was refused or a
  // fence waits since the last kick (KickWanted).
  uint32_t unsignaled_total_ = 0;
  bool kick_wanted_ = false;
  // Progress's looks at a send CQ that can hold only failures
  // (SendCqWorthALook): calls skipped since the last (set to the limit when
  // the CQs are armed, so that the next call looks).
  static constexpr uint32_t kQuietSendCqLooks = 16;
  uint32_t quiet_send_cq_skips_ = 0;
  transport::SharedReceiveQueue* srq_ = nullptr;
  // The UD QP: the connection manager's (RDM, FI_EP_MSG) or the data QP
  // (DGRAM).
  transport::QueuePair* cm_qp_ = nullptr;
  // Peers, their connections (the CM's channel, an FI_EP_MSG connection's
  // life) and credits.
  ConnectionTable conns_;

  // Sends in flight, their bounce slots, and READs in flight.
  TransmitEngine tx_;

  // Registered receive memory (the CM's and the credits' are in conns_, the
  // tx slots' in tx_).
  // Receive bounce buffers, a chunk of `credits` of them per connected peer
  // (up to rx_bounce_max_), so an idle endpoint holds none.
  std::vector<PinnedBlock> rx_chunks_;
  std::vector<transport::MemoryRegion*> rx_chunk_mrs_;
  uint32_t rx_bounce_max_ = 0;
  size_t rx_slot_bytes_ = 0;
  uint32_t rx_bounce_count_ = 0;
  // Credits granted to the peers that hold a grant (PeerCredits::grant_held)
  // and how many they are: never more than the buffers (rx_bounce_max_).
  uint32_t rx_granted_ = 0;
  uint32_t rx_granted_peers_ = 0;
  std::vector<uint32_t> rx_unposted_;  // Bounce buffers the SRQ refused.
  // DGRAM: receive buffers (GRH + path MTU each) and an AH per destination.
  PinnedVector<uint8_t> dgram_rx_;
  transport::MemoryRegion* dgram_mr_ = nullptr;
  size_t dgram_slot_bytes_ = 0;
  uint32_t dgram_mtu_ = 0;
  std::map<uint64_t, transport::AddressHandle*> dgram_ah_;
  // Addresses of senders of another CM version met outside the connection
  // table, to refuse them by (at most kRefusedNamesMax, then no answer).
  static constexpr size_t kRefusedNamesMax = 16;
  std::map<wire::Name, transport::AddressHandle*> refused_ah_;
  std::vector<transport::AddressHandle*> retired_ah_;  // RetireAh

  // Completions Progress takes from a CQ at a time.
  static constexpr int kPollBatch = 32;
  std::array<transport::WorkCompletion, kPollBatch> wc_;  // that batch
  // RepostLater's chain: at most one request per completion of a batch.
  std::array<transport::RecvWr, kPollBatch> repost_wr_;
  std::array<transport::Sge, kPollBatch> repost_sge_;
  uint32_t repost_count_ = 0;
  // Set while Progress handles such a batch; always with defer_reposts.
  bool repost_later_ = false;
  // Bounce completions of messages waiting for receive CQ room, in arrival
  // order (at most the bounce buffers there are: theirs are not reposted).
  std::deque<transport::WorkCompletion> held_;

  Stats stats_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_ENDPOINT_H_
