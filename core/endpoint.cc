// Endpoint (see endpoint.h for the map of its files): set-up (Create, Init,
// the UD QP and the registered memory of an RDM or FI_EP_MSG endpoint),
// teardown, binding CQs, AV and a shared receive context, fi_enable, the
// options set before it, and the peer a destination names (the table itself
// is core/connection_table.h).
#include "core/endpoint.h"

#include <algorithm>
#include <cstring>

#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

// ------------------------------------------------------------------- set-up

Endpoint::Endpoint(transport::Device* device, transport::ProtectionDomain* pd,
                   const EndpointAttr& attr)
    : device_(device),
      polls_only_read_(device->PollsOnlyRead()),
      pd_(pd),
      attr_(attr),
      repost_later_(attr.defer_reposts) {}

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
  if (attr.rc_retry_count > 6) {
    return InvalidArgument(
        "rc_retry_count must be 0..6: 7 means retry forever on rxe, and a "
        "dead peer would never be detected");
  }
  if (attr.async_events != nullptr && attr.async_events->device() != device) {
    return InvalidArgument("the async event reader is another device's");
  }
  std::unique_ptr<Endpoint> ep(new Endpoint(device, pd, attr));
  if (Status s = ep->Init(); !s.ok()) return s;
  if (attr.async_events != nullptr) attr.async_events->Join(ep.get());
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
  reads_initiated_ = static_cast<uint8_t>(
      std::clamp<int32_t>(dev.max_qp_init_rd_atom, 1, 255));
  reads_served_ =
      static_cast<uint8_t>(std::clamp<int32_t>(dev.max_qp_rd_atom, 1, 255));
  // Inline data for the header and an inject-sized payload, as far as the
  // device allows.
  // A rendezvous READ scatters into the receive's iovecs, one SGE each, as
  // far as the device allows (PostRead splits beyond that).
  tx_.SetLimits(std::min<uint32_t>(dev.max_inline_data,
                                   wire::kHeaderBytes + attr_.inject_size),
                static_cast<uint32_t>(std::clamp<int32_t>(
                    dev.max_sge, 1, static_cast<int32_t>(kIovMax))));
  inject_stage_.resize(wire::kHeaderBytes + attr_.inject_size);

  // One peer's credit window must fit the shared receive queue: the bounce
  // buffers are posted a window at a time, so a larger window would post
  // none and every SEND would meet an empty SRQ (RNR for ever).
  if (attr_.credits > static_cast<uint32_t>(std::max(dev.max_srq_wr, 0))) {
    return InvalidArgument(
        "credits exceed the device's shared receive queue depth (max_srq_wr)");
  }
  const uint32_t send_depth = attr_.tx_size + TransmitEngine::kControlSlots + 8;
  const int32_t send_cqe = static_cast<int32_t>(send_depth + attr_.peers_max +
                                                CmChannel::kBuffers + 64);
  // Receive buffers, added a window of `credits` at a time as connections
  // need them: full windows for 16 peers (and one more, as GrantFor gives at
  // most half of what is free), and kMinGrant more for every peer the
  // endpoint may hold, so that the credits granted never exceed the buffers
  // there are (GrantFor), whatever the number of peers.
  const uint64_t wanted = uint64_t{attr_.credits} * 17 +
                          uint64_t{kMinGrant} * attr_.peers_max +
                          attr_.credits - 1;
  const uint64_t srq_max = static_cast<uint64_t>(dev.max_srq_wr);
  rx_bounce_max_ = static_cast<uint32_t>(std::min(wanted, srq_max) /
                                         attr_.credits * attr_.credits);
  const int32_t recv_cqe = static_cast<int32_t>(
      std::max(rx_bounce_max_, attr_.rx_size) + CmChannel::kBuffers + 64);
  // On a completion channel when the API sleeps on one (verbs); CreateCq
  // otherwise, so the simulator's runs are unchanged.
  auto make_cq = [&](int32_t cqe) {
    return attr_.channel ? device_->CreateCqOnChannel(cqe, attr_.channel)
                         : device_->CreateCq(cqe);
  };
  auto scq = make_cq(send_cqe);
  if (!scq.ok()) return scq.status();
  send_cq_ = *scq;
  send_cq_room_ = static_cast<uint32_t>(send_cqe) - CmChannel::kBuffers;
  auto rcq = make_cq(recv_cqe);
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
  tx_.InitOps(attr_.tx_size);
  conns_.Reserve(attr_.peers_max);
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
  a.pkey_index = attr_.class_of_service.pkey_index;
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

Status Endpoint::InitRdm() {
  tp::SrqAttr srq_attr;
  srq_attr.max_wr = rx_bounce_max_;
  srq_attr.max_sge = 1;
  auto srq = pd_->CreateSrq(srq_attr);
  if (!srq.ok()) return srq.status();
  srq_ = *srq;

  // Bounce buffers: tx slots hold header + payload of one send; rx buffers
  // take one SEND each.
  rx_slot_bytes_ = wire::kHeaderBytes + attr_.eager_max;
  // Registered in this order (the device hands out keys in order): tx
  // slots, the CM's slots, credit words, credit sources.
  if (Status s = tx_.RegisterSlots(pd_, attr_.tx_size,
                                   wire::kHeaderBytes + attr_.eager_max,
                                   /*control=*/true);
      !s.ok()) {
    return s;
  }
  if (Status s = conns_.cm().Register(pd_, tp::MtuBytes(port_.active_mtu));
      !s.ok()) {
    return s;
  }
  if (Status s = conns_.credits().Register(pd_, attr_.peers_max); !s.ok()) {
    return s;
  }

  // The CM's UD QP.
  auto qp = NewUdQp(CmChannel::kBuffers, CmChannel::kBuffers);
  if (!qp.ok()) return qp.status();
  cm_qp_ = *qp;
  return conns_.cm().Start(cm_qp_);
}

