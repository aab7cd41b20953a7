#include "core/endpoint.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

namespace {

constexpr int kPollBatch = 32;

// RC: 7 retries of the ack timeout (EndpointAttr::rc_timeout); the core never
// provokes RNR (credits), so RNR retry is unlimited.
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetryForever = 7;
constexpr uint8_t kMinRnrTimer = 12;

}  // namespace

// ------------------------------------------------------------------- set-up

Endpoint::Endpoint(transport::Device* device, transport::ProtectionDomain* pd,
                   const EndpointAttr& attr)
    : device_(device), pd_(pd), attr_(attr) {}

StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(
    transport::Device* device, transport::ProtectionDomain* pd,
    const EndpointAttr& attr) {
  if (device == nullptr || pd == nullptr) {
    return InvalidArgument("endpoint needs a device and a protection domain");
  }
  if (attr.tx_size == 0 || attr.rx_size == 0 || attr.credits == 0 ||
      attr.peers_max == 0 || attr.eager_max == 0 ||
      attr.inject_size > attr.eager_max || attr.tx_size > (1u << 20) ||
      attr.rx_size > (1u << 20) || attr.rc_timeout == 0 ||
      attr.rc_timeout > 31) {
    return InvalidArgument("endpoint attributes out of range");
  }
  std::unique_ptr<Endpoint> ep(new Endpoint(device, pd, attr));
  if (Status s = ep->Init(); !s.ok()) return s;
  return ep;
}

Status Endpoint::Init() {
  RxContext::Attr rx_attr;
  rx_attr.size = attr_.rx_size;
  rx_attr.caps = attr_.caps;
  rx_attr.buffered = attr_.buffered;
  rx_attr.buffered_limit = attr_.eager_max;
  auto rx = RxContext::Create(rx_attr);
  if (!rx.ok()) return rx.status();
  own_rx_ = std::move(*rx);
  rx_ = own_rx_.get();
  if (Status s = device_->QueryPort(kPort, &port_); !s.ok()) return s;
  if (Status s = device_->QueryGid(kPort, 0, &gid_); !s.ok()) return s;
  tp::DeviceAttr dev{};
  if (Status s = device_->QueryDevice(&dev); !s.ok()) return s;

  const uint32_t send_depth = attr_.tx_size + kControlSlots + 8;
  const int32_t send_cqe = static_cast<int32_t>(send_depth + attr_.peers_max +
                                                CmChannel::kBuffers + 64);
  rx_bounce_max_ =
      std::min<uint32_t>(static_cast<uint32_t>(dev.max_srq_wr),
                         std::max<uint32_t>(attr_.credits, attr_.credits * 16));
  const int32_t recv_cqe = static_cast<int32_t>(
      std::max(rx_bounce_max_, attr_.rx_size) + CmChannel::kBuffers + 64);
  auto scq = device_->CreateCq(send_cqe);
  if (!scq.ok()) return scq.status();
  send_cq_ = *scq;
  auto rcq = device_->CreateCq(recv_cqe);
  if (!rcq.ok()) return rcq.status();
  recv_cq_ = *rcq;
  if (Status s = attr_.type == EndpointType::kDgram ? InitDgram() : InitRdm();
      !s.ok()) {
    return s;
  }
  std::memcpy(name_.gid, gid_.raw, 16);
  name_.lid = port_.lid;
  name_.cm_qpn = cm_qp_->qp_num();
  name_.qkey = kQkey;
  tx_ops_.resize(attr_.tx_size);
  for (uint32_t i = attr_.tx_size; i-- > 0;) tx_free_.push_back(i);
  peers_.reserve(attr_.peers_max);
  return Status::Ok();
}

StatusOr<tp::QueuePair*> Endpoint::NewUdQp(uint32_t send_depth,
                                           uint32_t recv_depth) {
  tp::QpInitAttr init;
  init.send_cq = send_cq_;
  init.recv_cq = recv_cq_;
  init.qp_type = tp::QpType::kUd;
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = recv_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  auto qp = pd_->CreateQp(init);
  if (!qp.ok()) return qp.status();
  tp::QpAttr a;
  a.qp_state = tp::QpState::kInit;
  a.pkey_index = 0;
  a.port_num = kPort;
  a.qkey = kQkey;
  Status s = (*qp)->Modify(
      a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort | tp::kQpQkey);
  a.qp_state = tp::QpState::kRtr;
  if (s.ok()) s = (*qp)->Modify(a, tp::kQpState);
  a.qp_state = tp::QpState::kRts;
  a.sq_psn = 0;
  if (s.ok()) s = (*qp)->Modify(a, tp::kQpState | tp::kQpSqPsn);
  if (!s.ok()) {
    (void)(*qp)->Destroy();
    return s;
  }
  return *qp;
}

