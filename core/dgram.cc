// FI_EP_DGRAM: unreliable datagrams straight over the endpoint's UD QP. Each
// buffer starts with a 40-byte prefix where a received datagram's GRH lands
// (FI_MSG_PREFIX); no connections, credits or acks.
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

Status Endpoint::InitDgram() {
  // Datagrams up to the path MTU, each received with its GRH in front.
  dgram_mtu_ = tp::MtuBytes(port_.active_mtu);
  dgram_slot_bytes_ = kMsgPrefixBytes + dgram_mtu_;
  if (Status s = tx_.RegisterSlots(pd_, attr_.tx_size, dgram_mtu_,
                                   /*control=*/false);
      !s.ok()) {
    return s;
  }
  dgram_rx_.AllocateZeroed(dgram_slot_bytes_ * attr_.rx_size);
  auto rx =
      pd_->RegMr(dgram_rx_.data(), dgram_rx_.size(), tp::kAccessLocalWrite);
  if (!rx.ok()) return rx.status();
  dgram_mr_ = *rx;
  auto qp = NewUdQp(attr_.tx_size, attr_.rx_size);
  if (!qp.ok()) return qp.status();
  cm_qp_ = *qp;
  for (uint32_t i = 0; i < attr_.rx_size; ++i) {
    if (Status s = PostOneRecv(cm_qp_, WrId(kWrDgramRecv, i),
                               dgram_rx_.data() + i * dgram_slot_bytes_,
                               dgram_slot_bytes_, dgram_mr_->lkey());
        !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

Status Endpoint::SendDgram(const SendArgs& a, size_t len) {
  if (av_ == nullptr) return InvalidArgument("no address vector bound");
  auto name = av_->Lookup(a.dest);
  if (!name) return InvalidArgument("destination is not in the address vector");
  tp::AddressHandle*& ah = dgram_ah_[a.dest];
  if (ah == nullptr) {
    auto made = pd_->CreateAh(AddressOf(*name));
    if (!made.ok()) {
      dgram_ah_.erase(a.dest);
      return made.status();
    }
    ah = *made;
  }
  // Never binds (DGRAM sends are at most tx_size, less than the room), but
  // every post asks the send CQ's budget.
  if (!SendCqHasRoom()) {
    ++stats_.eagain;
    return TryAgain("the send CQ is full: read the CQ, then retry");
  }
  auto acquired = AcquireTx(a, len, internal::kNil);
  if (!acquired.ok()) return acquired.status();
  const uint32_t index = *acquired;
  TxOp& op = tx_.op(index);
  op.flags = kSend | kMsg;
  op.level = (a.flags & kInjectComplete) ? kInjectComplete : kTransmitComplete;
  // The first 40 bytes are the sender's prefix space; the datagram is the rest.
  uint8_t* slot = tx_.Slot(index);
  size_t skip = kMsgPrefixBytes, off = 0;
  for (size_t i = 0; i < a.iov_count; ++i) {
    const uint8_t* p = static_cast<const uint8_t*>(a.iov[i].iov_base);
    const size_t n = a.iov[i].iov_len;
    const size_t drop = std::min(skip, n);
    skip -= drop;
    if (n > drop) std::memcpy(slot + off, p + drop, n - drop);
    off += n - drop;
  }
  tp::Sge sge{reinterpret_cast<uint64_t>(slot), static_cast<uint32_t>(off),
              tx_.lkey()};
  tp::SendWr wr;
  wr.wr_id = WrId(kWrTx, index);
  wr.sg_list = &sge;
  wr.num_sge = off > 0 ? 1 : 0;
  wr.opcode = tp::WrOpcode::kSend;
  wr.send_flags = tp::kSendSignaled;
  wr.ud.ah = ah;
  wr.ud.remote_qpn = name->cm_qpn;
  wr.ud.remote_qkey = name->qkey;
  const tp::SendWr* bad = nullptr;
  if (Status s = cm_qp_->PostSend(&wr, &bad); !s.ok()) {
    if (op.reserved) tx_cq_->Unreserve();
    FreeTx(index);
    return s;
  }
  ++send_cq_used_;
  op.sent = true;
  if (op.level == kInjectComplete) CompleteTx(index, 0);
  return Status::Ok();
}

void Endpoint::OnDgram(const tp::WorkCompletion& wc) {
  const uint32_t index = static_cast<uint32_t>(IndexOf(wc.wr_id));
  uint8_t* buf = dgram_rx_.data() + index * dgram_slot_bytes_;
  if (wc.status == tp::WcStatus::kWrFlushErr) return;
  if (wc.status == tp::WcStatus::kSuccess && wc.byte_len >= kMsgPrefixBytes) {
    // The sender, as this endpoint's AV names it (a source no directed
    // receive can name when it is not in the AV).
    std::optional<uint64_t> from;
    if (av_ != nullptr) from = av_->FindByLidQpn(wc.slid, wc.src_qp);
    const uint64_t source = from ? *from : (uint64_t{1} << 62);
    if (const uint32_t rx = rx_->FindReceive(false, 0, source);
        rx != internal::kNil) {
      rx_->Take(rx);  // Never a multi-recv buffer (CheckRecv).
      const RxOp& op = rx_->op(rx);
      // The buffer gets the GRH prefix and then the data (FI_MSG_PREFIX).
      const size_t n = ScatterInto(op.iov, op.iov_count, 0, buf, wc.byte_len);
      CqEntry e;
      e.op_context = op.context;
      e.flags = kRecv | kMsg;
      e.buf = op.iov_count ? op.iov[0].iov_base : nullptr;
      e.len = n;
      e.src_addr = from ? *from : ~uint64_t{0};
      rx_->CompleteRx(rx, e, n < wc.byte_len ? kErrTruncated : 0,
                      wc.byte_len - n);
    } else {
      ++stats_.dgram_dropped;  // Unreliable: no receive, no datagram.
    }
  }
  (void)PostOneRecv(cm_qp_, wc.wr_id, buf, dgram_slot_bytes_,
                    dgram_mr_->lkey());
}

}  // namespace softfab::core
