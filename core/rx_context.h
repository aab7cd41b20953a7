// The receive side of the messaging core: RxContext (posted receives,
// messages that arrived before a receive or are held for FI_BUFFERED_RECV,
// the two matchers and the receive completions), RxClient (what it needs of
// the endpoints receiving through it), the arguments of a receive and a
// buffered receive's context. The code that posts, matches and completes
// receives is in rx_context.cc, peek/claim/discard and buffered receives in
// peek_claim_discard.cc; the endpoint (core/endpoint.h) brings it what
// arrives and moves the data it asks for.
#ifndef SOFTFAB_CORE_RX_CONTEXT_H_
#define SOFTFAB_CORE_RX_CONTEXT_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/flags.h"
#include "core/matcher.h"
#include "core/progress_source.h"
#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

// desc[i], when given, is the registration covering iov[i] (the API layer
// validates it); without one the core copies (eager) or registers on the fly
// (rendezvous).
// One receive of any flavour (recv, recvv, recvmsg, t*).
struct RecvArgs {
  const struct iovec* iov = nullptr;
  size_t iov_count = 0;
  transport::MemoryRegion* const* desc = nullptr;
  uint64_t src = kAnySource;
  uint64_t tag = 0;
  uint64_t ignore = 0;
  void* context = nullptr;
  uint64_t flags = 0;  // kMultiRecv, kPeek, kClaim, kDiscard, kCompletion.
  bool tagged = false;
};

// The op_context of a buffered receive's entry; struct sf_recv_context has
// this layout (fi_msg(3), "Buffered Receives").
struct RecvContext {
  void* ep = nullptr;
  void* context = nullptr;
};

// The source a message carries while the receiving endpoint's AV does not
// hold its sender `peer` (that endpoint's peer index; bit 62 set: never an AV
// index, so no directed receive names it).
inline uint64_t UnknownSource(uint32_t peer) {
  return (uint64_t{1} << 62) | peer;
}

// What a receive context needs of an endpoint that receives through it (the
// endpoint implements it; a shared context has several). Like libfabric's
// peer API (fi_peer(3)): the context owns matching, the endpoint moves the
// data and talks to the sender. `peer` is always the endpoint's own index of
// the sender.
class RxClient : public ProgressSource {
 public:
  // Posts a receive as this endpoint (its checks, then RxContext::Post): what
  // a shared context's own posting runs.
  virtual Status Recv(const RecvArgs& args) = 0;
  // The source address of messages from `peer`, as the endpoint's AV knows it
  // now (UnknownSource(peer) when it does not).
  virtual uint64_t SourceOf(uint32_t peer) const = 0;
  // The endpoint's index of the sender named `name`, if it has one.
  virtual std::optional<uint32_t> PeerNamed(const wire::Name& name) const = 0;
  // `epoch` is always the connection to `peer` that a message came on
  // (ConnectionTable::Peer::epoch): what answers a message of a connection
  // that has since been made anew goes nowhere.
  //
  // READs the rendezvous message `h` from `peer` into receive `rx_index`;
  // its entry (with `cq_flags` added) is written when the READ is done. Of
  // an old connection, the receive fails at once (kProvConnectionReset).
  virtual void StartRead(uint32_t rx_index, uint32_t peer, uint32_t epoch,
                         const wire::Header& h, uint64_t cq_flags) = 0;
  // Sends `op` (kAck or kReadDone) for message `msg_id` back to `peer`.
  virtual void SendAck(uint32_t peer, uint32_t epoch, uint64_t msg_id,
                       wire::Op op) = 0;
  // A message from `peer` kept by the context is gone (taken, claimed,
  // discarded, or dropped with the endpoint); `credit_held`: its credit was
  // withheld until now and returns (to its connection only).
  virtual void UnexpectedReleased(uint32_t peer, uint32_t epoch,
                                  bool credit_held) = 0;

 protected:
  ~RxClient() = default;
};