Status Endpoint::InitDgram() {
  // Datagrams up to the path MTU, each received with its GRH in front.
  dgram_mtu_ = tp::MtuBytes(port_.active_mtu);
  dgram_slot_bytes_ = kMsgPrefixBytes + dgram_mtu_;
  tx_slot_bytes_ = dgram_mtu_;
  tx_bounce_.assign(tx_slot_bytes_ * attr_.tx_size, 0);
  dgram_rx_.assign(dgram_slot_bytes_ * attr_.rx_size, 0);
  auto tx = pd_->RegMr(tx_bounce_.data(), tx_bounce_.size(), 0);
  if (!tx.ok()) return tx.status();
  tx_mr_ = *tx;
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

Status Endpoint::InitRdm() {
  tp::SrqAttr srq_attr;
  srq_attr.max_wr = rx_bounce_max_;
  srq_attr.max_sge = 1;
  auto srq = pd_->CreateSrq(srq_attr);
  if (!srq.ok()) return srq.status();
  srq_ = *srq;

  // Bounce buffers: tx slots hold header + payload of one send; rx buffers
  // take one SEND each.
  tx_slot_bytes_ = wire::kHeaderBytes + attr_.eager_max;
  rx_slot_bytes_ = wire::kHeaderBytes + attr_.eager_max;
  tx_bounce_.assign(
      tx_slot_bytes_ * attr_.tx_size + wire::kHeaderBytes * kControlSlots, 0);
  // Registered in this order (the device hands out keys in order): tx
  // slots, the CM's slots, credit words, credit sources.
  auto tx = pd_->RegMr(tx_bounce_.data(), tx_bounce_.size(), 0);
  if (!tx.ok()) return tx.status();
  tx_mr_ = *tx;
  if (Status s = cm_.Register(pd_); !s.ok()) return s;
  if (Status s = credits_.Register(pd_, attr_.peers_max, attr_.credits);
      !s.ok()) {
    return s;
  }

  // The CM's UD QP.
  auto qp = NewUdQp(CmChannel::kBuffers, CmChannel::kBuffers);
  if (!qp.ok()) return qp.status();
  cm_qp_ = *qp;
  return cm_.Start(cm_qp_);
}

StatusOr<std::unique_ptr<Endpoint>> Endpoint::CreateListener(
    transport::Device* device, transport::ProtectionDomain* pd,
    uint32_t requests_max) {
  // A listener only runs the CM: the smallest data path there is.
  EndpointAttr attr;
  attr.type = EndpointType::kMsg;
  attr.tx_size = 1;
  attr.rx_size = 1;
  attr.credits = 1;
  attr.eager_max = 64;
  attr.inject_size = 0;
  attr.peers_max = requests_max;
  auto ep = Create(device, pd, attr);
  if (ep.ok()) (*ep)->listener_ = true;
  return ep;
}

Endpoint::~Endpoint() {
  if (eq_) {
    eq_->Remove(this);
    eq_->Purge(user_handle_);  // Events naming us would dangle.
  }
  auto& eps = rx_->endpoints_;
  if (auto it = std::find(eps.begin(), eps.end(), this); it != eps.end()) {
    eps.erase(it);
  }
  if (rx_ != own_rx_.get()) {
    // A shared context outlives us: take back what refers to this endpoint.
    for (uint32_t i = 0; i < rx_->unexpected_.size(); ++i) {
      Unexpected& un = rx_->unexpected_[i];
      if (!un.used || un.ep != this) continue;
      if (un.recv_context != internal::kNil) {
        // Reported to the application, which still holds its buffer and
        // context: kept until claimed or discarded, with no endpoint behind
        // it (its sender is gone with us).
        un.ep = nullptr;
        continue;
      }
      rx_->matchers_[(un.header.flags & wire::kTagged) != 0].RemoveUnexpected(
          un.handle);
      un.credit_held = true;  // Its count goes with the peer.
      ReleaseUnexpected(i);
    }
    for (uint32_t ri = 0; ri < reads_.size(); ++ri) {
      if (reads_[ri].used) OnReadDone(ri, false);
    }
    if (rx_->endpoints_.empty()) {
      // The last user left: the context forgets its AV, and its CQ too when
      // nothing posted or held still needs it (those keep the CQ open).
      rx_->av_ = nullptr;
      if (rx_->Idle()) rx_->cq_ = nullptr;
    }
  }
  // QPs first (they reference the SRQ and CQs), then the rest. Failures are
  // ignored: the device releases everything with the fabric anyway.
  for (Peer& p : peers_) {
    if (p.qp) (void)p.qp->Destroy();
    if (p.ah) (void)p.ah->Destroy();
  }
  if (cm_qp_) (void)cm_qp_->Destroy();
  if (srq_) (void)srq_->Destroy();
  // Registrations of rendezvous operations still in flight.
  for (TxOp& op : tx_ops_) {
    if (op.rdv_mr) (void)op.rdv_mr->Destroy();
  }
  for (Read& rd : reads_) {
    for (tp::MemoryRegion* mr : rd.mrs) {
      if (mr) (void)mr->Destroy();
    }
  }
  for (auto& [dest, ah] : dgram_ah_) (void)ah->Destroy();
  if (tx_mr_) (void)tx_mr_->Destroy();
  cm_.Deregister();
  credits_.Deregister();
  if (dgram_mr_) (void)dgram_mr_->Destroy();
  for (tp::MemoryRegion* mr : rx_chunk_mrs_) (void)mr->Destroy();
  if (send_cq_) (void)send_cq_->Destroy();
  if (recv_cq_) (void)recv_cq_->Destroy();
}

Status Endpoint::BindCq(CompletionQueue* cq, uint64_t flags) {
  if (enabled_) return InvalidArgument("endpoint already enabled");
  if (cq == nullptr) return InvalidArgument("null completion queue");
  if ((flags & (kSend | kRecv)) == 0 ||
      (flags & ~(kSend | kRecv | kSelectiveCompletion)) != 0) {
    return InvalidArgument("bind flags must be FI_TRANSMIT and/or FI_RECV");
  }
  const bool selective = flags & kSelectiveCompletion;
  if (flags & kSend) {
    tx_cq_ = cq;
    tx_selective_ = selective;
  }
  if (flags & kRecv) {
    rx_cq_ = cq;
    rx_selective_ = selective;
  }
  return Status::Ok();
}

Status Endpoint::BindAv(AddressVector* av) {
  if (enabled_) return InvalidArgument("endpoint already enabled");
  if (av == nullptr) return InvalidArgument("null address vector");
  av_ = av;
  return Status::Ok();
}

Status Endpoint::Enable() {
  if (enabled_) return Status::Ok();
  if (tx_cq_ == nullptr || rx_cq_ == nullptr) {
    return InvalidArgument("bind a CQ for FI_TRANSMIT and FI_RECV first");
  }
  if (attr_.type == EndpointType::kRdm && av_ == nullptr) {
    return InvalidArgument("an RDM endpoint needs a bound address vector");
  }
  if (rx_->shared_) {
    if (rx_->cq_ != nullptr &&
        (rx_->cq_ != rx_cq_ || rx_->selective_ != rx_selective_)) {
      return InvalidArgument(
          "endpoints sharing a receive context must bind the same receive CQ "
          "(with the same selective-completion setting)");
    }
    if (rx_->av_ != nullptr && av_ != nullptr && rx_->av_ != av_) {
      return InvalidArgument(
          "endpoints sharing a receive context must bind the same AV");
    }
    if (rx_->attr_.buffered_limit > attr_.eager_max) {
      return InvalidArgument(
          "the shared context's FI_OPT_BUFFERED_LIMIT exceeds this endpoint's "
          "eager size");
    }
  }
  rx_->cq_ = rx_cq_;
  rx_->selective_ = rx_selective_;
  if (rx_->av_ == nullptr) rx_->av_ = av_;
  rx_->endpoints_.push_back(this);
  enabled_ = true;
  return Status::Ok();
}

Status Endpoint::SetMinMultiRecv(size_t bytes) {
  return rx_->SetMinMultiRecv(bytes);
}

Status Endpoint::BindRx(RxContext* rx) {
  if (enabled_) return InvalidArgument("endpoint already enabled");
  if (rx == nullptr || !rx->shared_) {
    return InvalidArgument("not a shared receive context");
  }
  if (attr_.type == EndpointType::kDgram) {
    return NotSupported("DGRAM endpoints cannot share a receive context");
  }
  if (rx->attr_.buffered != rx_->attr_.buffered) {
    return InvalidArgument(
        "the endpoint and the shared context disagree on FI_BUFFERED_RECV");
  }
  rx_ = rx;
  return Status::Ok();
}

Status Endpoint::SetBufferedLimit(size_t bytes) {
  if (enabled_) {
    return Status(kErrOpBadState, "set FI_OPT_BUFFERED_LIMIT before enabling");
  }
  if (bytes > attr_.eager_max) {
    return InvalidArgument("FI_OPT_BUFFERED_LIMIT exceeds the eager size");
  }
  return rx_->SetBufferedLimit(bytes);
}

Status Endpoint::SetBufferedMin(size_t bytes) {
  if (enabled_) {
    return Status(kErrOpBadState, "set FI_OPT_BUFFERED_MIN before enabling");
  }
  if (bytes > attr_.eager_max) {
    return InvalidArgument("FI_OPT_BUFFERED_MIN exceeds the eager size");
  }
  buffered_min_ = bytes;
  return Status::Ok();
}

// ------------------------------------------------------------------- peers

uint32_t Endpoint::FindOrAddPeer(const wire::Name& name) {
  if (auto it = peer_by_name_.find(name); it != peer_by_name_.end()) {
    return it->second;
  }
  const uint32_t index = static_cast<uint32_t>(peers_.size());
  peers_.emplace_back();
  peers_.back().name = name;
  peer_by_name_.emplace(name, index);
  return index;
}

StatusOr<uint32_t> Endpoint::PeerFor(uint64_t dest) {
  if (attr_.type == EndpointType::kMsg) {
    // One connection; the destination address is ignored (fi_msg(3)).
    if (listener_ || peers_.empty()) {
      return Status(ENOTCONN, "FI_EP_MSG endpoint is not connected");
    }
    return 0u;
  }
  if (av_ == nullptr) return InvalidArgument("no address vector bound");
  // AV index -> peer, cached while the AV is unchanged.
  if (peer_of_dest_generation_ != av_->generation()) {
    peer_of_dest_.clear();
    peer_of_dest_generation_ = av_->generation();
  }
  if (dest < peer_of_dest_.size() && peer_of_dest_[dest] != internal::kNil) {
    return peer_of_dest_[dest];
  }
  auto name = av_->Lookup(dest);
  if (!name) return InvalidArgument("destination is not in the address vector");
  uint32_t peer;
  if (auto it = peer_by_name_.find(*name); it != peer_by_name_.end()) {
    peer = it->second;
  } else if (peers_.size() >= attr_.peers_max) {
    return NoMemory("endpoint holds peers_max connections already");
  } else {
    peer = FindOrAddPeer(*name);
  }
  if (dest < (uint64_t{1} << 20)) {  // AV indices are small; bound the cache.
    if (peer_of_dest_.size() <= dest) {
      peer_of_dest_.resize(dest + 1, internal::kNil);
    }
    peer_of_dest_[dest] = peer;
  }
  return peer;
}

uint64_t Endpoint::SourceOf(uint32_t peer) const {
  const Peer& p = peers_[peer];
  if (av_ == nullptr) return (uint64_t{1} << 62) | peer;
  if (p.source_generation != av_->generation()) {
    // Not in our AV: a source no directed receive can name.
    auto index = av_->Find(p.name);
    p.source = index ? *index : (uint64_t{1} << 62) | peer;
    p.source_generation = av_->generation();
  }
  return p.source;
}

// ------------------------------------------------------------------- send

Status Endpoint::CheckPostable(const struct iovec* iov, size_t count) const {
  if (!enabled_) return InvalidArgument("endpoint is not enabled");
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
  Peer& p = peers_[peer];
  if (p.state == PeerState::kFailed) {
    return Status(EHOSTUNREACH, "connection to that peer failed");
  }
  const bool connected = CanSend(p);
  if (connected && (!p.waiting.empty() || AvailableCredits(p) == 0 ||
                    p.sq_outstanding >= attr_.tx_size)) {
    ++stats_.eagain;
    return TryAgain("no credit at that peer: read the CQ, then retry");
  }
  auto acquired = AcquireTx(a, len, peer);
  if (!acquired.ok()) return acquired.status();
  const uint32_t index = *acquired;
  TxOp& op = tx_ops_[index];
  op.fenced = (a.flags & kFence) != 0;
  op.flags = kSend | (a.tagged ? kTagged : kMsg);
  op.level = a.flags & kCompletionLevels;
  if (op.level == 0) op.level = attr_.op_flags & kCompletionLevels;
  if (op.level == 0) op.level = kTransmitComplete;
  wire::Header& h = op.header;
  h.op = wire::Op::kEager;
  h.flags = (a.tagged ? wire::kTagged : 0) |
            ((a.flags & kRemoteCqData) ? wire::kHasData : 0);
  if (op.level == kDeliveryComplete) h.flags |= wire::kAckDelivery;
  if (op.level == kMatchComplete) h.flags |= wire::kAckMatch;
  h.length = len;
  h.tag = a.tagged ? a.tag : 0;
  h.data = (a.flags & kRemoteCqData) ? a.data : 0;
  h.msg_id = index;
  uint8_t* slot = tx_bounce_.data() + index * tx_slot_bytes_;
  auto rollback = [&](Status s) {
    tx_cq_->Unreserve();
    FreeTx(index);
    return s;
  };
  if (len > attr_.eager_max) {
    // Rendezvous: the target READs the payload from its place; the send
    // completes (at any level) when the target says the READ is done.
    op.rendezvous = true;
    h.op = wire::Op::kRendezvous;
    const uint8_t* src = nullptr;
    size_t first = 0;
    while (a.iov[first].iov_len == 0) ++first;
    src = static_cast<const uint8_t*>(a.iov[first].iov_base);
    const bool contiguous = a.iov[first].iov_len == len;
    if (!contiguous) {
      op.rdv_copy.resize(len);
      size_t off = 0;
      for (size_t i = 0; i < a.iov_count; ++i) {
        if (a.iov[i].iov_len == 0) continue;
        std::memcpy(op.rdv_copy.data() + off, a.iov[i].iov_base,
                    a.iov[i].iov_len);
        off += a.iov[i].iov_len;
      }
      src = op.rdv_copy.data();
    }
    tp::MemoryRegion* mr = (contiguous && a.desc) ? a.desc[first] : nullptr;
    const uint64_t at = reinterpret_cast<uint64_t>(src);
    if (mr == nullptr || !(mr->access() & tp::kAccessRemoteRead) ||
        at < mr->addr() || at + len > mr->addr() + mr->length()) {
      auto reg =
          pd_->RegMr(const_cast<uint8_t*>(src), len, tp::kAccessRemoteRead);
      if (!reg.ok()) return rollback(reg.status());
      op.rdv_mr = *reg;
      mr = *reg;
    }
    h.aux = at;
    h.rkey = mr->rkey();
    wire::Encode(h, slot);
  } else {
    wire::Encode(h, slot);
    size_t off = wire::kHeaderBytes;
    for (size_t i = 0; i < a.iov_count; ++i) {
      if (a.iov[i].iov_len == 0) continue;
      std::memcpy(slot + off, a.iov[i].iov_base, a.iov[i].iov_len);
      off += a.iov[i].iov_len;
    }
  }

  if (connected && !(op.fenced && p.in_flight > 0)) {
    if (Status s = PostTx(index); !s.ok()) {
      // Roll back: nothing was posted.
      return rollback(s);
    }
  } else {
    p.waiting.push_back(index);
    MarkBusy(peer);
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

StatusOr<uint32_t> Endpoint::AcquireTx(const SendArgs& a, size_t len,
                                       uint32_t peer) {
  if (tx_free_.empty()) {
    ++stats_.eagain;
    return TryAgain("all tx slots busy: read the CQ, then retry");
  }
  // fi_inject (kInject without an explicit kCompletion through sendmsg) never
  // writes an entry; otherwise an entry unless selective completion is on and
  // kCompletion is absent.
  bool wants_entry = !tx_selective_ || (a.flags & kCompletion);
  if ((a.flags & kInject) && !(a.flags & kCompletion)) wants_entry = false;
  if ((a.flags & kInject) && (a.flags & kInjectComplete)) wants_entry = true;
  // Every send holds a CQ slot until it completes, so its error (which is
  // always reported) can never be lost; a silent success gives it back.
  if (Status s = tx_cq_->Reserve(); !s.ok()) {
    ++stats_.eagain;
    return s;
  }
  const uint32_t index = tx_free_.back();
  tx_free_.pop_back();
  TxOp& op = tx_ops_[index];
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
  TxOp& op = tx_ops_[index];
  Peer& p = peers_[op.peer];
  if (op.rendezvous) {
    // The first FI_OPT_BUFFERED_MIN bytes (ours or the receiver's, whichever
    // is larger; known once connected) travel with the request, for a
    // buffered receiver to look at before it claims the rest.
    op.prefix = std::min<size_t>(
        std::min<size_t>(std::max<size_t>(buffered_min_, p.peer_buffered_min),
                         attr_.eager_max),
        op.len);
    std::memcpy(tx_bounce_.data() + index * tx_slot_bytes_ + wire::kHeaderBytes,
                reinterpret_cast<const uint8_t*>(op.header.aux), op.prefix);
  }
  const size_t payload = op.rendezvous ? op.prefix : op.len;
  tp::Sge sge{
      reinterpret_cast<uint64_t>(tx_bounce_.data()) + index * tx_slot_bytes_,
      static_cast<uint32_t>(wire::kHeaderBytes + payload), tx_mr_->lkey()};
  tp::SendWr wr;
  wr.wr_id = WrId(kWrTx, index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = tp::WrOpcode::kSend;
  wr.send_flags = tp::kSendSignaled;
  const tp::SendWr* bad = nullptr;
  if (Status s = p.qp->PostSend(&wr, &bad); !s.ok()) return s;
  Credits::Spend(p.credits);
  ++p.sq_outstanding;
  ++p.in_flight;
  op.sent = true;
  return Status::Ok();
}

void Endpoint::CompleteTx(uint32_t index, int err) {
  TxOp& op = tx_ops_[index];
  if (!op.reserved) return;  // Completed already (inject-complete).
  op.reserved = false;       // At most one entry per operation.
  if (err == 0 && !op.wants_entry) {
    tx_cq_->Unreserve();
  } else if (err == 0) {
    CqEntry e;
    e.op_context = op.context;
    e.flags = op.flags;
    tx_cq_->Push(e, /*reserved=*/true);
  } else {
    CqErrEntry e;
    e.op_context = op.context;
    e.flags = op.flags;
    e.err = err;
    tx_cq_->PushError(e, /*reserved=*/true);
  }
}

void Endpoint::MaybeFinishTx(uint32_t index) {
  TxOp& op = tx_ops_[index];
  const bool needs_ack = op.rendezvous || op.level == kDeliveryComplete ||
                         op.level == kMatchComplete;
  if (!op.send_done || (needs_ack && !op.acked)) return;
  CompleteTx(index, 0);
  if (op.peer != internal::kNil) --peers_[op.peer].in_flight;
  FreeTx(index);
}

void Endpoint::FreeTx(uint32_t index) {
  TxOp& op = tx_ops_[index];
  if (op.rdv_mr) (void)op.rdv_mr->Destroy();
  op.rdv_mr = nullptr;
  op.rdv_copy.clear();
  op.used = false;
  op.reserved = false;
  tx_free_.push_back(index);
}

void Endpoint::SendAck(uint32_t peer, uint64_t msg_id, wire::Op op) {
  Peer& p = peers_[peer];
  if (!p.acks.empty() || !PostAck(peer, msg_id, op).ok()) {
    p.acks.emplace_back(op, msg_id);
    MarkBusy(peer);
  }
}

Status Endpoint::PostAck(uint32_t peer, uint64_t msg_id, wire::Op op) {
  Peer& p = peers_[peer];
  // Acks use a ring of header-only slots after the tx slots and need a credit
  // at the peer like any SEND.
  if (!CanSend(p) || AvailableCredits(p) == 0 ||
      p.sq_outstanding >= attr_.tx_size + 8) {
    return TryAgain("no credit for an ack");
  }
  const uint32_t slot = control_next_++ % kControlSlots;
  uint8_t* buf = tx_bounce_.data() + tx_slot_bytes_ * attr_.tx_size +
                 slot * wire::kHeaderBytes;
  wire::Header h;
  h.op = op;
  h.msg_id = msg_id;
  wire::Encode(h, buf);
  tp::Sge sge{reinterpret_cast<uint64_t>(buf),
              static_cast<uint32_t>(wire::kHeaderBytes), tx_mr_->lkey()};
  tp::SendWr wr;
  wr.wr_id = WrId(kWrAck, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = tp::WrOpcode::kSend;
  wr.send_flags = tp::kSendSignaled | tp::kSendInline;
  const tp::SendWr* bad = nullptr;
  if (Status s = p.qp->PostSend(&wr, &bad); !s.ok()) return s;
  Credits::Spend(p.credits);
  ++p.sq_outstanding;
  return Status::Ok();
}

Status Endpoint::SendDgram(const SendArgs& a, size_t len) {
  if (av_ == nullptr) return InvalidArgument("no address vector bound");
  auto name = av_->Lookup(a.dest);
  if (!name) return InvalidArgument("destination is not in the address vector");
  tp::AddressHandle*& ah = dgram_ah_[a.dest];
  if (ah == nullptr) {
    auto made = pd_->CreateAh(AhAttrFor(*name));
    if (!made.ok()) {
      dgram_ah_.erase(a.dest);
      return made.status();
    }
    ah = *made;
  }
  auto acquired = AcquireTx(a, len, internal::kNil);
  if (!acquired.ok()) return acquired.status();
  const uint32_t index = *acquired;
  TxOp& op = tx_ops_[index];
  op.flags = kSend | kMsg;
  op.level = (a.flags & kInjectComplete) ? kInjectComplete : kTransmitComplete;
  // The first 40 bytes are the sender's prefix space; the datagram is the rest.
  uint8_t* slot = tx_bounce_.data() + index * tx_slot_bytes_;
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
              tx_mr_->lkey()};
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
    TagMatcher& m = rx_->matchers_[0];
    if (auto r = m.FindReceive(0, source)) {
      const uint32_t rx = rx_->of_handle_[0][r->index];
      m.RemoveReceive(*r);
      RxOp& op = rx_->ops_[rx];
      op.handle = ReceiveHandle{};
      // The buffer gets the GRH prefix and then the data (FI_MSG_PREFIX).
      const size_t n = ScatterInto(op.iov, op.iov_count, 0, buf, wc.byte_len);
      CqEntry e;
      e.op_context = op.context;
      e.flags = kRecv | kMsg;
      e.buf = op.iov_count ? op.iov[0].iov_base : nullptr;
      e.len = n;
      e.src_addr = from ? *from : ~uint64_t{0};
      CompleteRx(rx, e, n < wc.byte_len ? kErrTruncated : 0, wc.byte_len - n);
    } else {
      ++stats_.dgram_dropped;  // Unreliable: no receive, no datagram.
    }
  }
  (void)PostOneRecv(cm_qp_, wc.wr_id, buf, dgram_slot_bytes_,
                    dgram_mr_->lkey());
}

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
  if (Status s = rx_->cq_->Reserve(); !s.ok()) {
    ++stats_.eagain;
    return s;
  }
  const uint32_t index = NewRxOp(a, wants_entry);
  RxOp& r = rx_->ops_[index];
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
    auto u = m.FindUnexpected(tag, ignore, source);
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
                          size_t olen) {
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
    rx_->cq_->PushError(ErrorEntry(e, err, olen), /*reserved=*/last);
  }
  if (last) {
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

void Endpoint::StartRead(uint32_t rx_index, uint32_t peer,
                         const wire::Header& h, uint64_t cq_flags) {
  RxOp& r = rx_->ops_[rx_index];
  const uint32_t ri = TakeSlot(reads_, reads_free_);
  Read& rd = reads_[ri];
  rd = Read{};
  rd.used = true;
  rd.rx = rx_index;
  rd.peer = peer;
  rd.header = h;
  rd.cq_flags = cq_flags;
  if (r.flags & kMultiRecv) {
    rd.len = std::min<uint64_t>(r.len - r.consumed, h.length);
    rd.buf = static_cast<uint8_t*>(r.iov[0].iov_base) + r.consumed;
    ConsumeMulti(rx_index, rd.len);  // Later messages go after this one.
  } else {
    rd.len = std::min<uint64_t>(r.len, h.length);
    rd.buf = r.iov_count > 0 ? r.iov[0].iov_base : nullptr;
  }
  ++r.reads_pending;
  if (rd.len == 0) {
    OnReadDone(ri, true);
    return;
  }
  if (Status s = PostRead(ri); s.code() == ENOMEM || s.code() == EAGAIN) {
    peers_[peer].reads_waiting.push_back(ri);
    MarkBusy(peer);
  } else if (!s.ok()) {
    OnReadDone(ri, false);
  }
}

Status Endpoint::PostRead(uint32_t ri) {
  Read& rd = reads_[ri];
  RxOp& r = rx_->ops_[rd.rx];
  Peer& p = peers_[rd.peer];
  if (p.state != PeerState::kConnected) {
    return Status(EIO, "connection to the sender is gone");
  }
  if (p.sq_outstanding >= attr_.tx_size + 8) {
    return TryAgain("send queue full");
  }
  // The READ's scatter list: the piece of each buffer it fills, each under a
  // registration (the caller's descriptor where it covers, else our own).
  tp::Sge sges[kIovMax];
  int num_sge = 0;
  const bool multi = r.flags & kMultiRecv;
  const size_t pieces = multi ? 1 : r.iov_count;
  size_t left = rd.len;
  for (size_t i = 0; i < pieces && left > 0; ++i) {
    uint8_t* base = multi ? static_cast<uint8_t*>(rd.buf)
                          : static_cast<uint8_t*>(r.iov[i].iov_base);
    const size_t n = multi ? left : std::min(left, r.iov[i].iov_len);
    if (n == 0) continue;
    tp::MemoryRegion* mr = r.desc[multi ? 0 : i];
    const uint64_t at = reinterpret_cast<uint64_t>(base);
    if (mr == nullptr || !(mr->access() & tp::kAccessLocalWrite) ||
        at < mr->addr() || at + n > mr->addr() + mr->length()) {
      if (rd.mrs[i] == nullptr) {
        auto reg = pd_->RegMr(base, n, tp::kAccessLocalWrite);
        if (!reg.ok()) return reg.status();
        rd.mrs[i] = *reg;
      }
      mr = rd.mrs[i];
    }
    sges[num_sge++] = tp::Sge{at, static_cast<uint32_t>(n), mr->lkey()};
    left -= n;
  }
  tp::SendWr wr;
  wr.wr_id = WrId(kWrRead, ri);
  wr.sg_list = sges;
  wr.num_sge = num_sge;
  wr.opcode = tp::WrOpcode::kRdmaRead;
  wr.send_flags = tp::kSendSignaled;
  wr.rdma.remote_addr = rd.header.aux;
  wr.rdma.rkey = rd.header.rkey;
  const tp::SendWr* bad = nullptr;
  if (Status s = p.qp->PostSend(&wr, &bad); !s.ok()) return s;
  ++p.sq_outstanding;
  return Status::Ok();
}

void Endpoint::OnReadDone(uint32_t ri, bool ok) {
  Read& rd = reads_[ri];
  RxOp& r = rx_->ops_[rd.rx];
  --r.reads_pending;
  CqEntry e = RecvEntry(r, rd.peer, rd.header);
  e.flags |= rd.cq_flags;
  e.buf = rd.buf;
  e.len = rd.len;
  const uint64_t total = rd.header.length;
  const int err = !ok ? EIO : (rd.len < total ? kErrTruncated : 0);
  CompleteRx(rd.rx, e, err, ok ? total - rd.len : 0);
  for (tp::MemoryRegion*& mr : rd.mrs) {
    if (mr) (void)mr->Destroy();
    mr = nullptr;
  }
  // The sender may now release its buffer and complete.
  SendAck(rd.peer, rd.header.msg_id, wire::Op::kReadDone);
  rd.used = false;
  reads_free_.push_back(ri);
}

Status Endpoint::HandlePeekClaimDiscard(const RecvArgs& a) {
  TagMatcher& m = rx_->matchers_[a.tagged];
  const uint64_t source =
      (rx_->attr_.caps & kDirectedRecv) ? a.src : kAnySource;
  const uint64_t ctx = reinterpret_cast<uint64_t>(a.context);
  const bool peek = a.flags & kPeek;
  const bool discard = a.flags & kDiscard;
  rx_->ProgressAll();  // Look at what has arrived by now.
  std::optional<MessageHandle> found;
  if (peek) {
    found = m.FindUnexpected(a.tag, a.ignore, source);
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
  Unexpected* un = found ? &rx_->unexpected_[ui] : nullptr;
  const bool buffered_msg = un && un->recv_context != internal::kNil;
  if (buffered_msg && discard && !peek) {
    // fi_msg(3): a buffered message the application is done with. Freed; its
    // sender learns it was consumed. No entry.
    Endpoint* owner = un->ep;
    if (owner != nullptr && un->header.op == wire::Op::kRendezvous) {
      owner->SendAck(un->peer, un->header.msg_id, wire::Op::kReadDone);
    }
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
    return Status::Ok();
  }
  const bool read_into_buffer =
      found && !peek && !discard && un->header.op == wire::Op::kRendezvous;
  if (read_into_buffer && rx_->free_.empty()) {
    ++stats_.eagain;
    return TryAgain("all receive slots are posted");
  }
  if (Status s = rx_->cq_->Reserve(); !s.ok()) {
    ++stats_.eagain;
    return s;
  }
  const uint64_t op_flags = a.flags & (kPeek | kClaim | kDiscard);
  const uint64_t kind = a.tagged ? kTagged : kMsg;
  if (!found) {
    // fi_tagged(3): a peek that finds nothing completes with FI_ENOMSG.
    CqErrEntry e;
    e.op_context = a.context;
    e.flags = kRecv | kind | op_flags;
    e.err = kErrNoMessage;
    e.tag = a.tag;
    rx_->cq_->PushError(e, /*reserved=*/true);
    return Status::Ok();
  }
  // A claimed buffered message completes with the context the application
  // left in its fi_recv_context.
  void* entry_context =
      buffered_msg ? rx_->recv_contexts_[un->recv_context].context : a.context;
  Endpoint* owner = un->ep;
  const uint32_t peer = un->peer;
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
    rx_->cq_->PushError(x, /*reserved=*/true);
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
    return Status::Ok();
  }
  if (read_into_buffer) {
    // FI_CLAIM of a rendezvous message: READ it into the claiming buffer; the
    // entry (with FI_CLAIM) comes when the READ is done.
    const uint32_t index = NewRxOp(a, /*wants_entry=*/true);
    rx_->ops_[index].context = entry_context;
    rx_->ops_[index].flags = 0;
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
    owner->StartRead(index, peer, h, kClaim);
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
    rx_->cq_->Push(e, /*reserved=*/true);
  } else {
    rx_->cq_->PushError(ErrorEntry(e, err, olen), /*reserved=*/true);
  }
  if (take && owner != nullptr) {
    if (rendezvous) {
      // Discarded: the sender may release its buffer and complete.
      owner->SendAck(peer, h.msg_id, wire::Op::kReadDone);
    } else if ((h.flags & wire::kAckMatch) && !buffered_msg) {
      owner->SendAck(peer, h.msg_id);
    }
  }
  if (take) {
    m.RemoveUnexpected(*found);
    ReleaseUnexpected(ui);
  }
  return Status::Ok();
}

void Endpoint::ReleaseUnexpected(uint32_t index) {
  Unexpected& un = rx_->unexpected_[index];
  Endpoint* owner = un.ep;  // Null once that endpoint has closed.
  if (owner == nullptr) {
    // No credit to return.
  } else if (un.credit_held) {
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

void Endpoint::ReportBuffered(uint32_t ui, uint32_t rx_index) {
  Unexpected& un = rx_->unexpected_[ui];
  const wire::Header& h = un.header;
  const bool tagged = h.flags & wire::kTagged;
  const uint32_t slot = TakeSlot(rx_->recv_contexts_, rx_->recv_contexts_free_);
  RecvContext& rc = rx_->recv_contexts_[slot];
  // fi_msg(3): untagged, ep is the receiving endpoint (or shared context) and
  // context NULL; fi_tagged(3): ep NULL and context the posted tag's.
  rc.ep = rx_index == internal::kNil ? rx_->user_handle_ : nullptr;
  rc.context =
      rx_index == internal::kNil ? nullptr : rx_->ops_[rx_index].context;
  un.recv_context = slot;
  rx_->matchers_[tagged].Claim(un.handle, reinterpret_cast<uint64_t>(&rc));
  CqEntry e;
  e.op_context = &rc;
  e.flags = kRecv | (tagged ? kTagged : kMsg) |
            ((h.flags & wire::kHasData) ? kRemoteCqData : 0);
  // The whole message is here when it came eagerly within the limit;
  // otherwise FI_MORE, with the start of it (at least the sender's
  // FI_OPT_BUFFERED_MIN bytes) and the full length.
  if (h.op != wire::Op::kEager || h.length > rx_->attr_.buffered_limit) {
    e.flags |= kMore;
  }
  e.buf = un.payload.empty() ? nullptr : un.payload.data();
  e.len = h.length;
  e.data = h.data;
  e.tag = h.tag;
  const uint64_t src = SourceOf(un.peer);
  e.src_addr = (src >> 62) ? ~uint64_t{0} : src;
  if (rx_index != internal::kNil) {
    rx_->cq_->Push(e, /*reserved=*/true);
    rx_->ops_[rx_index] = RxOp{};
    rx_->free_.push_back(rx_index);
  } else {
    // Progress only takes a message off the wire when the CQ has room.
    rx_->cq_->Push(e, /*reserved=*/false);
  }
  // Reported is matched: a match-complete sender may complete (a rendezvous
  // one waits for the kReadDone its claim or discard sends).
  if ((h.flags & wire::kAckMatch) && h.op == wire::Op::kEager) {
    SendAck(un.peer, h.msg_id);
  }
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

bool Endpoint::OnMessage(uint32_t peer, const wire::Header& h,
                         const uint8_t* payload, size_t len) {
  const bool rendezvous = h.op == wire::Op::kRendezvous;
  const bool tagged = h.flags & wire::kTagged;
  const bool buffered = rx_->attr_.buffered;
  TagMatcher& m = rx_->matchers_[tagged];
  const uint64_t source = SourceOf(peer);
  auto r = m.FindReceive(tagged ? h.tag : 0, source);
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
  Peer& p = peers_[peer];
  bool return_credit = true;
  un.used = true;
  un.credit_held = p.unexpected_buffered >= attr_.credits;
  if (un.credit_held) {
    return_credit = false;
  } else {
    ++p.unexpected_buffered;
  }
  un.ep = this;
  un.peer = peer;
  un.header = h;
  un.payload.assign(payload, payload + len);
  un.handle = m.AddUnexpected({tagged ? h.tag : 0, source, ui});
  ++stats_.unexpected;
  if (!rendezvous && (h.flags & wire::kAckDelivery)) SendAck(peer, h.msg_id);
  // Buffered: untagged messages are reported at once, tagged ones when a
  // posted tag matches.
  if (buffered && (!tagged || r)) ReportBuffered(ui, rx);
  return return_credit;
}

// ------------------------------------------------------------------- CM

StatusOr<tp::QueuePair*> Endpoint::NewRcQp() {
  tp::QpInitAttr init;
  init.send_cq = send_cq_;
  init.recv_cq = recv_cq_;
  init.srq = srq_;
  init.qp_type = tp::QpType::kRc;
  init.cap.max_send_wr = attr_.tx_size + kControlSlots + 8;
  init.cap.max_send_sge = 1;
  init.cap.max_inline_data = wire::kHeaderBytes;
  auto qp = pd_->CreateQp(init);
  if (!qp.ok()) return qp.status();
  tp::QpAttr a;
  a.qp_state = tp::QpState::kInit;
  a.pkey_index = 0;
  a.port_num = kPort;
  a.qp_access_flags = tp::kAccessRemoteWrite | tp::kAccessRemoteRead;
  if (Status s = (*qp)->Modify(a, tp::kQpState | tp::kQpPkeyIndex |
                                      tp::kQpPort | tp::kQpAccessFlags);
      !s.ok()) {
    (void)(*qp)->Destroy();
    return s;
  }
  return *qp;
}

Status Endpoint::ConnectQp(Peer& p, uint32_t remote_qpn, uint32_t remote_psn) {
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRtr;
  a.path_mtu = port_.active_mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = remote_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = kMinRnrTimer;
  a.ah_attr = AhAttrFor(p.name);
  if (Status s = p.qp->Modify(
          a, tp::kQpState | tp::kQpAv | tp::kQpPathMtu | tp::kQpDestQpn |
                 tp::kQpRqPsn | tp::kQpMaxDestRdAtomic | tp::kQpMinRnrTimer);
      !s.ok()) {
    return s;
  }
  a.qp_state = tp::QpState::kRts;
  a.sq_psn = p.psn;
  a.timeout = attr_.rc_timeout;
  a.retry_cnt = kRetryCount;
  a.rnr_retry = kRnrRetryForever;
  a.max_rd_atomic = 1;
  if (Status s = p.qp->Modify(a, tp::kQpState | tp::kQpSqPsn | tp::kQpTimeout |
                                     tp::kQpRetryCnt | tp::kQpRnrRetry |
                                     tp::kQpMaxQpRdAtomic);
      !s.ok()) {
    return s;
  }
  p.remote_qpn = remote_qpn;
  return Status::Ok();
}

Status Endpoint::StartConnect(uint32_t peer) {
  Peer& p = peers_[peer];
  auto qp = NewRcQp();
  if (!qp.ok()) return qp.status();
  p.qp = *qp;
  p.psn = cm_.NextPsn();
  p.request_id = cm_.NextRequestId();
  p.state = PeerState::kConnecting;
  MarkBusy(peer);
  p.retries = 0;
  ++stats_.cm_requests;
  // A full CM send queue (many connections starting at once) only delays the
  // request: the retry timer sends it.
  if (Status s = SendCm(peer, RequestType());
      !s.ok() && s.code() != ENOMEM && s.code() != EAGAIN) {
    return s;
  }
  ArmCmTimer(p, device_->clock().NowNs());
  return Status::Ok();
}

Status Endpoint::SendCm(uint32_t peer, wire::CmType type) {
  Peer& p = peers_[peer];
  if (p.ah == nullptr) {
    auto made = pd_->CreateAh(AhAttrFor(p.name));
    if (!made.ok()) return made.status();
    p.ah = *made;
  }
  wire::CmMessage m;
  m.type = type;
  m.from = name_;
  m.rc_qpn = p.qp ? p.qp->qp_num() : 0;
  m.psn = p.psn;
  m.credit_addr = credits_.word_address(peer);
  m.credit_rkey = credits_.word_rkey();
  m.credits = attr_.credits;
  m.buffered_min = static_cast<uint32_t>(buffered_min_);
  // The initiator's id: its own for what it sends, echoed by the other side.
  const bool initiator = type == wire::CmType::kRequest ||
                         type == wire::CmType::kConnect ||
                         type == wire::CmType::kEstablished ||
                         (type == wire::CmType::kDisconnect && !accepted_);
  m.request_id = initiator ? p.request_id : p.answered_id;
  if (type == wire::CmType::kConnect || type == wire::CmType::kReject ||
      (type == wire::CmType::kReply && attr_.type == EndpointType::kMsg)) {
    m.data_len = cm_data_len_;
    std::memcpy(m.data, cm_data_, cm_data_len_);
  }
  return cm_.Send(m, p.ah, p.name);
}

void Endpoint::OnCm(const uint8_t* bytes, size_t len) {
  wire::CmMessage m;
  if (!wire::DecodeCm(bytes, len, &m) || m.from == name_) {
    ++stats_.bad_headers;
    return;
  }
  if (attr_.type == EndpointType::kMsg) {
    OnMsgCm(m);
    return;
  }
  if (m.type != wire::CmType::kRequest && m.type != wire::CmType::kReply) {
    return;  // FI_EP_MSG traffic that reached an RDM endpoint.
  }
  if (peer_by_name_.find(m.from) == peer_by_name_.end() &&
      peers_.size() >= attr_.peers_max) {
    return;  // No room: the peer's retries fail and it reports the error.
  }
  const uint32_t peer = FindOrAddPeer(m.from);
  Peer& p = peers_[peer];
  auto accept = [&]() {
    if (p.qp == nullptr) {
      auto qp = NewRcQp();
      if (!qp.ok()) return;
      p.qp = *qp;
      p.psn = cm_.NextPsn();
    }
    if (!ConnectQp(p, m.rc_qpn, m.psn).ok()) {
      FailPeer(peer, EIO);
      return;
    }
    p.answered_id = m.request_id;
    Credits::Grant(p.credits, m);
    p.peer_buffered_min = m.buffered_min;
    // Buffers first (OnConnected posts them), then the reply that lets the
    // peer send. Not ready to send ourselves until they do.
    OnConnected(peer, /*ready=*/false);
    if (p.state == PeerState::kConnected) {
      (void)SendCm(peer, wire::CmType::kReply);
    }
  };
  if (m.type == wire::CmType::kRequest) {
    switch (p.state) {
      case PeerState::kIdle:
        accept();
        break;
      case PeerState::kConnecting:
        // Both started: the smaller name's request wins.
        if (m.from < name_) accept();
        break;
      case PeerState::kConnected:
        // Our reply was lost: send it again.
        if (m.request_id == p.answered_id) {
          (void)SendCm(peer, wire::CmType::kReply);
        }
        break;
      case PeerState::kFailed:
        break;
    }
    return;
  }
  // A reply to our request.
  if (p.state != PeerState::kConnecting || m.request_id != p.request_id) return;
  if (!ConnectQp(p, m.rc_qpn, m.psn).ok()) {
    FailPeer(peer, EIO);
    return;
  }
  Credits::Grant(p.credits, m);
  p.peer_buffered_min = m.buffered_min;
  OnConnected(peer, /*ready=*/true);  // They reached RTS before replying.
}

void Endpoint::OnConnected(uint32_t peer, bool ready) {
  // The credits this connection grants are backed by buffers of their own.
  if (!AddBounceChunk().ok()) {
    FailPeer(peer, ENOMEM);
    return;
  }
  Peer& p = peers_[peer];
  p.state = PeerState::kConnected;
  p.ready = ready;
  peer_by_qpn_[p.qp->qp_num()] = peer;
}

void Endpoint::FailPeer(uint32_t peer, int err, const wire::CmMessage* cm) {
  Peer& p = peers_[peer];
  const PeerState was = p.state;
  p.state = PeerState::kFailed;
  if (attr_.type == EndpointType::kMsg && !listener_ && !shutdown_ &&
      was != PeerState::kFailed) {
    const uint8_t* data = cm ? cm->data : nullptr;
    const size_t len = cm ? cm->data_len : 0;
    if (connected_reported_) {
      PushEvent(kEqShutdown, 0, data, len);  // The connection went away.
    } else {
      PushEvent(0, err, data, len);  // Connecting failed.
    }
  }
  while (!p.waiting.empty()) {
    const uint32_t index = p.waiting.front();
    p.waiting.pop_front();
    CompleteTx(index, err);
    FreeTx(index);
  }
}

// ------------------------------------------------------------------- FI_EP_MSG

Status Endpoint::BindEq(EventQueue* eq) {
  if (attr_.type != EndpointType::kMsg) {
    return InvalidArgument("only FI_EP_MSG endpoints bind an event queue");
  }
  if (eq == nullptr) return InvalidArgument("null event queue");
  if (eq_ != nullptr && eq_ != eq) {
    return InvalidArgument("an event queue is bound already");
  }
  eq_ = eq;
  eq_->Add(this);
  return Status::Ok();
}

Status Endpoint::Listen() {
  if (!listener_) return InvalidArgument("not a passive endpoint");
  if (eq_ == nullptr) return InvalidArgument("bind an event queue first");
  enabled_ = true;
  return Status::Ok();
}

void Endpoint::PushEvent(uint32_t type, int err, const uint8_t* data,
                         size_t len) {
  if (eq_ == nullptr) return;
  EqEvent e;
  e.type = type;
  e.err = err;
  e.fid = user_handle_;
  if (len > 0) e.data.assign(data, data + len);
  eq_->Push(std::move(e));
}

namespace {
Status CheckCmData(const void* data, size_t len) {
  if (len > wire::kCmDataMax) {
    return InvalidArgument("connection data exceeds FI_OPT_CM_DATA_SIZE (56)");
  }
  if (len > 0 && data == nullptr) {
    return InvalidArgument("null connection data with a non-zero length");
  }
  return Status::Ok();
}
}  // namespace

Status Endpoint::CheckStartCm(const char* not_msg, const void* data,
                              size_t len) const {
  if (attr_.type != EndpointType::kMsg || listener_) {
    return InvalidArgument(not_msg);
  }
  if (Status s = CheckCmData(data, len); !s.ok()) return s;
  if (eq_ == nullptr) return InvalidArgument("bind an event queue first");
  if (!enabled_) return Status(kErrOpBadState, "enable the endpoint first");
  if (!peers_.empty()) {
    return Status(kErrOpBadState, "connecting or connected already");
  }
  return Status::Ok();
}

void Endpoint::SetCmData(const void* data, size_t len) {
  cm_data_len_ = static_cast<uint8_t>(len);
  if (len > 0) std::memcpy(cm_data_, data, len);
}

void Endpoint::ArmCmTimer(Peer& p, uint64_t now) {
  p.retry_at_ns = now + attr_.cm_retry_ns;
  device_->ScheduleWakeup(p.retry_at_ns);
}

Status Endpoint::Connect(const wire::Name& to, const void* data, size_t len) {
  if (Status s =
          CheckStartCm("fi_connect needs an FI_EP_MSG endpoint", data, len);
      !s.ok()) {
    return s;
  }
  SetCmData(data, len);
  const uint32_t peer = FindOrAddPeer(to);
  if (Status s = StartConnect(peer); !s.ok()) {
    FailPeer(peer, EIO);
    return s;
  }
  return Status::Ok();
}

Status Endpoint::Accept(const ConnRequest& req, const void* data, size_t len) {
  if (Status s =
          CheckStartCm("fi_accept needs an FI_EP_MSG endpoint", data, len);
      !s.ok()) {
    return s;
  }
  if (req.decided) {
    return InvalidArgument("this request was accepted or rejected already");
  }
  const wire::CmMessage& m = req.request;
  auto qp = NewRcQp();
  if (!qp.ok()) return qp.status();
  const uint32_t peer = FindOrAddPeer(m.from);
  Peer& p = peers_[peer];
  p.qp = *qp;
  p.psn = cm_.NextPsn();
  if (Status s = ConnectQp(p, m.rc_qpn, m.psn); !s.ok()) {
    // Nothing stays behind: the call can be retried.
    (void)p.qp->Destroy();
    peer_by_name_.erase(m.from);
    peers_.clear();
    return s;
  }
  req.decided = true;
  SetCmData(data, len);
  p.answered_id = m.request_id;
  Credits::Grant(p.credits, m);
  p.peer_buffered_min = m.buffered_min;
  accepted_ = true;
  OnConnected(peer, /*ready=*/false);
  if (p.state != PeerState::kConnected) return NoMemory("no receive buffers");
  (void)SendCm(peer, wire::CmType::kReply);
  p.retries = 0;
  ArmCmTimer(p, device_->clock().NowNs());
  return Status::Ok();
}

Status Endpoint::Reject(const ConnRequest& req, const void* data, size_t len) {
  if (!listener_)
    return InvalidArgument("fi_reject needs the passive endpoint");
  if (Status s = CheckCmData(data, len); !s.ok()) return s;
  if (req.decided) {
    return InvalidArgument("this request was accepted or rejected already");
  }
  auto it = peer_by_name_.find(req.request.from);
  if (it == peer_by_name_.end() ||
      peers_[it->second].answered_id != req.request.request_id ||
      peers_[it->second].state != PeerState::kIdle) {
    return InvalidArgument("not a pending request of this passive endpoint");
  }
  SetCmData(data, len);
  peers_[it->second].state = PeerState::kFailed;
  req.decided = true;
  return SendCm(it->second, wire::CmType::kReject);
}

Status Endpoint::Shutdown() {
  if (attr_.type != EndpointType::kMsg || listener_) {
    return InvalidArgument("fi_shutdown needs an FI_EP_MSG endpoint");
  }
  if (peers_.empty() || peers_[0].state != PeerState::kConnected) {
    return Status(kErrOpBadState, "not connected");
  }
  shutdown_ = true;
  // Repeated until the peer answers with its own kDisconnect (the IB CM's
  // DREQ/DREP), so a lost datagram does not leave the peer connected.
  disconnect_pending_ = true;
  Peer& p = peers_[0];
  p.retries = 0;
  ArmCmTimer(p, device_->clock().NowNs());
  (void)SendCm(0, wire::CmType::kDisconnect);
  FailPeer(0, ECONNRESET);
  return Status::Ok();
}

void Endpoint::OnMsgCm(const wire::CmMessage& m) {
  if (listener_) {
    if (m.type != wire::CmType::kConnect) return;
    const uint64_t now = device_->clock().NowNs();
    auto known = peer_by_name_.find(m.from);
    const bool seen = known != peer_by_name_.end() &&
                      peers_[known->second].answered_id == m.request_id;
    if (!seen && (eq_ == nullptr || eq_->full())) {
      return;  // No room to report it: the connector's retry comes back.
    }
    uint32_t peer;
    if (known != peer_by_name_.end()) {
      peer = known->second;
    } else if (peers_.size() < attr_.peers_max) {
      peer = FindOrAddPeer(m.from);
    } else {
      // Full: reuse the entry of a request decided long enough ago that its
      // connector has stopped retrying; none such, the connector times out.
      auto stale = ListenerSlotToReuse(now);
      if (!stale) return;
      peer = *stale;
      peer_by_name_.erase(peers_[peer].name);
      if (peers_[peer].ah) (void)peers_[peer].ah->Destroy();
      peers_[peer] = Peer{};
      peers_[peer].name = m.from;
      peer_by_name_.emplace(m.from, peer);
    }
    Peer& p = peers_[peer];
    p.last_heard_ns = now;
    if (p.answered_id == m.request_id) {
      // A retry: the decision is pending, or it was a rejection that got lost.
      (void)SendCm(peer, p.state == PeerState::kFailed
                             ? wire::CmType::kReject
                             : wire::CmType::kPending);
      return;
    }
    p.answered_id = m.request_id;
    p.state = PeerState::kIdle;
    cm_data_len_ = 0;
    (void)SendCm(peer, wire::CmType::kPending);
    EqEvent e;
    e.type = kEqConnReq;
    e.fid = user_handle_;
    auto info = std::make_shared<ConnRequest>();
    info->request = m;
    p.request = info;
    e.info = std::move(info);
    e.data.assign(m.data, m.data + m.data_len);
    eq_->Push(std::move(e));
    return;
  }
  if (peers_.empty()) return;
  Peer& p = peers_[0];
  switch (m.type) {
    case wire::CmType::kPending:
      // The listener has it: wait for the application's decision.
      if (p.state == PeerState::kConnecting && m.request_id == p.request_id) {
        p.retries = 0;
      }
      return;
    case wire::CmType::kReject:
      if (p.state == PeerState::kConnecting && m.request_id == p.request_id) {
        FailPeer(0, ECONNREFUSED, &m);
      }
      return;
    case wire::CmType::kReply: {
      if (accepted_ || m.request_id != p.request_id) return;
      if (p.state == PeerState::kConnected) {
        // Our kEstablished was lost: the acceptor asks again.
        if (m.from == p.name) (void)SendCm(0, wire::CmType::kEstablished);
        return;
      }
      if (p.state != PeerState::kConnecting) return;
      if (!ConnectQp(p, m.rc_qpn, m.psn).ok()) {
        FailPeer(0, EIO);
        return;
      }
      // From here on the peer is the accepting endpoint, not the listener.
      peer_by_name_.erase(p.name);
      p.name = m.from;
      peer_by_name_.emplace(m.from, 0);
      if (p.ah) (void)p.ah->Destroy();
      p.ah = nullptr;
      Credits::Grant(p.credits, m);
      p.peer_buffered_min = m.buffered_min;
      OnConnected(0, /*ready=*/true);
      if (p.state != PeerState::kConnected) return;
      (void)SendCm(0, wire::CmType::kEstablished);
      connected_reported_ = true;
      PushEvent(kEqConnected, 0, m.data, m.data_len);
      return;
    }
    case wire::CmType::kEstablished:
      if (accepted_ && m.from == p.name && m.request_id == p.answered_id) {
        p.ready = true;
      }
      return;
    case wire::CmType::kDisconnect:
      // A request: answer every one, repeats included (an answer may have
      // been lost). Answers are never answered.
      if (m.from != p.name) return;
      if (p.state == PeerState::kConnected) FailPeer(0, ECONNRESET);
      (void)SendCm(0, wire::CmType::kDisconnectReply);
      return;
    case wire::CmType::kDisconnectReply:
      if (m.from == p.name) disconnect_pending_ = false;
      return;
    default:
      return;
  }
}

std::optional<uint32_t> Endpoint::ListenerSlotToReuse(uint64_t now) const {
  // A connector retries every cm_retry_ns until answered and gives up after
  // cm_retries_max tries: twice that long after the last datagram, nothing
  // of a decided request is still on its way.
  const uint64_t quiet =
      2 * static_cast<uint64_t>(attr_.cm_retry_ns) * (attr_.cm_retries_max + 1);
  for (uint32_t i = 0; i < peers_.size(); ++i) {
    const Peer& p = peers_[i];
    const bool decided =
        p.state == PeerState::kFailed || (p.request && p.request->decided);
    if (decided && now - p.last_heard_ns >= quiet) return i;
  }
  return std::nullopt;
}

void Endpoint::MsgTimers(uint64_t now) {
  if (listener_ || peers_.empty()) return;
  Peer& p = peers_[0];
  if (disconnect_pending_) {
    if (now < p.retry_at_ns) return;
    if (++p.retries > attr_.cm_retries_max) {
      disconnect_pending_ = false;  // The peer is gone; nothing to wait for.
      return;
    }
    ++stats_.cm_retries;
    (void)SendCm(0, wire::CmType::kDisconnect);
    ArmCmTimer(p, now);
    return;
  }
  if (!accepted_ || p.state != PeerState::kConnected) return;
  if (p.ready) {
    if (!connected_reported_) {
      connected_reported_ = true;
      PushEvent(kEqConnected, 0, nullptr, 0);
    }
    return;
  }
  // The acceptor repeats its reply until the connector confirms.
  if (now < p.retry_at_ns) return;
  if (++p.retries > attr_.cm_retries_max) {
    FailPeer(0, ETIMEDOUT);
    return;
  }
  ++stats_.cm_retries;
  (void)SendCm(0, wire::CmType::kReply);
  ArmCmTimer(p, now);
}

// ------------------------------------------------------------------- progress

void Endpoint::Progress() {
  // A member array: a local one would be zeroed on every call.
  tp::WorkCompletion* wc = wc_.data();
  // Receives first: they return credits and acks that sends wait for. A
  // message is only taken off the wire when the receive CQ has room for what
  // it may produce, so nothing is ever lost to a full CQ.
  while (rx_cq_ == nullptr || rx_cq_->HasRoom()) {
    const int n = recv_cq_->Poll(1, wc);
    if (n <= 0) break;
    const uint64_t kind = KindOf(wc[0].wr_id);
    if (kind == kWrRxBounce) {
      OnBounce(wc[0]);
    } else if (kind == kWrDgramRecv) {
      OnDgram(wc[0]);
    } else if (kind == kWrCmRecv) {
      const uint8_t* msg = nullptr;
      size_t len = 0;
      if (cm_.Received(wc[0], &msg, &len)) OnCm(msg, len);
      cm_.Repost(wc[0]);
    }
  }
  while (true) {
    const int n = send_cq_->Poll(kPollBatch, wc);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const uint64_t kind = KindOf(wc[i].wr_id);
      const uint64_t index = IndexOf(wc[i].wr_id);
      auto it = peer_by_qpn_.find(wc[i].qp_num);
      if (kind != kWrCmSend && it != peer_by_qpn_.end()) {
        --peers_[it->second].sq_outstanding;
      }
      if (kind == kWrRead) {
        OnReadDone(static_cast<uint32_t>(index),
                   wc[i].status == tp::WcStatus::kSuccess);
      } else if (kind == kWrTx) {
        TxOp& op = tx_ops_[index];
        op.send_done = true;
        if (wc[i].status != tp::WcStatus::kSuccess) {
          CompleteTx(static_cast<uint32_t>(index), EIO);
          if (op.peer != internal::kNil) --peers_[op.peer].in_flight;
          FreeTx(static_cast<uint32_t>(index));
          if (it != peer_by_qpn_.end()) FailPeer(it->second, EIO);
        } else {
          MaybeFinishTx(static_cast<uint32_t>(index));
        }
      }
    }
  }
  // Timers and queued work only concern the peers on the busy list (in the
  // order they joined it), so an idle connection costs progress nothing.
  if (busy_.empty() && !accepted_ && !disconnect_pending_ &&
      !credits_.writes_due()) {
    return;
  }
  const uint64_t now = device_->clock().NowNs();
  // Connection retries.
  for (size_t k = 0; k < busy_.size(); ++k) {
    const uint32_t i = busy_[k];
    Peer& p = peers_[i];
    if (p.state != PeerState::kConnecting || now < p.retry_at_ns) continue;
    if (++p.retries > attr_.cm_retries_max) {
      FailPeer(i, attr_.type == EndpointType::kMsg ? ETIMEDOUT : EHOSTUNREACH);
      continue;
    }
    ++stats_.cm_retries;
    (void)SendCm(i, RequestType());
    ArmCmTimer(p, now);
  }
  if (attr_.type == EndpointType::kMsg) MsgTimers(now);
  FlushCreditWrites();
  // Acks and sends that waited for a connection or a credit. A peer leaves
  // the busy list once it has nothing queued and is not connecting.
  size_t kept = 0;
  for (size_t k = 0; k < busy_.size(); ++k) {
    const uint32_t i = busy_[k];
    Peer& p = peers_[i];
    while (!p.acks.empty() &&
           PostAck(i, p.acks.front().second, p.acks.front().first).ok()) {
      p.acks.pop_front();
    }
    while (!p.reads_waiting.empty() && PostRead(p.reads_waiting.front()).ok()) {
      p.reads_waiting.pop_front();
    }
    while (CanSend(p) && !p.waiting.empty() && AvailableCredits(p) > 0 &&
           p.sq_outstanding < attr_.tx_size) {
      const uint32_t index = p.waiting.front();
      // A fenced send goes once everything before it to this peer is done.
      if (tx_ops_[index].fenced && p.in_flight > 0) break;
      if (!PostTx(index).ok()) break;
      p.waiting.pop_front();
    }
    if (p.state == PeerState::kConnecting || !p.acks.empty() ||
        !p.reads_waiting.empty() || !p.waiting.empty()) {
      busy_[kept++] = i;
    } else {
      p.listed = false;
    }
  }
  busy_.resize(kept);
}

void Endpoint::MarkBusy(uint32_t peer) {
  Peer& p = peers_[peer];
  if (!p.listed) {
    p.listed = true;
    busy_.push_back(peer);
  }
}

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

void RxContext::ProgressAll() {
  // Index loop: progress never adds or removes endpoints.
  for (size_t i = 0; i < endpoints_.size(); ++i) endpoints_[i]->Progress();
}

}  // namespace softfab::core
