// CmChannel (see cm_channel.h): the connection manager's datagram slots.
#include "core/cm_channel.h"

#include <algorithm>

#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

namespace {
constexpr size_t kGrhBytes = 40;
}  // namespace

Status CmChannel::Register(tp::ProtectionDomain* pd, size_t mtu_bytes) {
  recv_slot_bytes_ = std::max(kSlotBytes, kGrhBytes + mtu_bytes);
  buffers_.AllocateZeroed((recv_slot_bytes_ + kSlotBytes) * kBuffers);
  auto mr = pd->RegMr(buffers_.data(), buffers_.size(), tp::kAccessLocalWrite);
  if (!mr.ok()) return mr.status();
  mr_ = *mr;
  return Status::Ok();
}

Status CmChannel::Start(tp::QueuePair* qp) {
  qp_ = qp;
  for (uint32_t i = 0; i < kBuffers; ++i) {
    if (Status s = PostOneRecv(qp_, WrId(kWrCmRecv, i), Slot(i),
                               recv_slot_bytes_, mr_->lkey());
        !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

void CmChannel::Deregister() {
  if (mr_) (void)mr_->Destroy();
}

uint32_t CmChannel::TakeSendSlot() {
  for (uint32_t k = 0; k < kBuffers; ++k) {
    const uint32_t i = (send_next_ + k) % kBuffers;
    if (!send_busy_[i]) {
      send_busy_[i] = true;
      ++sends_in_flight_;
      send_next_ = i + 1;
      return i;
    }
  }
  return kBuffers;
}

void CmChannel::SendDone(uint64_t wr_id) {
  const uint64_t slot = IndexOf(wr_id);
  if (slot < kBuffers || slot >= 2 * kBuffers) return;
  if (send_busy_[slot - kBuffers]) {
    send_busy_[slot - kBuffers] = false;
    --sends_in_flight_;
  }
}

Status CmChannel::Send(const wire::CmMessage& m, tp::AddressHandle* ah,
                       const wire::Name& to) {
  const uint32_t i = TakeSendSlot();
  if (i == kBuffers) return Status(EAGAIN, "every CM send slot is in flight");
  // Send slots follow the receive slots.
  wire::EncodeCm(m, Slot(kBuffers + i));
  return PostSlot(kBuffers + i, wire::CmSize(m), ah, to);
}

Status CmChannel::SendVersionRefused(const wire::Name& from,
                                     tp::AddressHandle* ah,
                                     const wire::Name& to) {
  const uint32_t i = TakeSendSlot();
  if (i == kBuffers) return Status(EAGAIN, "every CM send slot is in flight");
  wire::EncodeCmPrefix(wire::CmType::kVersionRefused, from, Slot(kBuffers + i));
  return PostSlot(kBuffers + i, wire::kCmPrefixBytes, ah, to);
}

Status CmChannel::PostSlot(uint32_t slot, size_t len, tp::AddressHandle* ah,
                           const wire::Name& to) {
  uint8_t* buf = Slot(slot);
  tp::Sge sge{reinterpret_cast<uint64_t>(buf), static_cast<uint32_t>(len),
              mr_->lkey()};
  tp::SendWr wr;
  wr.wr_id = WrId(kWrCmSend, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = tp::WrOpcode::kSend;
  wr.send_flags = tp::kSendSignaled;
  wr.ud.ah = ah;
  wr.ud.remote_qpn = to.cm_qpn;
  wr.ud.remote_qkey = to.qkey;
  const tp::SendWr* bad = nullptr;
  Status s = qp_->PostSend(&wr, &bad);
  if (!s.ok()) SendDone(wr.wr_id);  // never posted: the slot is free
  return s;
}

bool CmChannel::Received(const tp::WorkCompletion& wc, const uint8_t** bytes,
                         size_t* len) const {
  if (wc.status != tp::WcStatus::kSuccess || wc.byte_len <= kGrhBytes) {
    return false;
  }
  const uint32_t i = static_cast<uint32_t>(IndexOf(wc.wr_id));
  *bytes = Slot(i) + kGrhBytes;
  *len = wc.byte_len - kGrhBytes;
  return true;
}

void CmChannel::Repost(const tp::WorkCompletion& wc) {
  if (wc.status == tp::WcStatus::kWrFlushErr) return;
  const uint32_t i = static_cast<uint32_t>(IndexOf(wc.wr_id));
  (void)PostOneRecv(qp_, wc.wr_id, Slot(i), recv_slot_bytes_, mr_->lkey());
}

}  // namespace softfab::core