// The receive side: posted receives, messages that arrived before a receive
// (or are held for FI_BUFFERED_RECV), the two matchers, and the receive
// completions (the CQ it reports to, multi-recv buffers, buffered receives'
// contexts). Every endpoint has one of its own unless it is bound to a shared
// one (fi_srx_context, with rpma_srq_recv's semantics: an unordered set of
// receives that messages arriving at any of its endpoints complete, in any
// order). The endpoints using it are its RxClients: it asks them to READ,
// acknowledge and return credits; they bring it what arrives.
//
// A shared context reports every receive completion to one CQ: the endpoints
// bound to it must bind the same receive CQ (Attach checks), and receives are
// posted once an endpoint using it is enabled. Not thread-safe.
class RxContext {
 public:
  static constexpr size_t kIovMax = 4;

  struct Attr {
    uint32_t size = 256;  // Receives posted at once.
    uint64_t caps = 0;    // kDirectedRecv.
    // FI_BUFFERED_RECV mode (or FI_VARIABLE_MSG): messages land in softfab's
    // buffers and are reported at once; the application claims or discards
    // them (fi_msg(3), "Buffered Receives").
    bool buffered = false;
    size_t buffered_limit = 8192;  // FI_OPT_BUFFERED_LIMIT.
  };

  // A posted receive (a slot of the context's receive table).
  struct RxOp {
    bool used = false;
    void* context = nullptr;
    struct iovec iov[kIovMax];
    size_t iov_count = 0;
    size_t len = 0;       // Sum of iov lengths.
    size_t consumed = 0;  // Multi-recv: bytes handed out.
    uint64_t flags = 0;   // Posting flags.
    bool tagged = false;
    bool wants_entry = false;  // Writes a CQ entry on success.
    // Buffered mode: a tag posted without a buffer; a match reports the
    // message in softfab's buffer (op_context: a RecvContext).
    bool tag_only = false;
    ReceiveHandle handle;  // While queued in the matcher.
    transport::MemoryRegion* desc[kIovMax] = {};
    // Rendezvous READs into this buffer still in flight, and (multi-recv)
    // whether the buffer is released: the release flag goes on the last entry.
    uint32_t reads_pending = 0;
    bool released = false;
    bool release_reported = false;
    // Multi-recv: cancelled while a READ into it was in flight; its cancel
    // entry, which releases it, comes after the last such message's own.
    bool cancelled = false;
    // Multi-recv: it stopped taking kept messages for want of CQ room; until
    // it has taken them (DrainBacklog), later arrivals are kept behind them.
    bool backlogged = false;
  };

  // An endpoint's own context (Endpoint::Create makes it).
  static StatusOr<std::unique_ptr<RxContext>> Create(const Attr& attr);
  // A context endpoints share (fi_srx_context); it must outlive them.
  static StatusOr<std::unique_ptr<RxContext>> CreateShared(const Attr& attr);
  ~RxContext();
  RxContext(const RxContext&) = delete;
  RxContext& operator=(const RxContext&) = delete;

  const Attr& attr() const { return attr_; }
  bool shared() const { return shared_; }
  // The AV its directed receives name (the first endpoint's), or null.
  const AddressVector* av() const { return av_; }
  // What a buffered receive's RecvContext::ep holds for untagged messages
  // (the API's endpoint or shared context object).
  void set_user_handle(void* handle) { user_handle_ = handle; }

  // Posting to the context itself (a shared one): run by the first enabled
  // endpoint bound to it. EINVAL while there is none.
  Status Recv(const RecvArgs& args);
  // fi_cancel on a shared context: ENOENT while no endpoint uses it.
  Status Cancel(void* context);
  Status SetMinMultiRecv(size_t bytes);
  size_t min_multi_recv() const { return min_multi_recv_; }
  // FI_OPT_BUFFERED_LIMIT: up to the endpoints' eager_max; before any
  // endpoint using the context is enabled.
  Status SetBufferedLimit(size_t bytes);
  size_t endpoint_count() const { return endpoints_.size(); }
  // The CQ its completions go to (the one its endpoints bound), or null.
  const CompletionQueue* bound_cq() const { return cq_; }
  // No receive posted and no message held.
  bool Idle() const;
  // Runs every bound endpoint's progress.
  void ProgressAll();
  // Whether a message arriving may write a CQ entry no operation reserved: a
  // multi-recv buffer's per-message entries, a buffered receive's report.
  // Otherwise an arrival uses its receive's reservation, or none (kept as
  // unexpected).
  bool ArrivalsMayNeedRoom() const {
    return attr_.buffered || multi_recv_held_ > 0;
  }

