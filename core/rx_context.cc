// The receive side (rxm_msg.c and rxm_tagged.c's receive paths; UCX's
// tag_recv.c): RxContext itself, the endpoints attached to it, posting a
// receive (taking unexpected messages that wait for it, oldest first),
// multi-recv buffers, fi_cancel, messages kept until a receive takes them,
// eager delivery into a receive, and writing receive completions.
#include "core/rx_context.h"

#include <algorithm>
#include <cstring>

#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

// ------------------------------------------------------------------- RxContext

RxContext::RxContext(const Attr& attr) : attr_(attr) {
  ops_.resize(attr_.size);
  for (uint32_t i = attr_.size; i-- > 0;) free_.push_back(i);
}

RxContext::~RxContext() {
  // Receives still posted give back the CQ slots they reserved.
  if (cq_ == nullptr) return;
  for (const RxOp& r : ops_) {
    if (!r.used) continue;
    cq_->Unreserve();
    // A multi-recv buffer writes unreserved entries until its last.
    if (r.flags & kMultiRecv) cq_->RemoveUnreservedWriter();
  }
}

bool RxContext::Idle() const {
  if (free_.size() != ops_.size()) return false;
  for (const Unexpected& u : unexpected_) {
    if (u.used) return false;
  }
  return true;
}

StatusOr<std::unique_ptr<RxContext>> RxContext::Create(const Attr& attr) {
  if (attr.size == 0 || attr.size > (1u << 20)) {
    return InvalidArgument("receive context size out of range");
  }
  if (attr.buffered_limit == 0) {
    return InvalidArgument("FI_OPT_BUFFERED_LIMIT must be positive");
  }
  std::unique_ptr<RxContext> rx(new RxContext(attr));
  return rx;
}

StatusOr<std::unique_ptr<RxContext>> RxContext::CreateShared(const Attr& attr) {
  auto rx = Create(attr);
  if (rx.ok()) (*rx)->shared_ = true;
  return rx;
}

Status RxContext::Recv(const RecvArgs& args) {
  RxClient* ep = Runner();
  if (ep == nullptr) {
    return Status(kErrOpBadState,
                  "no enabled endpoint uses this shared receive context yet");
  }
  return ep->Recv(args);
}

Status RxContext::Cancel(void* context) {
  if (Runner() == nullptr) {
    return NotFound("no posted receive with that context");
  }
  return CancelPosted(context);
}

Status RxContext::SetMinMultiRecv(size_t bytes) {
  min_multi_recv_ = bytes;
  return Status::Ok();
}

Status RxContext::SetBufferedLimit(size_t bytes) {
  if (!endpoints_.empty()) {
    return Status(kErrOpBadState, "set FI_OPT_BUFFERED_LIMIT before enabling");
  }
  if (bytes == 0) return InvalidArgument("FI_OPT_BUFFERED_LIMIT must be > 0");
  attr_.buffered_limit = bytes;
  return Status::Ok();
}

void RxContext::ProgressAll() { endpoints_.Run(); }

// ------------------------------------------------------------------- endpoints

Status RxContext::Attach(RxClient* ep, CompletionQueue* cq, bool selective,
                         const AddressVector* av, size_t eager_max) {
  if (shared_) {
    if (cq_ != nullptr && (cq_ != cq || selective_ != selective)) {
      return InvalidArgument(
          "endpoints sharing a receive context must bind the same receive CQ "
          "(with the same selective-completion setting)");
    }
    if (av_ != nullptr && av != nullptr && av_ != av) {
      return InvalidArgument(
          "endpoints sharing a receive context must bind the same AV");
    }
    if (attr_.buffered_limit > eager_max) {
      return InvalidArgument(
          "the shared context's FI_OPT_BUFFERED_LIMIT exceeds this endpoint's "
          "eager size");
    }
  }
  cq_ = cq;
  selective_ = selective;
  if (av_ == nullptr) av_ = av;
  endpoints_.Add(ep);
  return Status::Ok();
}

void RxContext::Detach(RxClient* ep) { endpoints_.Remove(ep); }

void RxContext::DropArrivalsOf(RxClient* ep) {
  for (uint32_t i = 0; i < unexpected_.size(); ++i) {
    Unexpected& un = unexpected_[i];
    if (!un.used || un.ep != ep) continue;
    if (un.recv_context != internal::kNil) {
      // Reported to the application, which still holds its buffer and
      // context: kept until claimed or discarded, with no endpoint behind
      // it (its sender is gone with the endpoint).
      un.ep = nullptr;
      continue;
    }
    matchers_[(un.header.flags & wire::kTagged) != 0].RemoveUnexpected(
        un.handle);
    un.credit_held = true;  // Its count goes with the peer.
    ReleaseUnexpected(i);
  }
}

