// What arrives on RC connections (rxm_cq.c's receive handling; UCX's
// eager_rcv.c): the bounce buffers on the shared receive queue, headers
// checked, acks that finish sends, and messages matched against posted
// receives or kept as unexpected (their credit returned at once, up to a
// bound).
#include <memory>
#include <utility>

#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

Status Endpoint::AddBounceChunk() {
  if (rx_bounce_count_ + attr_.credits > rx_bounce_max_) {
    // The SRQ (and the receive CQ sized for it) is full: further peers share
    // the buffers there are. Under heavy fan-in that can mean RNR NAKs, which
    // the unlimited RNR retry turns into waiting, never into loss.
    return Status::Ok();
  }
  const size_t bytes = static_cast<size_t>(attr_.credits) * rx_slot_bytes_;
  std::unique_ptr<uint8_t[]> chunk(new uint8_t[bytes]);
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

Status Endpoint::RepostBounce(uint32_t index) {
  return PostOneRecv(srq_, WrId(kWrRxBounce, index), BounceAt(index),
                     rx_slot_bytes_,
                     rx_chunk_mrs_[index / attr_.credits]->lkey());
}

void Endpoint::OnBounce(const tp::WorkCompletion& wc) {
  bool return_credit = true;
  const uint32_t index = static_cast<uint32_t>(IndexOf(wc.wr_id));
  auto it = peer_by_qpn_.find(wc.qp_num);
  if (wc.status != tp::WcStatus::kSuccess || it == peer_by_qpn_.end()) {
    // A flushed buffer (QP or SRQ torn down) or a stray: put it back.
    if (wc.status == tp::WcStatus::kSuccess) ++stats_.bad_headers;
    if (wc.status != tp::WcStatus::kWrFlushErr) (void)RepostBounce(index);
    return;
  }
  const uint32_t peer = it->second;
  peers_[peer].ready = true;  // It sent on the connection: it can receive.
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
    // until then); other sends on kAck.
    if (h.msg_id < tx_ops_.size() && tx_ops_[h.msg_id].used &&
        tx_ops_[h.msg_id].peer == peer &&
        tx_ops_[h.msg_id].rendezvous == (h.op == wire::Op::kReadDone)) {
      tx_ops_[h.msg_id].acked = true;
      MaybeFinishTx(static_cast<uint32_t>(h.msg_id));
    }
  } else {
    // kEager or kRendezvous (whose payload is the sender's
    // FI_OPT_BUFFERED_MIN prefix): a message to match.
    return_credit = OnMessage(peer, h, buf + wire::kHeaderBytes, payload_len);
  }
  (void)RepostBounce(index);
  if (return_credit) ReturnCredit(peer);
}

bool Endpoint::ArrivalWaitsForRoom(const tp::WorkCompletion& wc) const {
  if (rx_cq_ == nullptr || rx_cq_->HasRoom() || !rx_->ArrivalsMayNeedRoom() ||
      wc.status != tp::WcStatus::kSuccess) {
    return false;
  }
  auto it = peer_by_qpn_.find(wc.qp_num);
  wire::Header h;
  if (it == peer_by_qpn_.end() ||
      !wire::Decode(BounceAt(static_cast<uint32_t>(IndexOf(wc.wr_id))),
                    wc.byte_len, &h) ||
      (h.op != wire::Op::kEager && h.op != wire::Op::kRendezvous)) {
    return false;  // Acks, read-dones and bad headers write no entry.
  }
  if (rx_->attr_.buffered) return true;
  // Only a multi-recv buffer writes an entry per message.
  const bool tagged = h.flags & wire::kTagged;
  auto r = rx_->matchers_[tagged].FindReceive(tagged ? h.tag : 0,
                                              SourceOf(it->second));
  return r && (rx_->ops_[rx_->of_handle_[tagged][r->index]].flags & kMultiRecv);
}

bool Endpoint::OnMessage(uint32_t peer, const wire::Header& h,
                         const uint8_t* payload, size_t len) {
  const bool rendezvous = h.op == wire::Op::kRendezvous;
  const bool tagged = h.flags & wire::kTagged;
  const bool buffered = rx_->attr_.buffered;
  TagMatcher& m = rx_->matchers_[tagged];
  const uint64_t source = SourceOf(peer);
  auto r = m.FindReceive(tagged ? h.tag : 0, source);
  Peer& p = peers_[peer];
  const bool credit_held = p.unexpected_buffered >= attr_.credits;
  if ((!r || buffered) && credit_held &&
      p.unexpected_withheld >= attr_.credits) {
    // It would be kept, and the peer sent past its credits: memory stays
    // bounded, the message is dropped and counted (and not acknowledged).
    ++stats_.overrun_dropped;
    return false;
  }
  uint32_t rx = internal::kNil;
  if (r) {
    rx = rx_->of_handle_[tagged][r->index];
    if (!(rx_->ops_[rx].flags & kMultiRecv)) {
      m.RemoveReceive(*r);
      rx_->ops_[rx].handle = ReceiveHandle{};
    }
  }
  if (r && !buffered) {
    if (rendezvous) {
      StartRead(rx, peer, h, 0);
    } else {
      Deliver(rx, peer, h, payload, len);
      if (h.flags & (wire::kAckMatch | wire::kAckDelivery)) {
        SendAck(peer, h.msg_id);
      }
    }
    return true;
  }
  // Unexpected, or held in our buffer (buffered mode).
  const uint32_t ui = TakeSlot(rx_->unexpected_, rx_->unexpected_free_);
  Unexpected& un = rx_->unexpected_[ui];
  bool return_credit = true;
  un.used = true;
  un.credit_held = credit_held;
  if (un.credit_held) {
    return_credit = false;
    ++p.unexpected_withheld;
  } else {
    ++p.unexpected_buffered;
  }
  un.ep = this;
  un.peer = peer;
  un.header = h;
  un.payload.assign(payload, payload + len);
  un.handle = m.AddUnexpected({tagged ? h.tag : 0, source, ui});
  ++stats_.unexpected;
  ++stats_.unexpected_held;
  if (!rendezvous && (h.flags & wire::kAckDelivery)) SendAck(peer, h.msg_id);
  // Buffered: untagged messages are reported at once, tagged ones when a
  // posted tag matches.
  if (buffered && (!tagged || r)) ReportBuffered(ui, rx);
  return return_credit;
}

}  // namespace softfab::core
