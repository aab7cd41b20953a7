// Sending (rxm_ep.c's send path; UCX's tag_send.c and eager_snd.c): checks,
// tx slots and their CQ reservations, eager SENDs (a rendezvous request
// travels the same way; rendezvous.cc exposes its payload), completion
// levels, and the acks a target sends back.
#include <algorithm>
#include <cstring>

#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

namespace {

// An eager message's header (a send adds its ack flags and msg_id).
wire::Header EagerHeader(const SendArgs& a, size_t len) {
  wire::Header h;
  h.op = wire::Op::kEager;
  h.flags = (a.tagged ? wire::kTagged : 0) |
            ((a.flags & kRemoteCqData) ? wire::kHasData : 0);
  h.length = len;
  h.tag = a.tagged ? a.tag : 0;
  h.data = (a.flags & kRemoteCqData) ? a.data : 0;
  return h;
}

// An eager message as it travels, at `out`: the header, then the payload
// gathered from the iovecs. Returns its bytes.
size_t Pack(const wire::Header& h, const SendArgs& a, uint8_t* out) {
  wire::Encode(h, out);
  size_t off = wire::kHeaderBytes;
  for (size_t i = 0; i < a.iov_count; ++i) {
    if (a.iov[i].iov_len == 0) continue;
    std::memcpy(out + off, a.iov[i].iov_base, a.iov[i].iov_len);
    off += a.iov[i].iov_len;
  }
  return off;
}

}  // namespace

Status Endpoint::CheckPostable(const struct iovec* iov, size_t count) const {
  if (!enabled_) return InvalidArgument("endpoint is not enabled");
  if (broken_cause_ != 0) return Status(EIO, BrokenReason(broken_cause_));
  if (count > kIovMax) return InvalidArgument("too many iov entries");
  if (count > 0 && iov == nullptr) return InvalidArgument("null iov");
  for (size_t i = 0; i < count; ++i) {
    if (iov[i].iov_len > 0 && iov[i].iov_base == nullptr) {
      return InvalidArgument("null buffer with a non-zero length");
    }
  }
  return Status::Ok();
}

Status Endpoint::CheckSend(const SendArgs& a, size_t* len) const {
  if (Status s = CheckPostable(a.iov, a.iov_count); !s.ok()) return s;
  if (a.flags & ~kSendOpFlags) return InvalidArgument("unknown send flags");
  if (a.flags & kMulticast) {
    return NotSupported("FI_MULTICAST is not supported by softfab");
  }
  const uint64_t levels = a.flags & kCompletionLevels;
  if (levels & (levels - 1)) {
    return InvalidArgument("at most one completion level per send");
  }
  *len = IovBytes(a.iov, a.iov_count);
  if (*len > max_msg_size()) {
    return InvalidArgument("message larger than max_msg_size");
  }
  if (attr_.type == EndpointType::kDgram) {
    if (a.tagged) return NotSupported("DGRAM endpoints carry fi_msg only");
    if (levels & (kDeliveryComplete | kMatchComplete)) {
      return NotSupported("DGRAM is unreliable: no delivery or match acks");
    }
    if (a.flags & kRemoteCqData) {
      return NotSupported("DGRAM endpoints carry no remote CQ data");
    }
    if (*len < kMsgPrefixBytes) {
      return InvalidArgument("a DGRAM buffer starts with 40 prefix bytes");
    }
  }
  if ((a.flags & kInject) && *len > attr_.inject_size) {
    return InvalidArgument("FI_INJECT message larger than inject_size");
  }
  return Status::Ok();
}