void RxContext::DropKeptOf(RxClient* ep, uint32_t peer, uint32_t epoch) {
  for (uint32_t i = 0; i < unexpected_.size(); ++i) {
    Unexpected& un = unexpected_[i];
    // Reported to the application (buffered) or claimed (FI_PEEK |
    // FI_CLAIM), a message is the application's to claim or discard.
    if (!un.used || un.ep != ep || un.peer != peer || un.epoch != epoch ||
        un.recv_context != internal::kNil) {
      continue;
    }
    const bool tagged = (un.header.flags & wire::kTagged) != 0;
    if (matchers_[tagged].claimed(un.handle)) continue;
    matchers_[tagged].RemoveUnexpected(un.handle);
    ReleaseUnexpected(i);
  }
}

void RxContext::ReleaseIfUnused() {
  if (!endpoints_.empty()) return;
  // The last user left: the context forgets its AV, and its CQ too when
  // nothing posted or held still needs it (those keep the CQ open).
  av_ = nullptr;
  if (Idle()) cq_ = nullptr;
}

// ------------------------------------------------------------------- receive

uint32_t RxContext::NewRxOp(const RecvArgs& a, bool wants_entry) {
  const uint32_t index = free_.back();
  free_.pop_back();
  RxOp& r = ops_[index];
  // Every field is set here (the hot path skips zeroing the whole slot);
  // iov and desc entries past iov_count are never read.
  r.used = true;
  r.context = a.context;
  r.iov_count = a.iov_count;
  std::copy(a.iov, a.iov + a.iov_count, r.iov);
  r.len = IovBytes(a.iov, a.iov_count);
  r.consumed = 0;
  r.flags = a.flags;
  r.tagged = a.tagged;
  r.wants_entry = wants_entry;
  r.tag_only = false;
  r.handle = ReceiveHandle{};
  for (size_t i = 0; i < a.iov_count; ++i) {
    r.desc[i] = a.desc ? a.desc[i] : nullptr;
  }
  r.reads_pending = 0;
  r.released = false;
  r.release_reported = false;
  r.cancelled = false;
  r.backlogged = false;
  return index;
}

Status RxContext::Post(const RecvArgs& a) {
  if (a.flags & (kPeek | kClaim | kDiscard)) return PeekClaimDiscard(a);
  if (free_.empty()) return TryAgain("all receive slots are posted");
  // A backlogged multi-recv buffer, posted earlier, takes its kept messages
  // first: with room left after it, this receive cannot take one of them.
  if (backlogged()) [[unlikely]] {
    DrainBacklog();
  }
  const bool wants_entry = !selective_ || (a.flags & kCompletion) ||
                           (a.flags & kMultiRecv) || attr_.buffered;
  // Like sends, every receive holds a CQ slot for its final entry (an error
  // or a cancel is always reported).
  // A multi-recv buffer registers as a writer of unreserved entries first,
  // so that its own reservation leaves a slot for its first message.
  if (a.flags & kMultiRecv) cq_->AddUnreservedWriter();
  if (Status s = cq_->Reserve(); !s.ok()) {
    if (a.flags & kMultiRecv) cq_->RemoveUnreservedWriter();
    return s;
  }
  const uint32_t index = NewRxOp(a, wants_entry);
  RxOp& r = ops_[index];
  if (a.flags & kMultiRecv) ++multi_recv_held_;
  // Buffered mode: a tagged receive posts a tag, not a buffer.
  r.tag_only = attr_.buffered;

  const uint64_t source = (attr_.caps & kDirectedRecv) ? a.src : kAnySource;
  const uint64_t tag = a.tagged ? a.tag : 0;
  const uint64_t ignore = a.tagged ? a.ignore : 0;
  TagMatcher& m = matchers_[a.tagged];
  if (m.unexpected_count() > 0 && TakeKept(index, m, tag, ignore, source)) {
    return Status::Ok();
  }
  const ReceiveHandle h =
      m.AddReceive({tag, ignore, source, reinterpret_cast<uint64_t>(a.context),
                    (a.flags & kMultiRecv) != 0});
  std::vector<uint32_t>& map = of_handle_[a.tagged];
  if (map.size() <= h.index) map.resize(h.index + 1);
  map[h.index] = index;
  r.handle = h;
  if (r.backlogged) {
    backlog_.push_back(index);
    backlogged_ = true;
  }
  return Status::Ok();
}

