// Messages the application inspects before taking them: FI_PEEK, FI_CLAIM
// and FI_DISCARD on unexpected messages (fi_tagged(3)), and buffered receives
// (fi_msg(3), "Buffered Receives": messages reported in softfab's buffers with
// a fi_recv_context, then claimed or discarded).
#include <optional>

#include "core/flags.h"
#include "core/internal/endpoint_common.h"
#include "core/rx_context.h"

namespace softfab::core {

Status RxContext::PeekClaimDiscard(const RecvArgs& a) {
  TagMatcher& m = matchers_[a.tagged];
  const uint64_t source = (attr_.caps & kDirectedRecv) ? a.src : kAnySource;
  const uint64_t ctx = reinterpret_cast<uint64_t>(a.context);
  const bool peek = a.flags & kPeek;
  const bool discard = a.flags & kDiscard;
  ProgressAll();  // Look at what has arrived by now.
  std::optional<MessageHandle> found;
  if (peek) {
    found = FindUnexpectedFor(m, a.tag, a.ignore, source);
  } else {
    found = m.FindClaimed(ctx);
    if (!found) {
      return InvalidArgument(
          "no message is claimed with this context (claimed or discarded "
          "already, or the wrong fi_recv_context)");
    }
  }
  const uint32_t ui =
      found ? static_cast<uint32_t>(m.message(*found).cookie) : 0;
  Unexpected* un = found ? &unexpected_[ui] : nullptr;
  const bool buffered_msg = un && un->recv_context != internal::kNil;
  if (buffered_msg && discard && !peek) {
    // fi_msg(3): a buffered message the application is done with. Freed; its
    // sender learns it was consumed. No entry.
    RxClient* owner = un->ep;
    if (owner != nullptr && un->header.op == wire::Op::kRendezvous) {
      owner->SendAck(un->peer, un->epoch, un->header.msg_id,
                     wire::Op::kReadDone);
    }
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
    return Status::Ok();
  }
  const bool read_into_buffer =
      found && !peek && !discard && un->header.op == wire::Op::kRendezvous;
  if (read_into_buffer && free_.empty()) {
    return TryAgain("all receive slots are posted");
  }
  if (Status s = cq_->Reserve(); !s.ok()) return s;
  const uint64_t op_flags = a.flags & (kPeek | kClaim | kDiscard);
  const uint64_t kind = a.tagged ? kTagged : kMsg;
  if (!found) {
    // fi_tagged(3): a peek that finds nothing completes with FI_ENOMSG.
    CqErrEntry e;
    e.op_context = a.context;
    e.flags = kRecv | kind | op_flags;
    e.err = kErrNoMessage;
    e.tag = a.tag;
    cq_->PushError(e, /*reserved=*/true);
    return Status::Ok();
  }
  // A claimed buffered message completes with the context the application
  // left in its fi_recv_context.
  void* entry_context =
      buffered_msg ? recv_contexts_[un->recv_context].context : a.context;
  RxClient* owner = un->ep;
  const uint32_t peer = un->peer;
  const uint32_t epoch = un->epoch;
  const wire::Header h = un->header;
  const bool rendezvous = h.op == wire::Op::kRendezvous;
  const bool take = discard || !peek;
  if (peek && (a.flags & kClaim) && !discard) m.Claim(*found, ctx);
  if (read_into_buffer && owner == nullptr) {
    // The endpoint it arrived at is closed: its data cannot be fetched.
    CqErrEntry x;
    x.op_context = entry_context;
    x.flags = kRecv | kind | kClaim;
    x.len = h.length;
    x.tag = h.tag;
    x.err = EIO;
    x.prov_errno = kProvEndpointClosed;
    cq_->PushError(x, /*reserved=*/true);
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
    return Status::Ok();
  }
  if (read_into_buffer) {
    // FI_CLAIM of a rendezvous message: READ it into the claiming buffer; the
    // entry (with FI_CLAIM) comes when the READ is done.
    const uint32_t index = NewRxOp(a, /*wants_entry=*/true);
    ops_[index].context = entry_context;
    ops_[index].flags = 0;
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
    owner->StartRead(index, peer, epoch, h, kClaim);
    return Status::Ok();
  }
  CqEntry e;
  e.op_context = entry_context;
  e.flags = kRecv | kind | op_flags |
            ((h.flags & wire::kHasData) ? kRemoteCqData : 0);
  e.len = h.length;
  e.data = h.data;
  e.tag = h.tag;
  const uint64_t src =
      owner ? owner->SourceOf(peer) : uint64_t{1} << 62;  // (none)
  e.src_addr = (src >> 62) ? ~uint64_t{0} : src;
  int err = 0;
  size_t olen = 0;
  if (!discard && !rendezvous && a.iov_count > 0) {
    // Peek and claim hand over eager data when a buffer is given (a peek of a
    // rendezvous message reports its length only: buf stays NULL).
    const size_t n = ScatterInto(a.iov, a.iov_count, 0, un->payload.data(),
                                 un->payload.size());
    e.buf = a.iov[0].iov_base;
    if (!peek && n < un->payload.size()) {
      err = kErrTruncated;
      olen = un->payload.size() - n;
      e.len = n;
    }
  }
  if (err == 0) {
    cq_->Push(e, /*reserved=*/true);
  } else {
    cq_->PushError(ErrorEntry(e, err, olen), /*reserved=*/true);
  }
  if (take && owner != nullptr) {
    if (rendezvous) {
      // Discarded: the sender may release its buffer and complete.
      owner->SendAck(peer, epoch, h.msg_id, wire::Op::kReadDone);
    } else if ((h.flags & wire::kAckMatch) && !buffered_msg) {
      owner->SendAck(peer, epoch, h.msg_id, wire::Op::kAck);
    }
  }
  if (take) {
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
  }
  return Status::Ok();
}

void RxContext::ReportBuffered(uint32_t ui, uint32_t rx_index) {
  Unexpected& un = unexpected_[ui];
  const wire::Header& h = un.header;
  const bool tagged = h.flags & wire::kTagged;
  const uint32_t slot = TakeSlot(recv_contexts_, recv_contexts_free_);
  RecvContext& rc = recv_contexts_[slot];
  // fi_msg(3): untagged, ep is the receiving endpoint (or shared context) and
  // context NULL; fi_tagged(3): ep NULL and context the posted tag's.
  rc.ep = rx_index == internal::kNil ? user_handle_ : nullptr;
  rc.context = rx_index == internal::kNil ? nullptr : ops_[rx_index].context;
  un.recv_context = slot;
  matchers_[tagged].Claim(un.handle, reinterpret_cast<uint64_t>(&rc));
  CqEntry e;
  e.op_context = &rc;
  e.flags = kRecv | (tagged ? kTagged : kMsg) |
            ((h.flags & wire::kHasData) ? kRemoteCqData : 0);
  // The whole message is here when it came eagerly within the limit;
  // otherwise FI_MORE, with the start of it (at least the sender's
  // FI_OPT_BUFFERED_MIN bytes) and the full length.
  if (h.op != wire::Op::kEager || h.length > attr_.buffered_limit) {
    e.flags |= kMore;
  }
  e.buf = un.payload.empty() ? nullptr : un.payload.data();
  e.len = h.length;
  e.data = h.data;
  e.tag = h.tag;
  const uint64_t src = un.ep->SourceOf(un.peer);
  e.src_addr = (src >> 62) ? ~uint64_t{0} : src;
  if (rx_index != internal::kNil) {
    cq_->Push(e, /*reserved=*/true);
    ops_[rx_index] = RxOp{};
    free_.push_back(rx_index);
  } else {
    // Progress only takes a message off the wire when the CQ has room.
    cq_->Push(e, /*reserved=*/false);
  }
  // Reported is matched: a match-complete sender may complete (a rendezvous
  // one waits for the kReadDone its claim or discard sends).
  if ((h.flags & wire::kAckMatch) && h.op == wire::Op::kEager) {
    un.ep->SendAck(un.peer, un.epoch, h.msg_id, wire::Op::kAck);
  }
}

}  // namespace softfab::core