Status Endpoint::Send(const SendArgs& a) {
  size_t len = 0;
  if (Status s = CheckSend(a, &len); !s.ok()) return s;
  if (attr_.type == EndpointType::kDgram) return SendDgram(a, len);
  auto peer_or = PeerFor(a.dest);
  if (!peer_or.ok()) return peer_or.status();
  const uint32_t peer = *peer_or;
  Peer& p = conns_[peer];
  if (p.state == PeerState::kFailed) {
    // RDM: once the failed connection's operations are all reported, this
    // send makes a new connection (rxm does the same); until then, and on a
    // broken endpoint or FI_EP_MSG, the peer is unreachable.
    // A peer that did not answer our last attempt is tried again only an
    // RC retry time later (its own request is taken at once, OnCm).
    if (!CanReconnect(peer) ||
        device_->clock().NowNs() < p.reconnect_after_ns) {
      return Status(EHOSTUNREACH, RefusalFor(p.failed_prov_errno));
    }
    ResetPeer(peer);
  }
  const bool connected = CanSend(p);
  if (connected && (!p.waiting.empty() || conns_.AvailableCredits(p) == 0 ||
                    p.sq_outstanding >= peer_send_budget())) {
    ++stats_.eagain;
    kick_wanted_ = true;
    return TryAgain("no credit at that peer: read the CQ, then retry");
  }
  if (connected && !SendCqHasRoom()) {
    ++stats_.eagain;
    kick_wanted_ = true;
    return TryAgain("the send CQ is full: read the CQ, then retry");
  }
  if (connected && InjectsInline(a, len)) return PostInject(a, len, peer);
  auto acquired = AcquireTx(a, len, peer);
  if (!acquired.ok()) return acquired.status();
  const uint32_t index = *acquired;
  TxOp& op = tx_.op(index);
  op.fenced = (a.flags & kFence) != 0;
  op.flags = kSend | (a.tagged ? kTagged : kMsg);
  op.level = a.flags & kCompletionLevels;
  if (op.level == 0) op.level = attr_.op_flags & kCompletionLevels;
  if (op.level == 0) op.level = kTransmitComplete;
  wire::Header& h = op.header;
  h = EagerHeader(a, len);
  if (op.level == kDeliveryComplete) h.flags |= wire::kAckDelivery;
  if (op.level == kMatchComplete) h.flags |= wire::kAckMatch;
  h.msg_id = index;
  uint8_t* slot = tx_.Slot(index);
  auto rollback = [&](Status s) {
    tx_cq_->Unreserve();
    FreeTx(index);
    return s;
  };
  if (len > attr_.eager_max) {
    // Rendezvous: the target READs the payload from its place; the send
    // completes (at any level) when the target says the READ is done.
    if (Status s = ExposeForRead(index, a, len); !s.ok()) return rollback(s);
    wire::Encode(h, slot);
  } else {
    (void)Pack(h, a, slot);
  }

  if (connected && !(op.fenced && p.in_flight > 0)) {
    if (Status s = PostTx(index); !s.ok()) {
      // Roll back: nothing was posted.
      return rollback(s);
    }
  } else {
    p.waiting.push_back(index);
    conns_.MarkBusy(peer);
    if (op.fenced) kick_wanted_ = true;  // It may wait for unsignaled work.
    if (p.state == PeerState::kIdle) {
      if (Status s = StartConnect(peer); !s.ok()) {
        p.waiting.pop_back();
        return rollback(s);
      }
    }
  }
  // An eager payload is copied: the user's buffer may be reused now (written
  // only once the send is surely under way, so a refused post reports
  // nothing).
  if (op.level == kInjectComplete && !op.rendezvous) CompleteTx(index, 0);
  return Status::Ok();
}

Status Endpoint::ReserveSend(uint32_t peer) {
  if (tx_.full()) {
    ++stats_.eagain;
    kick_wanted_ = true;
    return TryAgain("all tx slots busy: read the CQ, then retry");
  }
  // Every send holds a CQ slot until it completes, so its error (which is
  // always reported) can never be lost; a silent success gives it back. A
  // send to this endpoint itself completes only once a receive here takes
  // it: where that receive's entry goes to the same CQ, the send leaves one
  // slot unpromised, so the receive can always be posted (sends to itself
  // holding every slot of a CQ of 4 waited for ever: the api_calls fuzzer).
  // On DGRAM `peer` is kNil. Keeping a slot free changes the answer only
  // when at most one is left, so only then are the names compared.
  const bool to_itself = tx_cq_->room() <= 1 &&
                         attr_.type == EndpointType::kRdm && tx_cq_ == rx_cq_ &&
                         conns_[peer].name == name_;
  const size_t keep_free = to_itself ? 1 : 0;
  if (Status s = tx_cq_->Reserve(keep_free); !s.ok()) {
    ++stats_.eagain;
    kick_wanted_ = true;
    return s;
  }
  return Status::Ok();
}

