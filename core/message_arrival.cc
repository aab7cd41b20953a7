// What arrives on RC connections (rxm_cq.c's receive handling; UCX's
// eager_rcv.c): the bounce buffers on the shared receive queue, headers
// checked, acks that finish sends, and messages matched against posted
// receives or kept as unexpected (their credit returned at once, up to a
// bound); and the endpoint's side of receiving (its checks on a receive, the
// peer accounting of kept messages). Matching itself is the receive
// context's (core/rx_context.h).
#include <algorithm>
#include <cassert>
#include <memory>
#include <utility>

#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

// ------------------------------------------------------------------- receives

Status Endpoint::CheckRecv(const RecvArgs& a) const {
  if (Status s = CheckPostable(a.iov, a.iov_count); !s.ok()) return s;
  if (a.flags & ~kRecvOpFlags) return InvalidArgument("unknown receive flags");
  if ((a.flags & kMultiRecv) &&
      (a.iov_count != 1 || (a.flags & (kPeek | kClaim | kDiscard)))) {
    return InvalidArgument("FI_MULTI_RECV takes exactly one buffer");
  }
  const bool buffered = rx_->attr().buffered;
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
  if (a.src != kAnySource && (rx_->attr().caps & kDirectedRecv) &&
      (rx_->av() == nullptr || !rx_->av()->Lookup(a.src))) {
    return InvalidArgument("source address is not in the address vector");
  }
  return Status::Ok();
}

Status Endpoint::Recv(const RecvArgs& a) {
  if (Status s = CheckRecv(a); !s.ok()) return s;
  const Status s = rx_->Post(a);
  if (s.code() == EAGAIN) ++stats_.eagain;
  return s;
}

Status Endpoint::Cancel(void* context) { return rx_->CancelPosted(context); }

void Endpoint::UnexpectedReleased(uint32_t peer, uint32_t epoch,
                                  bool credit_held) {
  --stats_.unexpected_held;
  Peer& p = conns_[peer];
  if (epoch != p.epoch) {
    // Kept from an old connection: its credit was that connection's. The
    // one before this counts as stale (older ones were dropped).
    if (epoch + 1 == p.epoch) --p.unexpected_stale;
    return;
  }
  if (credit_held) {
    --p.unexpected_withheld;
    conns_.ReturnCredit(peer);
  } else {
    --p.unexpected_buffered;
  }
}

// ------------------------------------------------------------------- arrivals

Status Endpoint::AddBounceChunk() {
  FlushReposts();  // The SRQ takes buffers in the order they were freed.
  if (rx_bounce_count_ + attr_.credits > rx_bounce_max_) {
    // The SRQ (and the receive CQ sized for it) is full: further peers share
    // the buffers there are. Under heavy fan-in that can mean RNR NAKs, which
    // the unlimited RNR retry turns into waiting, never into loss.
    return Status::Ok();
  }
  const size_t bytes = static_cast<size_t>(attr_.credits) * rx_slot_bytes_;
  PinnedBlock chunk = NewPinnedBlock(bytes);
  auto mr = pd_->RegMr(chunk.get(), bytes, tp::kAccessLocalWrite);
  if (!mr.ok()) return mr.status();
  rx_chunks_.push_back(std::move(chunk));
  rx_chunk_mrs_.push_back(*mr);
  const uint32_t first = rx_bounce_count_;
  rx_bounce_count_ += attr_.credits;
  for (uint32_t i = first; i < rx_bounce_count_; ++i) {
    if (Status s = RepostBounce(i); !s.ok()) return s;
  }
  return Status::Ok();
}

void Endpoint::RepostOrKeep(uint32_t index) {
  if (!RepostBounce(index).ok()) rx_unposted_.push_back(index);
}

