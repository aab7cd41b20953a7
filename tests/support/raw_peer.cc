// RawPeer (see raw_peer.h): softfab's protocol spoken by hand.
#include "tests/support/raw_peer.h"

#include <algorithm>
#include <cerrno>

#include "tests/support/qp_bringup.h"

namespace softfab::fuzz {

namespace tp = ::softfab::transport;

namespace {
constexpr uint64_t kCmRecvTag = 1ull << 40;  // wr_id of a CM receive slot.
constexpr uint64_t kRcRecvTag = 1ull << 41;  // wr_id of an RC receive slot.
constexpr size_t kGrhBytes = 40;
constexpr uint32_t kDepth = 256;

tp::AhAttr PathTo(const wire::Name& to) {
  tp::AhAttr ah;
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, to.gid, 16);
  ah.grh.hop_limit = 64;
  ah.dlid = to.lid;
  ah.port_num = RawPeer::kPort;
  return ah;
}
}  // namespace

RawPeer::RawPeer(tp::Device* device) : device_(device) {
  auto pd = device->AllocPd();
  auto scq = device->CreateCq(4 * kDepth);
  auto rcq = device->CreateCq(4 * kDepth);
  if (!pd.ok() || !scq.ok() || !rcq.ok()) return;
  pd_ = *pd;
  send_cq_ = *scq;
  recv_cq_ = *rcq;
  tp::Gid gid{};
  if (!device->QueryPort(kPort, &port_).ok() ||
      !device->QueryGid(kPort, 0, &gid).ok()) {
    return;
  }
  buffer_.assign(kBufferBytes, 0);
  cm_.assign(kCmSlotBytes * (kCmRecvSlots + 1), 0);
  auto mr = pd_->RegMr(buffer_.data(), buffer_.size(), tp::kAccessAll);
  auto cm_mr = pd_->RegMr(cm_.data(), cm_.size(), tp::kAccessLocalWrite);
  if (!mr.ok() || !cm_mr.ok()) return;
  mr_ = *mr;
  cm_mr_ = *cm_mr;

  tp::QpInitAttr init;
  init.send_cq = send_cq_;
  init.recv_cq = recv_cq_;
  init.qp_type = tp::QpType::kUd;
  init.cap.max_send_wr = kDepth;
  init.cap.max_recv_wr = kCmRecvSlots;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  auto ud = pd_->CreateQp(init);
  init.qp_type = tp::QpType::kRc;
  init.cap.max_recv_wr = kRcRecvSlots;
  auto rc = pd_->CreateQp(init);
  if (!ud.ok() || !rc.ok()) return;
  ud_ = *ud;
  rc_ = *rc;
  static_assert(kPort == 1, "the test bring-up uses port 1");
  if (!testing::UdToRts(ud_, kQkey, /*sq_psn=*/0).ok()) return;
  for (uint32_t i = 0; i < kCmRecvSlots; ++i) {
    if (!PostCmRecv(i).ok()) return;
  }
  std::memcpy(name_.gid, gid.raw, 16);
  name_.lid = port_.lid;
  name_.cm_qpn = ud_->qp_num();
  name_.qkey = kQkey;
  ok_ = true;
}

Status RawPeer::PostCmRecv(uint32_t slot) {
  tp::Sge sge{reinterpret_cast<uint64_t>(cm_.data() + slot * kCmSlotBytes),
              static_cast<uint32_t>(kCmSlotBytes), cm_mr_->lkey()};
  tp::RecvWr wr;
  wr.wr_id = kCmRecvTag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const tp::RecvWr* bad = nullptr;
  return ud_->PostRecv(&wr, &bad);
}

Status RawPeer::PostRcRecv(uint32_t slot) {
  tp::Sge sge{reinterpret_cast<uint64_t>(buffer_.data() + kRcRecvOffset +
                                         slot * kRcSlotBytes),
              static_cast<uint32_t>(kRcSlotBytes), mr_->lkey()};
  tp::RecvWr wr;
  wr.wr_id = kRcRecvTag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const tp::RecvWr* bad = nullptr;
  return rc_->PostRecv(&wr, &bad);
}