StatusOr<uint32_t> Endpoint::AcquireTx(const SendArgs& a, size_t len,
                                       uint32_t peer) {
  if (Status s = ReserveSend(peer); !s.ok()) return s;
  // fi_inject (kInject without an explicit kCompletion through sendmsg) never
  // writes an entry; otherwise an entry unless selective completion is on and
  // kCompletion is absent.
  bool wants_entry = !tx_selective_ || (a.flags & kCompletion);
  if ((a.flags & kInject) && !(a.flags & kCompletion)) wants_entry = false;
  if ((a.flags & kInject) && (a.flags & kInjectComplete)) wants_entry = true;
  const uint32_t index = tx_.Take();
  TxOp& op = tx_.op(index);
  // Every field is set (no zeroing of the whole slot on the hot path).
  op.used = true;
  op.peer = peer;
  op.context = a.context;
  op.flags = 0;
  op.level = 0;
  op.len = len;
  op.wants_entry = wants_entry;
  op.sent = false;
  op.acked = false;
  op.send_done = false;
  op.rendezvous = false;
  op.fenced = false;
  op.prefix = 0;
  op.header = wire::Header{};
  op.reserved = true;
  return index;
}

Status Endpoint::PostTx(uint32_t index) {
  if (!SendCqHasRoom()) return TryAgain("the send CQ is full");
  TxOp& op = tx_.op(index);
  Peer& p = conns_[op.peer];
  if (op.rendezvous) {
    // The first FI_OPT_BUFFERED_MIN bytes (ours or the receiver's, whichever
    // is larger; known once connected) travel with the request, for a
    // buffered receiver to look at before it claims the rest.
    op.prefix = std::min<size_t>(
        std::min<size_t>(std::max<size_t>(buffered_min_, p.peer_buffered_min),
                         attr_.eager_max),
        op.len);
    std::memcpy(tx_.Slot(index) + wire::kHeaderBytes,
                reinterpret_cast<const uint8_t*>(op.header.aux), op.prefix);
  }
  const size_t payload = op.rendezvous ? op.prefix : op.len;
  tp::Sge sge{reinterpret_cast<uint64_t>(tx_.Slot(index)),
              static_cast<uint32_t>(wire::kHeaderBytes + payload), tx_.lkey()};
  // Signaled when the user waits for this send's own completion (an entry
  // at transmit level or after an ack, a rendezvous request); otherwise (an
  // inject, an inject-complete send, no entry asked for) it may finish with
  // the next signaled work to that peer (send_queue.cc).
  const bool awaited =
      op.rendezvous || (op.wants_entry && op.level != kInjectComplete);
  // Small sends go inline: the device copies them at post, no DMA read.
  const bool inline_data = sge.length <= tx_.inline_max() && attr_.inline_sends;
  if (Status s = PostSendWr(p, WrId(kWrTx, index), sge, awaited, inline_data);
      !s.ok()) {
    return s;
  }
  ++p.in_flight;
  op.sent = true;
  return Status::Ok();
}

Status Endpoint::PostSendWr(Peer& p, uint64_t wr_id, const tp::Sge& sge,
                            bool awaited, bool inline_data) {
  const bool signaled = MustSignal(p, awaited);
  tp::SendWr wr;
  wr.wr_id = Sequenced(p, wr_id);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = tp::WrOpcode::kSend;
  wr.send_flags =
      (signaled ? tp::kSendSignaled : 0) | (inline_data ? tp::kSendInline : 0);
  const tp::SendWr* bad = nullptr;
  if (Status s = p.qp->PostSend(&wr, &bad); !s.ok()) return s;
  Credits::Spend(p.credits);
  Posted(p, wr.wr_id, signaled);
  return Status::Ok();
}

Status Endpoint::PostInject(const SendArgs& a, size_t len, uint32_t peer) {
  // What AcquireTx, PostTx and CompleteTx do for this send, without a tx op:
  // it takes no slot (it is copied by the device when posted) but counts
  // against the table, and holds a CQ reservation until it retires at
  // transmit level (send_queue.cc gives it back, or writes the error entry a
  // failure gets); at inject level it is complete once posted.
  if (Status s = ReserveSend(peer); !s.ok()) return s;
  uint8_t* stage = inject_stage_.data();
  const size_t bytes = Pack(EagerHeader(a, len), a, stage);
  const bool holds_entry = InjectsHoldEntries();
  const uint64_t index =
      (holds_entry ? kInjectHoldsEntry : 0) | (a.tagged ? kInjectTagged : 0);
  // Outside the tx slots' registration (the lkey is theirs): only an inline
  // post may read it, and the device copies it at once.
  const tp::Sge sge{reinterpret_cast<uint64_t>(stage),
                    static_cast<uint32_t>(bytes), tx_.lkey()};
  Peer& p = conns_[peer];
  if (Status s = PostSendWr(p, WrId(kWrInject, index), sge,
                            /*awaited=*/false, /*inline_data=*/true);
      !s.ok()) {
    tx_cq_->Unreserve();
    return s;
  }
  ++p.in_flight;
  tx_.Lend();
  ++stats_.injects_inline;
  if (!holds_entry) tx_cq_->Unreserve();
  return Status::Ok();
}

