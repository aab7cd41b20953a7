// The receive side of the messaging core: RxContext (posted receives, messages
// that arrived before a receive or are held for FI_BUFFERED_RECV, and the two
// matchers), the arguments of a receive and a buffered receive's context.
// Endpoint (core/endpoint.h) runs it; the code that posts, matches and
// completes receives is in rx_context.cc, peek/claim/discard and buffered
// receives in peek_claim_discard.cc.
#ifndef SOFTFAB_CORE_RX_CONTEXT_H_
#define SOFTFAB_CORE_RX_CONTEXT_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/address_vector.h"
#include "core/completion_queue.h"
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

class Endpoint;

// The receive side: posted receives, messages that arrived before a receive
// (or are held for FI_BUFFERED_RECV) and the two matchers. Every endpoint has
// one of its own unless it is bound to a shared one (fi_srx_context, with
// rpma_srq_recv's semantics: an unordered set of receives that messages
// arriving at any of its endpoints complete, in any order).
//
// A shared context reports every receive completion to one CQ: the endpoints
// bound to it must bind the same receive CQ (Enable checks), and receives are
// posted once an endpoint using it is enabled. Not thread-safe.
class RxContext {
 public:
  struct Attr {
    uint32_t size = 256;  // Receives posted at once.
    uint64_t caps = 0;    // kDirectedRecv.
    // FI_BUFFERED_RECV mode (or FI_VARIABLE_MSG): messages land in softfab's
    // buffers and are reported at once; the application claims or discards
    // them (fi_msg(3), "Buffered Receives").
    bool buffered = false;
    size_t buffered_limit = 8192;  // FI_OPT_BUFFERED_LIMIT.
  };
  // An endpoint's own context (Endpoint::Create makes it).
  static StatusOr<std::unique_ptr<RxContext>> Create(const Attr& attr);
  // A context endpoints share (fi_srx_context); it must outlive them.
  static StatusOr<std::unique_ptr<RxContext>> CreateShared(const Attr& attr);
  ~RxContext();
  RxContext(const RxContext&) = delete;
  RxContext& operator=(const RxContext&) = delete;

  const Attr& attr() const { return attr_; }
  // What a buffered receive's RecvContext::ep holds for untagged messages
  // (the API's endpoint or shared context object).
  void set_user_handle(void* handle) { user_handle_ = handle; }

  // Posting to the context itself (a shared one): run by the first enabled
  // endpoint bound to it. EINVAL while there is none.
  Status Recv(const RecvArgs& args);
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

 private:
  friend class Endpoint;
  static constexpr size_t kIovMax = 4;

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
  };

  struct Unexpected {
    bool used = false;
    bool credit_held = false;  // Its credit returns when it is consumed.
    Endpoint* ep = nullptr;    // The endpoint it arrived at.
    uint32_t peer = 0;         // That endpoint's peer index.
    MessageHandle handle;
    wire::Header header;
    std::vector<uint8_t> payload;  // Eager data, or a rendezvous prefix.
    // Buffered mode: its place in recv_contexts_ (kNil: not reported).
    uint32_t recv_context = internal::kNil;
  };

  explicit RxContext(const Attr& attr);
  Endpoint* Runner() const {
    return endpoints_.empty() ? nullptr : endpoints_.front();
  }

  Attr attr_;
  void* user_handle_ = nullptr;
  CompletionQueue* cq_ = nullptr;
  bool selective_ = false;
  AddressVector* av_ = nullptr;
  // Enabled endpoints, in the order they were enabled: reads progress them.
  ProgressSources<Endpoint> endpoints_;
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
  // Buffered receives: stable addresses handed out as op_context.
  std::deque<RecvContext> recv_contexts_;
  std::vector<uint32_t> recv_contexts_free_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_RX_CONTEXT_H_