Status RawPeer::SendCm(const wire::Name& to, const uint8_t* bytes, size_t len) {
  len = std::min(len, kCmSlotBytes - kGrhBytes);
  uint8_t* slot = cm_.data() + kCmRecvSlots * kCmSlotBytes;
  std::memcpy(slot, bytes, len);
  auto ah = pd_->CreateAh(PathTo(to));
  if (!ah.ok()) return ah.status();
  tp::Sge sge{reinterpret_cast<uint64_t>(slot), static_cast<uint32_t>(len),
              cm_mr_->lkey()};
  tp::SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = tp::WrOpcode::kSend;
  wr.send_flags = tp::kSendSignaled;
  wr.ud.ah = *ah;
  wr.ud.remote_qpn = to.cm_qpn;
  wr.ud.remote_qkey = to.qkey;
  const tp::SendWr* bad = nullptr;
  const Status s = ud_->PostSend(&wr, &bad);
  // The device copies a UD send when it runs; run it before the slot is
  // reused and the AH destroyed.
  PollSends();
  (void)(*ah)->Destroy();
  return s;
}

wire::CmMessage RawPeer::Cm(wire::CmType type, uint64_t request_id,
                            uint32_t credits) const {
  wire::CmMessage m;
  m.type = type;
  m.from = name_;
  m.rc_qpn = rc_->qp_num();
  m.psn = psn_;
  m.credit_addr = credit_word_address();
  m.credit_rkey = mr_->rkey();
  m.credits = credits;
  m.request_id = request_id;
  // Its RC QP's path MTU and one READ each way (ConnectRc).
  m.mtu = static_cast<uint8_t>(port_.active_mtu);
  m.reads_initiated = m.reads_served = 1;
  return m;
}

bool RawPeer::PollRecv(wire::CmMessage* m, int* rc_messages, bool* empty) {
  tp::WorkCompletion wc;
  *empty = recv_cq_->Poll(1, &wc) <= 0;
  if (*empty) return false;
  const uint32_t slot = static_cast<uint32_t>(wc.wr_id & 0xFFFF);
  const bool flushed = wc.status == tp::WcStatus::kWrFlushErr;
  if (wc.wr_id & kRcRecvTag) {
    *rc_messages += wc.status == tp::WcStatus::kSuccess;
    // After an error the QP is reset on the next ConnectRc, which posts
    // the receives again.
    if (!flushed && rc_->state() != tp::QpState::kError) {
      (void)PostRcRecv(slot);
    }
    return false;
  }
  bool got = false;
  last_datagram_.clear();
  if (wc.status == tp::WcStatus::kSuccess && wc.byte_len > kGrhBytes) {
    const uint8_t* bytes = cm_.data() + slot * kCmSlotBytes + kGrhBytes;
    last_datagram_.assign(bytes, bytes + wc.byte_len - kGrhBytes);
    got = wire::DecodeCm(bytes, wc.byte_len - kGrhBytes, m);
  }
  if (!flushed) (void)PostCmRecv(slot);
  return got;
}

bool RawPeer::ReceiveDatagram(std::vector<uint8_t>* bytes) {
  int rc_messages = 0;
  bool empty = false;
  wire::CmMessage ignored;
  while (!empty) {
    (void)PollRecv(&ignored, &rc_messages, &empty);
    if (!last_datagram_.empty()) {
      *bytes = last_datagram_;
      return true;
    }
  }
  return false;
}

bool RawPeer::ReceiveCm(wire::CmMessage* m) {
  int rc_messages = 0;
  bool empty = false;
  while (!empty) {
    if (PollRecv(m, &rc_messages, &empty)) return true;
  }
  return false;
}