void Endpoint::CompleteTx(uint32_t index, int err, int prov_errno) {
  TxOp& op = tx_.op(index);
  if (!op.reserved) return;  // Completed already (inject-complete).
  op.reserved = false;       // At most one entry per operation.
  if (err == 0 && !op.wants_entry) {
    tx_cq_->Unreserve();
  } else {
    PushTxEntry(op.context, op.flags, err, prov_errno);
  }
}

void Endpoint::PushTxEntry(void* context, uint64_t flags, int err,
                           int prov_errno) {
  if (err == 0) {
    CqEntry e;
    e.op_context = context;
    e.flags = flags;
    tx_cq_->Push(e, /*reserved=*/true);
  } else {
    CqErrEntry e;
    e.op_context = context;
    e.flags = flags;
    e.err = err;
    e.prov_errno = prov_errno;
    tx_cq_->PushError(e, /*reserved=*/true);
  }
}

void Endpoint::MaybeFinishTx(uint32_t index) {
  TxOp& op = tx_.op(index);
  const bool needs_ack = op.rendezvous || op.level == kDeliveryComplete ||
                         op.level == kMatchComplete;
  if (!op.send_done) return;
  if (needs_ack && !op.acked) {
    // An answer from a failed peer will not come.
    if (op.peer == internal::kNil ||
        conns_[op.peer].state != PeerState::kFailed) {
      return;
    }
    CompleteTx(index, conns_[op.peer].failed_err,
               conns_[op.peer].failed_prov_errno);
    --conns_[op.peer].in_flight;
    FreeTx(index);
    return;
  }
  CompleteTx(index, 0);
  if (op.peer != internal::kNil) --conns_[op.peer].in_flight;
  FreeTx(index);
}

void Endpoint::FreeTx(uint32_t index) {
  TxOp& op = tx_.op(index);
  if (op.rdv_mr) ReleaseRdvMr(op);
  op.rdv_mr = nullptr;
  op.rdv_copy.clear();
  op.used = false;
  op.reserved = false;
  tx_.Free(index);
}

void Endpoint::SendAck(uint32_t peer, uint32_t epoch, uint64_t msg_id,
                       wire::Op op) {
  Peer& p = conns_[peer];
  // No ack goes to a failed connection: its side fails what the ack would
  // finish, and one kept queued would keep the peer from being connected
  // anew (CanReconnect). Nor to a connection made since: the id names an
  // operation of the old one, and the sender reuses ids.
  if (p.state == PeerState::kFailed || epoch != p.epoch) return;
  if (!p.acks.empty() || !PostAck(peer, msg_id, op).ok()) {
    p.acks.emplace_back(op, msg_id);
    conns_.MarkBusy(peer);
  }
}

Status Endpoint::PostAck(uint32_t peer, uint64_t msg_id, wire::Op op) {
  Peer& p = conns_[peer];
  // Acks use a ring of header-only slots after the tx slots and need a credit
  // at the peer like any SEND.
  if (!CanSend(p) || conns_.AvailableCredits(p) == 0 ||
      p.sq_outstanding >= qp_send_depth() || !SendCqHasRoom()) {
    return TryAgain("no credit or send CQ room for an ack");
  }
  const uint32_t slot = tx_.NextControlSlot();
  uint8_t* buf = tx_.ControlSlot(slot);
  wire::Header h;
  h.op = op;
  h.msg_id = msg_id;
  wire::Encode(h, buf);
  tp::Sge sge{reinterpret_cast<uint64_t>(buf),
              static_cast<uint32_t>(wire::kHeaderBytes), tx_.lkey()};
  // Inline: the slot may be rewritten once posted, and nothing waits for
  // an ack's completion.
  return PostSendWr(p, WrId(kWrAck, slot), sge, /*awaited=*/false,
                    /*inline_data=*/true);
}

}  // namespace softfab::core