bool RxContext::TakeKept(uint32_t index, TagMatcher& m, uint64_t tag,
                         uint64_t ignore, uint64_t source) {
  RxOp& r = ops_[index];
  const bool multi = r.flags & kMultiRecv;
  r.backlogged = false;
  while (true) {
    if (multi && !cq_->HasRoom()) {
      // Its next message would need an entry the CQ has no room for: it and
      // those kept after it wait until the application reads (DrainBacklog).
      r.backlogged = true;
      return false;
    }
    auto u = FindUnexpectedFor(m, tag, ignore, source);
    if (!u) return false;
    const uint32_t ui = static_cast<uint32_t>(m.message(*u).cookie);
    Unexpected& un = unexpected_[ui];
    RxClient* owner = un.ep;  // The endpoint it arrived at.
    if (r.tag_only) {
      ReportBuffered(ui, index);
      return true;
    }
    m.RemoveUnexpected(*u);
    if (un.header.op == wire::Op::kRendezvous) {
      owner->StartRead(index, un.peer, un.epoch, un.header, 0);
    } else {
      Deliver(index, owner->SourceOf(un.peer), un.header, un.payload.data(),
              un.payload.size());
      if (un.header.flags & wire::kAckMatch) {
        owner->SendAck(un.peer, un.epoch, un.header.msg_id, wire::Op::kAck);
      }
    }
    ReleaseUnexpected(ui);
    if (!multi || !r.used || r.released) return true;
  }
}

void RxContext::DrainBacklog() {
  size_t done = 0;
  for (; done < backlog_.size(); ++done) {
    const uint32_t index = backlog_[done];
    RxOp& r = ops_[index];
    // Released or cancelled since (or its slot taken by another receive):
    // nothing to take.
    if (!r.used || r.released) r.backlogged = false;
    if (!r.backlogged) continue;
    TagMatcher& m = matchers_[r.tagged];
    const PostedReceive p = m.receive(r.handle);
    TakeKept(index, m, p.tag, p.ignore, p.source);
    if (r.backlogged) break;  // Out of room again: it and the rest wait.
  }
  backlog_.erase(backlog_.begin(), backlog_.begin() + done);
  backlogged_ = !backlog_.empty();
}

// A message is keyed by its source as the AV knew it when it arrived. One
// that came from a peer not yet inserted carries the peer's placeholder; once
// the peer is inserted, a receive directed to its address takes those too,
// and before any keyed by the address (they arrived earlier). fi_msg(3):
// src_addr is the "source address to receive from" for endpoints with
// FI_DIRECTED_RECV; fabtests' functional/unexpected_msg checks that a message
// received before fi_av_insert matches a directed receive posted after it.
std::optional<MessageHandle> RxContext::FindUnexpectedFor(
    TagMatcher& m, uint64_t tag, uint64_t ignore, uint64_t source) const {
  if (source != kAnySource && av_ != nullptr) {
    if (auto name = av_->Lookup(source)) {
      for (RxClient* e : endpoints_) {
        const std::optional<uint32_t> peer = e->PeerNamed(*name);
        if (!peer) continue;
        auto u = m.FindUnexpected(tag, ignore, UnknownSource(*peer));
        // Placeholders are per endpoint: take it only if it came to `e`.
        if (u && unexpected_[m.message(*u).cookie].ep == e) return u;
      }
    }
  }
  return m.FindUnexpected(tag, ignore, source);
}

CqEntry RxContext::RecvEntry(const RxOp& r, uint64_t src,
                             const wire::Header& h) const {
  CqEntry e;
  e.op_context = r.context;
  e.flags = kRecv | (r.tagged ? kTagged : kMsg) |
            ((h.flags & wire::kHasData) ? kRemoteCqData : 0);
  e.data = h.data;
  e.tag = h.tag;
  e.src_addr = (src >> 62) ? ~uint64_t{0} : src;
  return e;
}

bool RxContext::ConsumeMulti(uint32_t rx_index, size_t bytes) {
  RxOp& r = ops_[rx_index];
  r.consumed += bytes;
  if (r.released || r.len - r.consumed >= min_multi_recv_) return false;
  // Released: out of matching (if it was queued).
  if (r.handle.index != internal::kNil) {
    matchers_[r.tagged].RemoveReceive(r.handle);
    r.handle = ReceiveHandle{};
  }
  r.released = true;
  return true;
}

void RxContext::PushEntry(const CqEntry& e, int err, size_t olen,
                          int prov_errno, bool reserved) {
  if (err == 0) {
    cq_->Push(e, reserved);
  } else {
    cq_->PushError(ErrorEntry(e, err, olen, prov_errno), reserved);
  }
}

CqEntry RxContext::CancelEntry(const RxOp& r) const {
  CqEntry e;
  e.op_context = r.context;
  e.flags = kRecv | (r.tagged ? kTagged : kMsg);
  e.buf = r.iov_count ? r.iov[0].iov_base : nullptr;
  return e;
}