  // ---- For the endpoints using it (core/endpoint.h) ----
  // fi_enable of `ep`, which reports receives to `cq` (`selective`:
  // FI_SELECTIVE_COMPLETION) and names sources in `av`: a shared context checks
  // that its endpoints agree (and that its buffered limit fits `eager_max`);
  // `ep` then runs with the others, in the order they were enabled.
  Status Attach(RxClient* ep, CompletionQueue* cq, bool selective,
                const AddressVector* av, size_t eager_max);
  // `ep` is going away: it no longer runs the context. A shared context then
  // takes back the messages that arrived at it (those reported to the
  // application stay, with no endpoint behind them); ReleaseIfUnused, once
  // its READs are failed, forgets the AV and (idle) the CQ when it was the
  // last user.
  void Detach(RxClient* ep);
  void DropArrivalsOf(RxClient* ep);
  // Drops the messages kept from `ep`'s `peer` on connection `epoch` (not
  // those reported to the application): that peer has connected twice since.
  void DropKeptOf(RxClient* ep, uint32_t peer, uint32_t epoch);
  void ReleaseIfUnused();

  // A receive of any flavour, checked by the endpoint: matched against the
  // messages waiting (oldest first) or queued. EAGAIN when no receive slot or
  // no CQ room is left.
  Status Post(const RecvArgs& args);
  // fi_cancel: the oldest posted receive with `context` completes with
  // ECANCELED. ENOENT when there is none.
  Status CancelPosted(void* context);

  // A message from `source` (tagged or not) arrives: the receive it matches
  // (kNil: none), left in matching until Take.
  uint32_t FindReceive(bool tagged, uint64_t tag, uint64_t source) const {
    auto r = matchers_[tagged].FindReceive(tagged ? tag : 0, source);
    return r ? of_handle_[tagged][r->index] : internal::kNil;
  }
  // Multi-recv buffers that ran out of CQ room with messages kept for them:
  // they take those, oldest first, as far as the room now goes (progress
  // runs it before taking arrivals).
  bool backlogged() const { return backlogged_; }
  void DrainBacklog();
  // The message takes receive `rx_index`: out of matching, unless it is a
  // multi-recv buffer (which takes messages until released).
  void Take(uint32_t rx_index) {
    RxOp& r = ops_[rx_index];
    if (!(r.flags & kMultiRecv)) {
      matchers_[r.tagged].RemoveReceive(r.handle);
      r.handle = ReceiveHandle{};
    }
  }
  RxOp& op(uint32_t rx_index) { return ops_[rx_index]; }
  // Keeps a message `ep` received from its `peer` on connection `epoch`
  // (source `source`) until a receive takes it; `credit_held`: its credit
  // returns only then. Returns its index for ReportBuffered.
  uint32_t AddUnexpected(RxClient* ep, uint32_t peer, uint32_t epoch,
                         bool credit_held, const wire::Header& h,
                         uint64_t source, const uint8_t* payload, size_t len);
  // Buffered mode: reports held message `ui`, with a RecvContext as
  // op_context; `rx_index` is the tag receive it matched (kNil: untagged,
  // reported on arrival).
  void ReportBuffered(uint32_t ui, uint32_t rx_index);
  // Eager data into receive `rx_index` (truncated to fit), and its entry;
  // `source` as RxClient::SourceOf gives it.
  void Deliver(uint32_t rx_index, uint64_t source, const wire::Header& h,
               const uint8_t* payload, size_t payload_len);
  // The common fields of a receive's entry for message `h` from `source`.
  CqEntry RecvEntry(const RxOp& r, uint64_t source,
                    const wire::Header& h) const;
  // Multi-recv bookkeeping after `bytes` more were handed out; true when the
  // buffer was released by it.
  bool ConsumeMulti(uint32_t rx_index, size_t bytes);
  // Writes receive `rx_index`'s entry (an error entry when `err`, carrying
  // `prov_errno`, core/prov_errno.h; 0: the one `err` implies) and frees the
  // receive unless it is a multi-recv buffer that goes on.
  // `claimed`: the entry's room was held for it (ClaimEntryRoom).
  void CompleteRx(uint32_t rx_index, const CqEntry& entry, int err, size_t olen,
                  int prov_errno = 0, bool claimed = false);
  // Holds room in the CQ for one entry written later (CompletionQueue::
  // Claim); false when there is none. ReleaseEntryRoom gives it back unused.
  bool ClaimEntryRoom() { return cq_ != nullptr && cq_->Claim(); }
  void ReleaseEntryRoom() { cq_->Unreserve(); }