void Endpoint::RepostLater(uint32_t index) {
  // One per completion of a poll batch, flushed after each batch, or (with
  // defer_reposts) when the chain is full.
  if (repost_count_ == repost_wr_.size()) PostReposts();
  tp::Sge& sge = repost_sge_[repost_count_];
  sge = BounceSge(index);
  tp::RecvWr& wr = repost_wr_[repost_count_];
  wr.wr_id = WrId(kWrRxBounce, index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.next = nullptr;
  if (repost_count_ > 0) repost_wr_[repost_count_ - 1].next = &wr;
  ++repost_count_;
}

void Endpoint::PostReposts() {
  if (repost_count_ > 1) ++stats_.repost_chains;
  const tp::RecvWr* bad = nullptr;
  if (!srq_->PostRecv(repost_wr_.data(), &bad).ok()) {
    // The requests before the refused one are posted (transport.h); it and
    // those after it wait in rx_unposted_, in order, as RepostOrKeep's do.
    const size_t first =
        bad != nullptr ? static_cast<size_t>(bad - repost_wr_.data()) : 0;
    for (size_t i = first; i < repost_count_; ++i) {
      rx_unposted_.push_back(
          static_cast<uint32_t>(IndexOf(repost_wr_[i].wr_id)));
    }
  }
  repost_count_ = 0;
}

Status Endpoint::RepostBounce(uint32_t index) {
  const tp::Sge sge = BounceSge(index);
  return PostOneRecv(srq_, WrId(kWrRxBounce, index),
                     reinterpret_cast<const void*>(sge.addr), sge.length,
                     sge.lkey);
}

void Endpoint::OnBounce(const tp::WorkCompletion& wc) {
  bool return_credit = true;
  const uint32_t index = static_cast<uint32_t>(IndexOf(wc.wr_id));
  const std::optional<uint32_t> from = conns_.ByQpn(wc.qp_num);
  if (wc.status != tp::WcStatus::kSuccess || !from) {
    // A stray, or a buffer flushed by a QP that failed while a message was
    // arriving into it (the SRQ lives on): put it back, or the pool shrinks
    // by one with every such failure.
    if (wc.status == tp::WcStatus::kSuccess) ++stats_.bad_headers;
    if (wc.status == tp::WcStatus::kWrFlushErr) ++stats_.bounce_flushed;
    Repost(index);
    return;
  }
  const uint32_t peer = *from;
  Peer& p = conns_[peer];
  // On the peer's current QP, or on the previous connection's (it arrived,
  // or waited for CQ room, before the connection was made anew): then it is
  // that connection's, and nothing of the new one answers it.
  const bool current = wc.qp_num == p.qpn;
  if (current) p.ready = true;  // It sent on the connection: it can receive.
  const uint8_t* buf = BounceAt(index);
  wire::Header h;
  const size_t payload_len = wc.byte_len - wire::kHeaderBytes;
  if (!wire::Decode(buf, wc.byte_len, &h) ||
      (h.op == wire::Op::kEager && h.length != payload_len) ||
      (h.op == wire::Op::kRendezvous && payload_len > h.length) ||
      ((h.op == wire::Op::kAck || h.op == wire::Op::kReadDone) &&
       payload_len != 0)) {
    ++stats_.bad_headers;
  } else if (h.op == wire::Op::kAck || h.op == wire::Op::kReadDone) {
    // A rendezvous send finishes on kReadDone only (its buffer is read
    // until then); other sends on kAck. One of the previous connection's
    // names an operation that failed with it (the id may be reused).
    if (current && h.msg_id < tx_.size() && tx_.op(h.msg_id).used &&
        tx_.op(h.msg_id).peer == peer &&
        tx_.op(h.msg_id).rendezvous == (h.op == wire::Op::kReadDone)) {
      tx_.op(h.msg_id).acked = true;
      MaybeFinishTx(static_cast<uint32_t>(h.msg_id));
    }
  } else {
    // kEager or kRendezvous (whose payload is the sender's
    // FI_OPT_BUFFERED_MIN prefix): a message to match.
    return_credit = OnMessage(peer, current ? p.epoch : p.epoch - 1, h,
                              buf + wire::kHeaderBytes, payload_len) &&
                    current;
  }
  Repost(index);
  if (return_credit) conns_.ReturnCredit(peer);
}

bool Endpoint::ArrivalWaitsForRoom(const tp::WorkCompletion& wc) const {
  if (rx_cq_ == nullptr || rx_cq_->HasRoom() || !rx_->ArrivalsMayNeedRoom() ||
      wc.status != tp::WcStatus::kSuccess) {
    return false;
  }
  const std::optional<uint32_t> from = conns_.ByQpn(wc.qp_num);
  wire::Header h;
  if (!from ||
      !wire::Decode(BounceAt(static_cast<uint32_t>(IndexOf(wc.wr_id))),
                    wc.byte_len, &h) ||
      (h.op != wire::Op::kEager && h.op != wire::Op::kRendezvous)) {
    return false;  // Acks, read-dones and bad headers write no entry.
  }
  if (rx_->attr().buffered) return true;
  // Only a multi-recv buffer writes an entry per message.
  const uint32_t r =
      rx_->FindReceive((h.flags & wire::kTagged) != 0, h.tag, SourceOf(*from));
  return r != internal::kNil && (rx_->op(r).flags & kMultiRecv);
}

bool Endpoint::OnMessage(uint32_t peer, uint32_t epoch, const wire::Header& h,
                         const uint8_t* payload, size_t len) {
  const bool rendezvous = h.op == wire::Op::kRendezvous;
  const bool tagged = h.flags & wire::kTagged;
  const bool buffered = rx_->attr().buffered;
  const uint64_t source = SourceOf(peer);
  uint32_t rx = rx_->FindReceive(tagged, h.tag, source);
  if (rx_->backlogged() && rx != internal::kNil && rx_->op(rx).backlogged)
      [[unlikely]] {
    // A multi-recv buffer with older messages kept for it: they go first,
    // and this one after them (kept too, if the room runs out again).
    rx_->DrainBacklog();
    rx = rx_->FindReceive(tagged, h.tag, source);
    if (rx != internal::kNil && rx_->op(rx).backlogged) rx = internal::kNil;
  }
  const bool r = rx != internal::kNil;
  Peer& p = conns_[peer];
  // The previous connection's (OnBounce): kept as stale, no credit of its
  // counts against the new connection.
  const bool stale = epoch != p.epoch;
  const bool credit_held = !stale && p.unexpected_buffered >= attr_.credits;
  if ((!r || buffered) && credit_held &&
      p.unexpected_withheld >= std::max<uint32_t>(p.credits.grant_out, 1)) {
    // It would be kept, and the peer sent past its credits: memory stays
    // bounded, the message is dropped and counted (and not acknowledged).
    ++stats_.overrun_dropped;
    return false;
  }
  if (r) rx_->Take(rx);
  if (r && !buffered) {
    if (rendezvous) {
      StartRead(rx, peer, epoch, h, 0);
    } else {
      rx_->Deliver(rx, source, h, payload, len);
      if (h.flags & (wire::kAckMatch | wire::kAckDelivery)) {
        SendAck(peer, epoch, h.msg_id);
      }
    }
    return true;
  }
  // Unexpected, or held in our buffer (buffered mode).
  bool return_credit = true;
  if (stale) [[unlikely]] {
    ++p.unexpected_stale;
  } else if (credit_held) {
    return_credit = false;
    ++p.unexpected_withheld;
  } else {
    ++p.unexpected_buffered;
  }
  const uint32_t ui = rx_->AddUnexpected(this, peer, epoch, credit_held, h,
                                         source, payload, len);
  ++stats_.unexpected;
  ++stats_.unexpected_held;
  if (!rendezvous && (h.flags & wire::kAckDelivery)) {
    SendAck(peer, epoch, h.msg_id);
  }
  // Buffered: untagged messages are reported at once, tagged ones when a
  // posted tag matches.
  if (buffered && (!tagged || r)) rx_->ReportBuffered(ui, rx);
  return return_credit;
}

}  // namespace softfab::core
