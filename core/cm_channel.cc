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
  buffers_.assign((recv_slot_bytes_ + kSlotBytes) * kBuffers, 0);
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

Status CmChannel::Send(const wire::CmMessage& m, tp::AddressHandle* ah,
                       const wire::Name& to) {
  // Send slots follow the receive slots.
  const uint32_t slot = kBuffers + (send_next_++ % kBuffers);
  uint8_t* buf = Slot(slot);
  wire::EncodeCm(m, buf);
  tp::Sge sge{reinterpret_cast<uint64_t>(buf),
              static_cast<uint32_t>(wire::CmSize(m)), mr_->lkey()};
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
  return qp_->PostSend(&wr, &bad);
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