 private:
  // The entry of a receive's cancel (fi_cancel's FI_ECANCELED).
  CqEntry CancelEntry(const RxOp& r) const;
  // Writes `e` (an error entry when `err`) to the CQ, on the receive's
  // reservation when `reserved`.
  void PushEntry(const CqEntry& e, int err, size_t olen, int prov_errno,
                 bool reserved);
  struct Unexpected {
    bool used = false;
    bool credit_held = false;  // Its credit returns when it is consumed.
    RxClient* ep = nullptr;    // The endpoint it arrived at.
    uint32_t peer = 0;         // That endpoint's peer index,
    uint32_t epoch = 0;        // and the connection it came on.
    MessageHandle handle;
    wire::Header header;
    std::vector<uint8_t> payload;  // Eager data, or a rendezvous prefix.
    // Buffered mode: its place in recv_contexts_ (kNil: not reported).
    uint32_t recv_context = internal::kNil;
  };

  explicit RxContext(const Attr& attr);
  RxClient* Runner() const {
    return endpoints_.empty() ? nullptr : endpoints_.front();
  }
  // Takes a receive slot for `a` (the caller checked one is free).
  uint32_t NewRxOp(const RecvArgs& a, bool wants_entry);
  // Receive `index` takes the messages kept in `m` that (tag, ignore,
  // source) matches, oldest first: a plain receive one, a multi-recv buffer
  // as many as fit while the CQ has room for their entries (out of room, it
  // is marked backlogged). True: the receive is done taking (it took its
  // message, or the buffer was released); false: it waits in matching.
  bool TakeKept(uint32_t index, TagMatcher& m, uint64_t tag, uint64_t ignore,
                uint64_t source);
  // FI_PEEK, FI_CLAIM, FI_DISCARD and buffered receives
  // (peek_claim_discard.cc).
  Status PeekClaimDiscard(const RecvArgs& args);
  // A kept message was taken (matched, claimed, discarded).
  void ReleaseUnexpected(uint32_t index);
  // The oldest unexpected message in `m` a receive (tag, ignore, source)
  // takes, counting those that arrived before their sender was in the AV
  // (keyed then by the sender's placeholder source) as from the address it
  // was inserted at since.
  std::optional<MessageHandle> FindUnexpectedFor(TagMatcher& m, uint64_t tag,
                                                 uint64_t ignore,
                                                 uint64_t source) const;

  Attr attr_;
  void* user_handle_ = nullptr;
  CompletionQueue* cq_ = nullptr;
  bool selective_ = false;
  const AddressVector* av_ = nullptr;
  // Enabled endpoints, in the order they were enabled: reads progress them.
  ProgressSources<RxClient> endpoints_;
  bool shared_ = false;
  std::vector<RxOp> ops_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> of_handle_[2];  // [tagged] receive handle -> RxOp
  std::vector<Unexpected> unexpected_;
  std::vector<uint32_t> unexpected_free_;
  TagMatcher matchers_[2];  // [0]: untagged (fi_msg), [1]: tagged.
  size_t min_multi_recv_ = 8192;
  // Multi-recv buffers posted whose last (FI_MULTI_RECV) entry is not written.
  uint32_t multi_recv_held_ = 0;
  std::vector<uint32_t> backlog_;  // Backlogged multi-recv slots, in order,
  bool backlogged_ = false;        // and whether there are any.
  // Buffered receives: stable addresses handed out as op_context.
  std::deque<RecvContext> recv_contexts_;
  std::vector<uint32_t> recv_contexts_free_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_RX_CONTEXT_H_
