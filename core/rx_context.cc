// The receive side (rxm_msg.c and rxm_tagged.c's receive paths; UCX's
// tag_recv.c): RxContext itself, posting a receive (taking unexpected
// messages that wait for it, oldest first), multi-recv buffers, fi_cancel,
// eager delivery into a receive, and writing receive completions.
#include "core/rx_context.h"

#include <algorithm>
#include <cstring>

#include "core/endpoint.h"
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
    if (r.used) cq_->Unreserve();
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
  Endpoint* ep = Runner();
  if (ep == nullptr) {
    return Status(kErrOpBadState,
                  "no enabled endpoint uses this shared receive context yet");
  }
  return ep->Recv(args);
}

Status RxContext::Cancel(void* context) {
  Endpoint* ep = Runner();
  if (ep == nullptr) return NotFound("no posted receive with that context");
  return ep->Cancel(context);
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

// ------------------------------------------------------------------- receive

Status Endpoint::CheckRecv(const RecvArgs& a) const {
  if (Status s = CheckPostable(a.iov, a.iov_count); !s.ok()) return s;
  if (a.flags & ~kRecvOpFlags) return InvalidArgument("unknown receive flags");
  if ((a.flags & kMultiRecv) &&
      (a.iov_count != 1 || (a.flags & (kPeek | kClaim | kDiscard)))) {
    return InvalidArgument("FI_MULTI_RECV takes exactly one buffer");
  }
  const bool buffered = rx_->attr_.buffered;
  if ((a.flags & kDiscard) && !(a.flags & (kPeek | kClaim)) && !buffered) {
    return InvalidArgument("FI_DISCARD goes with FI_PEEK or FI_CLAIM");
  }
  if (attr_.type == EndpointType::kDgram &&
      (a.tagged || (a.flags & kMultiRecv) ||
       IovBytes(a.iov, a.iov_count) < kMsgPrefixBytes)) {
    return a.tagged || (a.flags & kMultiRecv)
               ? NotSupported("DGRAM endpoints take plain fi_msg receives")
               : InvalidArgument("a DGRAM buffer starts with 40 prefix bytes");
  }
  if (buffered && (a.flags & kMultiRecv)) {
    return InvalidArgument("FI_MULTI_RECV does not apply to buffered receives");
  }
  if (buffered && !a.tagged && !(a.flags & (kPeek | kClaim | kDiscard))) {
    return InvalidArgument(
        "an FI_BUFFERED_RECV endpoint reports messages without receives: post "
        "FI_CLAIM or FI_DISCARD with the entry's fi_recv_context");
  }
  if ((a.flags & (kPeek | kClaim | kDiscard)) && !a.tagged && !buffered) {
    return NotSupported(
        "FI_PEEK/FI_CLAIM/FI_DISCARD on untagged receives need "
        "FI_BUFFERED_RECV");
  }
  if ((a.flags & kPeek) && !a.tagged) {
    return NotSupported("FI_PEEK is a tagged operation (fi_tagged(3))");
  }
  if (a.src != kAnySource && (rx_->attr_.caps & kDirectedRecv) &&
      (rx_->av_ == nullptr || !rx_->av_->Lookup(a.src))) {
    return InvalidArgument("source address is not in the address vector");
  }
  return Status::Ok();
}

uint32_t Endpoint::NewRxOp(const RecvArgs& a, bool wants_entry) {
  const uint32_t index = rx_->free_.back();
  rx_->free_.pop_back();
  RxOp& r = rx_->ops_[index];
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
  return index;
}

Status Endpoint::Recv(const RecvArgs& a) {
  if (Status s = CheckRecv(a); !s.ok()) return s;
  if (a.flags & (kPeek | kClaim | kDiscard)) return HandlePeekClaimDiscard(a);
  if (rx_->free_.empty()) {
    ++stats_.eagain;
    return TryAgain("all receive slots are posted");
  }
  const bool wants_entry = !rx_->selective_ || (a.flags & kCompletion) ||
                           (a.flags & kMultiRecv) || rx_->attr_.buffered;
  // Like sends, every receive holds a CQ slot for its final entry (an error
  // or a cancel is always reported).
  // A multi-recv buffer registers as a writer of unreserved entries first,
  // so that its own reservation leaves a slot for its first message.
  if (a.flags & kMultiRecv) rx_->cq_->AddUnreservedWriter();
  if (Status s = rx_->cq_->Reserve(); !s.ok()) {
    if (a.flags & kMultiRecv) rx_->cq_->RemoveUnreservedWriter();
    ++stats_.eagain;
    return s;
  }
  const uint32_t index = NewRxOp(a, wants_entry);
  RxOp& r = rx_->ops_[index];
  if (a.flags & kMultiRecv) ++rx_->multi_recv_held_;
  // Buffered mode: a tagged receive posts a tag, not a buffer.
  r.tag_only = rx_->attr_.buffered;

  const uint64_t source =
      (rx_->attr_.caps & kDirectedRecv) ? a.src : kAnySource;
  const uint64_t tag = a.tagged ? a.tag : 0;
  const uint64_t ignore = a.tagged ? a.ignore : 0;
  TagMatcher& m = rx_->matchers_[a.tagged];
  // Messages that arrived first are taken oldest first (a plain receive
  // with the CQ slot it just reserved); a multi-recv buffer keeps taking them
  // while the CQ has room for their entries.
  while (!(r.flags & kMultiRecv) || rx_->cq_->HasRoom()) {
    auto u = FindUnexpectedFor(m, tag, ignore, source);
    if (!u) break;
    const uint32_t ui = static_cast<uint32_t>(m.message(*u).cookie);
    Unexpected& un = rx_->unexpected_[ui];
    Endpoint* owner = un.ep;  // The endpoint it arrived at.
    if (r.tag_only) {
      owner->ReportBuffered(ui, index);
      return Status::Ok();
    }
    m.RemoveUnexpected(*u);
    const bool multi = r.flags & kMultiRecv;
    if (un.header.op == wire::Op::kRendezvous) {
      owner->StartRead(index, un.peer, un.header, 0);
    } else {
      owner->Deliver(index, un.peer, un.header, un.payload.data(),
                     un.payload.size());
      if (un.header.flags & wire::kAckMatch) {
        owner->SendAck(un.peer, un.header.msg_id);
      }
    }
    ReleaseUnexpected(ui);
    if (!multi || !rx_->ops_[index].used || rx_->ops_[index].released) {
      return Status::Ok();
    }
  }
  const ReceiveHandle h =
      m.AddReceive({tag, ignore, source, reinterpret_cast<uint64_t>(a.context),
                    (a.flags & kMultiRecv) != 0});
  std::vector<uint32_t>& map = rx_->of_handle_[a.tagged];
  if (map.size() <= h.index) map.resize(h.index + 1);
  map[h.index] = index;
  r.handle = h;
  return Status::Ok();
}

CqEntry Endpoint::RecvEntry(const RxOp& r, uint32_t peer,
                            const wire::Header& h) const {
  CqEntry e;
  e.op_context = r.context;
  e.flags = kRecv | (r.tagged ? kTagged : kMsg) |
            ((h.flags & wire::kHasData) ? kRemoteCqData : 0);
  e.data = h.data;
  e.tag = h.tag;
  const uint64_t src = SourceOf(peer);
  e.src_addr = (src >> 62) ? ~uint64_t{0} : src;
  return e;
}

bool Endpoint::ConsumeMulti(uint32_t rx_index, size_t bytes) {
  RxOp& r = rx_->ops_[rx_index];
  r.consumed += bytes;
  if (r.released || r.len - r.consumed >= rx_->min_multi_recv_) return false;
  // Released: out of matching (if it was queued).
  if (r.handle.index != internal::kNil) {
    rx_->matchers_[r.tagged].RemoveReceive(r.handle);
    r.handle = ReceiveHandle{};
  }
  r.released = true;
  return true;
}

void Endpoint::CompleteRx(uint32_t rx_index, const CqEntry& entry, int err,
                          size_t olen, int prov_errno) {
  RxOp& r = rx_->ops_[rx_index];
  CqEntry e = entry;
  bool last = true;
  if (r.flags & kMultiRecv) {
    // One entry per message (unreserved: a message is only taken when the CQ
    // has room); the entry written once the buffer is released and no READ
    // into it is pending carries FI_MULTI_RECV and uses the reservation.
    last = r.released && r.reads_pending == 0 && !r.release_reported;
    if (last) {
      e.flags |= kMultiRecv;
      r.release_reported = true;
    }
  }
  if (err == 0 && !r.wants_entry) {
    if (last) rx_->cq_->Unreserve();
  } else if (err == 0) {
    rx_->cq_->Push(e, /*reserved=*/last);
  } else {
    rx_->cq_->PushError(ErrorEntry(e, err, olen, prov_errno),
                        /*reserved=*/last);
  }
  if (last) {
    if (r.flags & kMultiRecv) {
      --rx_->multi_recv_held_;
      rx_->cq_->RemoveUnreservedWriter();
    }
    r.used = false;
    rx_->free_.push_back(rx_index);
  }
}

void Endpoint::Deliver(uint32_t rx_index, uint32_t peer, const wire::Header& h,
                       const uint8_t* payload, size_t payload_len) {
  RxOp& r = rx_->ops_[rx_index];
  CqEntry e = RecvEntry(r, peer, h);
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

void Endpoint::ReleaseUnexpected(uint32_t index) {
  Unexpected& un = rx_->unexpected_[index];
  Endpoint* owner = un.ep;  // Null once that endpoint has closed.
  if (owner != nullptr) --owner->stats_.unexpected_held;
  if (owner == nullptr) {
    // No credit to return.
  } else if (un.credit_held) {
    --owner->peers_[un.peer].unexpected_withheld;
    owner->ReturnCredit(un.peer);
  } else {
    --owner->peers_[un.peer].unexpected_buffered;
  }
  if (un.recv_context != internal::kNil) {
    rx_->recv_contexts_free_.push_back(un.recv_context);
    un.recv_context = internal::kNil;
  }
  un.used = false;
  un.ep = nullptr;
  un.payload.clear();
  rx_->unexpected_free_.push_back(index);
}

Status Endpoint::Cancel(void* context) {
  const uint64_t ctx = reinterpret_cast<uint64_t>(context);
  for (int tagged = 0; tagged < 2; ++tagged) {
    TagMatcher& m = rx_->matchers_[tagged];
    auto h = m.FindReceiveByContext(ctx);
    if (!h) continue;
    const uint32_t index = rx_->of_handle_[tagged][h->index];
    m.RemoveReceive(*h);
    RxOp& r = rx_->ops_[index];
    CqEntry e;
    e.op_context = r.context;
    e.flags = kRecv | (r.tagged ? kTagged : kMsg) | (r.flags & kMultiRecv);
    e.buf = r.iov_count ? r.iov[0].iov_base : nullptr;
    r.handle = ReceiveHandle{};
    r.released = true;  // A multi-recv buffer is released by its cancel.
    // fi_cancel always reports the cancelled receive (an error entry, on the
    // slot the receive reserved); a multi-recv buffer's entry says it is
    // released.
    CompleteRx(index, e, ECANCELED, 0);
    return Status::Ok();
  }
  return NotFound("no posted receive with that context");
}

}  // namespace softfab::core