void RxContext::CompleteRx(uint32_t rx_index, const CqEntry& entry, int err,
                           size_t olen, int prov_errno, bool claimed) {
  RxOp& r = ops_[rx_index];
  CqEntry e = entry;
  bool last = true;
  if (r.flags & kMultiRecv) {
    // One entry per message (unreserved: a message is only taken when the CQ
    // has room); the entry written once the buffer is released and no READ
    // into it is pending carries FI_MULTI_RECV and uses the reservation.
    last = r.released && r.reads_pending == 0 && !r.release_reported;
    if (last && r.cancelled) {
      // Cancelled while this message was read into it: the message's own
      // entry, then the cancel's, which releases the buffer.
      PushEntry(e, err, olen, prov_errno, /*reserved=*/claimed);
      claimed = false;  // its room is used
      e = CancelEntry(r);
      err = ECANCELED;
      olen = 0;
      prov_errno = 0;
    }
    if (last) {
      e.flags |= kMultiRecv;
      r.release_reported = true;
      // The buffer's own reservation carries its last entry.
      if (claimed) cq_->Unreserve();
    }
  }
  if (err == 0 && !r.wants_entry) {
    if (last) cq_->Unreserve();
  } else {
    PushEntry(e, err, olen, prov_errno, /*reserved=*/last || claimed);
  }
  if (last) {
    if (r.flags & kMultiRecv) {
      --multi_recv_held_;
      cq_->RemoveUnreservedWriter();
    }
    r.used = false;
    free_.push_back(rx_index);
  }
}

void RxContext::Deliver(uint32_t rx_index, uint64_t source,
                        const wire::Header& h, const uint8_t* payload,
                        size_t payload_len) {
  RxOp& r = ops_[rx_index];
  CqEntry e = RecvEntry(r, source, h);
  size_t n;
  if (r.flags & kMultiRecv) {
    n = std::min(r.len - r.consumed, payload_len);
    uint8_t* at = static_cast<uint8_t*>(r.iov[0].iov_base) + r.consumed;
    if (n > 0) std::memcpy(at, payload, n);
    e.buf = at;
    ConsumeMulti(rx_index, n);
  } else {
    n = ScatterInto(r.iov, r.iov_count, 0, payload, payload_len);
    e.buf = r.iov_count > 0 ? r.iov[0].iov_base : nullptr;
  }
  e.len = n;
  CompleteRx(rx_index, e, n < payload_len ? kErrTruncated : 0, payload_len - n);
}

uint32_t RxContext::AddUnexpected(RxClient* ep, uint32_t peer, uint32_t epoch,
                                  bool credit_held, const wire::Header& h,
                                  uint64_t source, const uint8_t* payload,
                                  size_t len) {
  const bool tagged = h.flags & wire::kTagged;
  const uint32_t ui = TakeSlot(unexpected_, unexpected_free_);
  Unexpected& un = unexpected_[ui];
  un.used = true;
  un.credit_held = credit_held;
  un.ep = ep;
  un.peer = peer;
  un.epoch = epoch;
  un.header = h;
  un.payload.assign(payload, payload + len);
  un.handle = matchers_[tagged].AddUnexpected({tagged ? h.tag : 0, source, ui});
  return ui;
}

void RxContext::ReleaseUnexpected(uint32_t index) {
  Unexpected& un = unexpected_[index];
  // No credit to return once that endpoint has closed (null).
  if (un.ep != nullptr) {
    un.ep->UnexpectedReleased(un.peer, un.epoch, un.credit_held);
  }
  if (un.recv_context != internal::kNil) {
    recv_contexts_free_.push_back(un.recv_context);
    un.recv_context = internal::kNil;
  }
  un.used = false;
  un.ep = nullptr;
  un.payload.clear();
  unexpected_free_.push_back(index);
}

Status RxContext::CancelPosted(void* context) {
  const uint64_t ctx = reinterpret_cast<uint64_t>(context);
  for (int tagged = 0; tagged < 2; ++tagged) {
    TagMatcher& m = matchers_[tagged];
    auto h = m.FindReceiveByContext(ctx);
    if (!h) continue;
    const uint32_t index = of_handle_[tagged][h->index];
    m.RemoveReceive(*h);
    RxOp& r = ops_[index];
    r.handle = ReceiveHandle{};
    r.released = true;  // A multi-recv buffer is released by its cancel.
    if (r.reads_pending > 0) {
      // A multi-recv buffer a message is still being read into: that
      // message's entry comes first, then the cancel's (CompleteRx), the
      // release flag on the buffer's last entry as always.
      r.cancelled = true;
      return Status::Ok();
    }
    // fi_cancel always reports the cancelled receive (an error entry, on the
    // slot the receive reserved); a multi-recv buffer's entry says it is
    // released.
    CompleteRx(index, CancelEntry(r), ECANCELED, 0);
    return Status::Ok();
  }
  return NotFound("no posted receive with that context");
}

}  // namespace softfab::core