int RawPeer::PollRcRecvs() {
  int rc_messages = 0;
  bool empty = false;
  wire::CmMessage ignored;
  while (!empty) (void)PollRecv(&ignored, &rc_messages, &empty);
  return rc_messages;
}

Status RawPeer::Handshake(const wire::Name& to, uint32_t credits,
                          const std::function<void()>& progress, int rounds,
                          wire::CmMessage* reply) {
  const wire::CmMessage m =
      Cm(wire::CmType::kRequest, next_request_id_++, credits);
  uint8_t bytes[wire::kCmMaxBytes];
  wire::EncodeCm(m, bytes);
  if (Status s = SendCm(to, bytes, wire::CmSize(m)); !s.ok()) return s;
  for (int i = 0; i < rounds; ++i) {
    progress();
    while (ReceiveCm(reply)) {
      if (reply->type == wire::CmType::kReply &&
          reply->request_id == m.request_id) {
        return ConnectRc(to, reply->rc_qpn, reply->psn);
      }
    }
  }
  return Status(ETIMEDOUT, "no reply to the connection request");
}

Status RawPeer::ConnectRc(const wire::Name& to, uint32_t remote_qpn,
                          uint32_t remote_psn) {
  tp::QpAttr a;
  a.qp_state = tp::QpState::kReset;
  if (Status s = rc_->Modify(a, tp::kQpState); !s.ok()) return s;
  PollSends();  // Whatever the reset flushed.
  testing::RcParams p;
  p.mtu = port_.active_mtu;
  p.sq_psn = psn_;
  p.rq_psn = remote_psn;
  p.max_rd_atomic = p.max_dest_rd_atomic = 1;
  p.min_rnr_timer = 12;
  p.retry_cnt = 3;
  p.rnr_retry = 3;  // A flood that the receiver refuses ends, in error.
  p.access = tp::kAccessRemoteWrite | tp::kAccessRemoteRead;
  if (Status s = testing::ConnectRc(rc_, PathTo(to), remote_qpn, p); !s.ok()) {
    return s;
  }
  for (uint32_t i = 0; i < kRcRecvSlots; ++i) {
    if (Status s = PostRcRecv(i); !s.ok()) return s;
  }
  return Status::Ok();
}

Status RawPeer::BreakRc() {
  tp::QpAttr a;
  a.qp_state = tp::QpState::kError;
  return rc_->Modify(a, tp::kQpState);
}

Status RawPeer::Send(size_t offset, size_t len) {
  return Post(tp::WrOpcode::kSend, offset, len, 0, 0);
}

Status RawPeer::Write(size_t offset, size_t len, uint64_t remote_addr,
                      uint32_t rkey) {
  return Post(tp::WrOpcode::kRdmaWrite, offset, len, remote_addr, rkey);
}

Status RawPeer::Post(tp::WrOpcode opcode, size_t offset, size_t len,
                     uint64_t remote_addr, uint32_t rkey) {
  if (offset > kBufferBytes || len > kBufferBytes - offset) {
    return Status(EINVAL, "outside the buffer");
  }
  tp::Sge sge{reinterpret_cast<uint64_t>(buffer_.data() + offset),
              static_cast<uint32_t>(len), mr_->lkey()};
  tp::SendWr wr;
  wr.sg_list = &sge;
  wr.num_sge = len > 0 ? 1 : 0;
  wr.opcode = opcode;
  wr.send_flags = tp::kSendSignaled;
  wr.rdma.remote_addr = remote_addr;
  wr.rdma.rkey = rkey;
  const tp::SendWr* bad = nullptr;
  return rc_->PostSend(&wr, &bad);
}

int RawPeer::PollSends() {
  tp::WorkCompletion wc[16];
  int errors = 0;
  while (true) {
    const int n = send_cq_->Poll(16, wc);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i)
      errors += wc[i].status != tp::WcStatus::kSuccess;
  }
  return errors;
}

}  // namespace softfab::fuzz