StatusOr<std::unique_ptr<Endpoint>> Endpoint::CreateListener(
    transport::Device* device, transport::ProtectionDomain* pd,
    uint32_t requests_max, const EndpointAttr* like) {
  // A listener only runs the CM: the smallest data path there is.
  EndpointAttr attr;
  if (like != nullptr) {
    attr.channel = like->channel;
    attr.cm_retry_ns = like->cm_retry_ns;
    attr.cm_retries_max = like->cm_retries_max;
    attr.class_of_service = like->class_of_service;
    attr.async_events = like->async_events;
  }
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
  if (attr_.async_events != nullptr) attr_.async_events->Leave(this);
  // Sends that never completed here (unsignaled ones not yet retired among
  // them) give their CQ room back: the CQ may serve other endpoints.
  if (tx_cq_ != nullptr) {
    for (TxOp& op : tx_.ops()) {
      if (op.used && op.reserved) tx_cq_->Unreserve();
    }
    if (InjectsHoldEntries()) {  // every inject in flight holds one
      for (uint32_t i = 0; i < tx_.lent(); ++i) tx_cq_->Unreserve();
    }
  }
  for (CompletionQueue* cq : {tx_cq_, rx_cq_}) {
    if (cq) cq->progress_sources().Remove(this);
  }
  if (eq_) {
    eq_->progress_sources().Remove(this);
    eq_->Purge(user_handle_);  // Events naming us would dangle.
  }
  rx_->Detach(this);
  if (rx_ != own_rx_.get()) {
    // A shared context outlives us: take back what refers to this endpoint
    // (the messages that arrived here, the READs into its receives).
    rx_->DropArrivalsOf(this);
    for (uint32_t ri = 0; ri < tx_.read_count(); ++ri) {
      if (tx_.read(ri).used) OnReadDone(ri, false);
    }
    rx_->ReleaseIfUnused();
  } else {
    // READs into a multi-recv buffer of ours still in flight give back the
    // room held for their entries (the CQ may outlive us).
    for (uint32_t ri = 0; ri < tx_.read_count(); ++ri) {
      if (tx_.read(ri).used && tx_.read(ri).claimed) rx_->ReleaseEntryRoom();
    }
  }
  // QPs first (they reference the SRQ and CQs), then the rest. Failures are
  // ignored: the device releases everything with the fabric anyway.
  for (Peer& p : conns_) {
    if (p.qp) (void)p.qp->Destroy();
    if (p.ah) (void)p.ah->Destroy();
  }
  if (cm_qp_) (void)cm_qp_->Destroy();
  if (srq_) (void)srq_->Destroy();
  // Registrations of rendezvous operations still in flight.
  for (TxOp& op : tx_.ops()) {
    if (op.rdv_mr) ReleaseRdvMr(op);
  }
  for (Read& rd : tx_.reads()) {
    for (tp::MemoryRegion* mr : rd.mrs) {
      if (mr) ReleaseMr(mr);
    }
  }
  for (auto& [dest, ah] : dgram_ah_) (void)ah->Destroy();
  for (auto& [name, ah] : refused_ah_) (void)ah->Destroy();
  for (tp::AddressHandle* ah : retired_ah_) (void)ah->Destroy();
  tx_.Deregister();
  conns_.cm().Deregister();
  conns_.credits().Deregister();
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
  CompletionQueue* const old[2] = {tx_cq_, rx_cq_};
  if (flags & kSend) {
    tx_cq_ = cq;
    tx_selective_ = selective;
  }
  if (flags & kRecv) {
    rx_cq_ = cq;
    rx_selective_ = selective;
  }
  // Reads of `cq` run our progress from now on; a CQ this binding replaced
  // in both roles no longer does.
  cq->progress_sources().Add(this);
  for (CompletionQueue* was : old) {
    if (was != nullptr && was != tx_cq_ && was != rx_cq_) {
      was->progress_sources().Remove(this);
    }
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
  if (Status s = rx_->Attach(this, rx_cq_, rx_selective_, av_, attr_.eager_max);
      !s.ok()) {
    return s;
  }
  enabled_ = true;
  return Status::Ok();
}

Status Endpoint::SetMinMultiRecv(size_t bytes) {
  return rx_->SetMinMultiRecv(bytes);
}

Status Endpoint::BindRx(RxContext* rx) {
  if (enabled_) return InvalidArgument("endpoint already enabled");
  if (rx == nullptr || !rx->shared()) {
    return InvalidArgument("not a shared receive context");
  }
  if (attr_.type == EndpointType::kDgram) {
    return NotSupported("DGRAM endpoints cannot share a receive context");
  }
  if (rx->attr().buffered != rx_->attr().buffered) {
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

StatusOr<uint32_t> Endpoint::PeerFor(uint64_t dest) {
  if (attr_.type == EndpointType::kMsg) {
    // One connection; the destination address is ignored (fi_msg(3)).
    if (listener_ || conns_.empty()) {
      return Status(ENOTCONN, "FI_EP_MSG endpoint is not connected");
    }
    return 0u;
  }
  if (av_ == nullptr) return InvalidArgument("no address vector bound");
  return conns_.ForDest(*av_, dest, attr_.peers_max);
}

}  // namespace softfab::core
