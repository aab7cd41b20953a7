// RDM connection manager (rxm_conn.c; UCX's src/ucp/wireup/): the first send
// to a peer creates an RC QP and sends a CM request over the UD QP; the peer
// connects its own RC QP and replies. Requests are retried on a timer; a
// duplicate request gets the same reply; when both sides start at once the
// smaller name's request wins. Also what both endpoint types share: RC QP
// set-up, a connection coming up, and a peer failing.
#include <cstring>

#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

namespace {
// RC: EndpointAttr::rc_retry_count retries (6 by default, never 7: see
// there) of the ack timeout (EndpointAttr::rc_timeout), then the QP fails
// (IBV_WC_RETRY_EXC_ERR) and so does the peer, until the next send makes a
// new connection. The core never provokes RNR (credits), so RNR retry is
// unlimited.
constexpr uint8_t kRnrRetryForever = 7;
constexpr uint8_t kMinRnrTimer = 12;
}  // namespace

StatusOr<tp::QueuePair*> Endpoint::NewRcQp() {
  tp::QpInitAttr init;
  init.send_cq = send_cq_;
  init.recv_cq = recv_cq_;
  init.srq = srq_;
  init.qp_type = tp::QpType::kRc;
  init.cap.max_send_wr = qp_send_depth();
  // Sends and injects use one SGE; rendezvous READs one per receive iovec.
  init.cap.max_send_sge = tx_.read_sge_max();
  init.cap.max_inline_data =
      attr_.inline_sends ? tx_.inline_max() : wire::kHeaderBytes;
  auto qp = pd_->CreateQp(init);
  if (!qp.ok()) return qp.status();
  tp::QpAttr a;
  a.qp_state = tp::QpState::kInit;
  a.pkey_index = attr_.class_of_service.pkey_index;
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

tp::AhAttr Endpoint::AddressOf(const wire::Name& name) const {
  return AhAttrFor(name, NeedsGrh(port_.link_layer, name_.gid, name),
                   attr_.class_of_service.traffic_class,
                   attr_.class_of_service.service_level);
}

void Endpoint::DescribePort(wire::CmMessage* m) const {
  m->mtu = static_cast<uint8_t>(port_.active_mtu);
  m->reads_initiated = reads_initiated_;
  m->reads_served = reads_served_;
}

Status Endpoint::ConnectQp(Peer& p, const wire::CmMessage& their) {
  // Both ends' smaller MTU: a packet sized for one end's port alone is
  // dropped by the other's when that is smaller, until the QP fails. (The
  // peer's is an IB MTU: DecodeCm refuses any other.)
  const uint8_t mtu =
      std::min(static_cast<uint8_t>(port_.active_mtu), their.mtu);
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRtr;
  a.path_mtu = static_cast<tp::Mtu>(mtu);
  a.dest_qp_num = their.rc_qpn;
  a.rq_psn = their.psn;
  // READs the peer may have in flight to us: what it issues and we serve.
  a.max_dest_rd_atomic =
      std::max<uint8_t>(1, std::min(reads_served_, their.reads_initiated));
  a.min_rnr_timer = kMinRnrTimer;
  a.ah_attr = AddressOf(p.name);
  if (Status s = p.qp->Modify(
          a, tp::kQpState | tp::kQpAv | tp::kQpPathMtu | tp::kQpDestQpn |
                 tp::kQpRqPsn | tp::kQpMaxDestRdAtomic | tp::kQpMinRnrTimer);
      !s.ok()) {
    return s;
  }
  a.qp_state = tp::QpState::kRts;
  a.sq_psn = p.psn;
  a.timeout = attr_.rc_timeout;
  a.retry_cnt = attr_.rc_retry_count;
  a.rnr_retry = kRnrRetryForever;
  // READs we have in flight to the peer: what we issue and it serves.
  a.max_rd_atomic =
      std::max<uint8_t>(1, std::min(reads_initiated_, their.reads_served));
  if (Status s = p.qp->Modify(a, tp::kQpState | tp::kQpSqPsn | tp::kQpTimeout |
                                     tp::kQpRetryCnt | tp::kQpRnrRetry |
                                     tp::kQpMaxQpRdAtomic);
      !s.ok()) {
    return s;
  }
  p.remote_qpn = their.rc_qpn;
  p.remote_psn = their.psn;
  return Status::Ok();
}

Status Endpoint::StartConnect(uint32_t peer) {
  Peer& p = conns_[peer];
  auto qp = NewRcQp();
  if (!qp.ok()) return qp.status();
  p.qp = *qp;
  p.psn = NewPsn();
  p.request_id = conns_.cm().NextRequestId();
  p.state = PeerState::kConnecting;
  conns_.MarkBusy(peer);
  p.retries = 0;
  if (attr_.type == EndpointType::kRdm && p.name == name_) {
    return ConnectToSelf(peer);
  }
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

// An RDM endpoint sending to its own address (fi_getinfo's FI_LOCAL_COMM;
// fabtests' functional/loopback): no CM exchange, since a request from
// ourselves is dropped as bogus (OnCm); the RC QP is connected to itself
// (IB allows a QP as its own destination; rxe loops it back) and grants
// its own credits, as a peer's request and reply would.
Status Endpoint::ConnectToSelf(uint32_t peer) {
  Peer& p = conns_[peer];
  wire::CmMessage self;
  self.rc_qpn = p.qp->qp_num();
  self.psn = p.psn;
  DescribePort(&self);
  if (Status s = ConnectQp(p, self); !s.ok()) {
    FailPeer(peer, EIO, kProvConnectFailed);
    return s;
  }
  wire::CmMessage m;
  m.credit_addr = conns_.credits().word_address(peer);
  m.credit_rkey = conns_.credits().word_rkey();
  m.credits = GrantFor(peer);
  p.answered_id = p.request_id;
  Credits::Grant(p.credits, m);
  p.peer_buffered_min = static_cast<uint32_t>(buffered_min_);
  OnConnected(peer, /*ready=*/true);
  return Status::Ok();
}

Status Endpoint::SendCm(uint32_t peer, wire::CmType type) {
  Peer& p = conns_[peer];
  if (p.ah == nullptr) {
    auto made = pd_->CreateAh(AddressOf(p.name));
    if (!made.ok()) return made.status();
    p.ah = *made;
  }
  wire::CmMessage m;
  m.type = type;
  m.from = name_;
  DescribePort(&m);
  m.rc_qpn = p.qp ? p.qp->qp_num() : 0;
  m.psn = p.psn;
  m.credit_addr = conns_.credits().word_address(peer);
  m.credit_rkey = conns_.credits().word_rkey();
  // Our grant to the peer, the same in every message to it; a listener's
  // (kPending, kReject) grants nothing and carries the default, which nobody
  // reads from them.
  m.credits = listener_ ? attr_.credits : GrantFor(peer);
  m.buffered_min = static_cast<uint32_t>(buffered_min_);
  // The initiator's id: its own for what it sends, echoed by the other side.
  const bool initiator =
      type == wire::CmType::kRequest || type == wire::CmType::kConnect ||
      type == wire::CmType::kEstablished ||
      (type == wire::CmType::kDisconnect && !conns_.msg().accepted);
  m.request_id = initiator ? p.request_id : p.answered_id;
  if (type == wire::CmType::kConnect || type == wire::CmType::kReject ||
      (type == wire::CmType::kReply && attr_.type == EndpointType::kMsg)) {
    m.data_len = conns_.msg().cm_data_len;
    std::memcpy(m.data, conns_.msg().cm_data, conns_.msg().cm_data_len);
  }
  return conns_.cm().Send(m, p.ah, p.name);
}

void Endpoint::OnCm(const uint8_t* bytes, size_t len) {
  wire::CmPrefix prefix;
  if (!wire::DecodeCmPrefix(bytes, len, &prefix) || prefix.from == name_) {
    ++stats_.bad_headers;
    return;
  }
  if (prefix.type == wire::CmType::kVersionRefused) {
    OnVersionRefused(prefix);
    return;
  }
  if (prefix.version != wire::kCmVersion) {
    RefuseVersion(prefix);
    return;
  }
  wire::CmMessage m;
  if (!wire::DecodeCm(bytes, len, &m)) {
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
  if (!conns_.Find(m.from) && conns_.size() >= attr_.peers_max) {
    return;  // No room: the peer's retries fail and it reports the error.
  }
  const uint32_t peer = conns_.FindOrAdd(m.from);
  Peer& p = conns_[peer];
  auto accept = [&]() {
    if (p.qp == nullptr) {
      auto qp = NewRcQp();
      if (!qp.ok()) return;
      p.qp = *qp;
      p.psn = NewPsn();
    }
    if (!ConnectQp(p, m).ok()) {
      FailPeer(peer, EIO, kProvConnectFailed);
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
      // Sends queued here wait for the peer's first message (the IB CM's
      // RTU). The peer may have given up before our reply reached it; then
      // that message never comes, and past the time its requests and its
      // first SEND's retransmissions could take, the peer fails: nothing
      // waits forever.
      p.retry_at_ns = device_->clock().NowNs() +
                      uint64_t{attr_.cm_retries_max} * attr_.cm_retry_ns +
                      (uint64_t{4096} << attr_.rc_timeout) *
                          (uint64_t{attr_.rc_retry_count} + 1);
      p.deadline_armed = false;  // Armed once a send waits for it.
    }
  };
  if (m.type == wire::CmType::kRequest) {
    // A request naming the QP (and its initial PSN) of the connection we
    // had with the peer is a late copy from that connection (a CM retry, or
    // the losing request of a crossing): never taken for a new connection.
    const bool old_qp =
        p.remote_qpn != 0 && m.rc_qpn == p.remote_qpn && m.psn == p.remote_psn;
    switch (p.state) {
      case PeerState::kIdle:
        if (!old_qp) accept();
        break;
      case PeerState::kConnecting:
        // Both started: the smaller name's request wins.
        if (m.from < name_ && !old_qp) accept();
        break;
      case PeerState::kConnected:
        if (m.request_id == p.answered_id) {
          // Our reply was lost: send it again.
          (void)SendCm(peer, wire::CmType::kReply);
        } else if (attr_.type == EndpointType::kRdm && !old_qp) {
          // A new QP: the peer's side of our connection failed and it
          // connects again. Ours fails (its operations with ECONNRESET);
          // once they are reported the request is taken, now or at the
          // peer's next retry.
          FailPeer(peer, ECONNRESET, kProvPeerReconnected);
          if (CanReconnect(peer)) {
            ResetPeer(peer);
            accept();
          }
        }
        break;
      case PeerState::kFailed:
        // RDM reconnection from the peer's side, once the old connection's
        // operations are all reported (else its next retry is taken).
        if (!old_qp && CanReconnect(peer)) {
          ResetPeer(peer);
          accept();
        }
        break;
    }
    return;
  }
  // A reply to our request.
  if (p.state != PeerState::kConnecting || m.request_id != p.request_id) return;
  if (!ConnectQp(p, m).ok()) {
    FailPeer(peer, EIO, kProvConnectFailed);
    return;
  }
  Credits::Grant(p.credits, m);
  p.peer_buffered_min = m.buffered_min;
  OnConnected(peer, /*ready=*/true);  // They reached RTS before replying.
}

void Endpoint::RefuseVersion(const wire::CmPrefix& from) {
  ++stats_.cm_versions_refused;
  tp::AddressHandle* ah = nullptr;
  if (const auto peer = conns_.Find(from.from); peer && conns_[*peer].ah) {
    ah = conns_[*peer].ah;
  } else if (auto it = refused_ah_.find(from.from); it != refused_ah_.end()) {
    ah = it->second;
  } else if (refused_ah_.size() < kRefusedNamesMax) {
    auto made = pd_->CreateAh(AddressOf(from.from));
    if (!made.ok()) return;  // a name no port answers to: nobody to tell
    ah = refused_ah_.emplace(from.from, *made).first->second;
  } else {
    return;
  }
  (void)conns_.cm().SendVersionRefused(name_, ah, from.from);
}

void Endpoint::RetireAh(tp::AddressHandle* ah) {
  if (ah == nullptr) return;
  if (conns_.cm().sends_in_flight() == 0) {
    (void)ah->Destroy();
  } else {
    retired_ah_.push_back(ah);
  }
}

void Endpoint::DestroyRetiredAhs() {
  for (tp::AddressHandle* ah : retired_ah_) (void)ah->Destroy();
  retired_ah_.clear();
}

void Endpoint::OnVersionRefused(const wire::CmPrefix& from) {
  // Only a peer of another version refuses ours.
  if (from.version == wire::kCmVersion) return;
  const auto peer = conns_.Find(from.from);
  if (!peer || conns_[*peer].state != PeerState::kConnecting) return;
  FailPeer(*peer, ECONNREFUSED, kProvCmVersion);
}

void Endpoint::OnConnected(uint32_t peer, bool ready) {
  // The credits this connection grants (decided here if no CM message of
  // ours carried them yet) are backed by buffers: windows are added until
  // every grant held has its own.
  (void)GrantFor(peer);
  while (rx_bounce_count_ < rx_granted_ &&
         rx_bounce_count_ + attr_.credits <= rx_bounce_max_) {
    if (!AddBounceChunk().ok()) {
      FailPeer(peer, ENOMEM, kProvNoMemory);
      return;
    }
  }
  Peer& p = conns_[peer];
  p.state = PeerState::kConnected;
  p.ready = ready;
  p.qpn = p.qp->qp_num();
  conns_.SetQpn(p.qpn, peer);
}

uint32_t Endpoint::GrantFor(uint32_t peer) {
  PeerCredits& c = conns_[peer].credits;
  if (c.grant_out != 0) return c.grant_out;
  // The buffers a grant counts on are on the SRQ (Endpoint::Repost). Only
  // deferred ones: a simulator's batch chain is posted where it always was.
  if (attr_.defer_reposts) FlushReposts();
  ++rx_granted_peers_;
  // Buffers kept back for the peers that may still come, kMinGrant each, as
  // far as the SRQ holds them beyond 17 full windows (a device whose SRQ is
  // too small for peers_max x kMinGrant backs the first peers' grants only).
  const uint64_t full =
      std::min<uint64_t>(rx_bounce_max_, uint64_t{attr_.credits} * 17);
  const uint64_t reserve = std::min<uint64_t>(
      uint64_t{kMinGrant} *
          (attr_.peers_max - std::min(attr_.peers_max, rx_granted_peers_)),
      rx_bounce_max_ - full);
  const uint64_t taken = rx_granted_ + reserve;
  const uint64_t room = rx_bounce_max_ > taken ? rx_bounce_max_ - taken : 0;
  // At most half of what is free, so that a pool smaller than the windows
  // asked for is shared out (64, 32, 16, ... of 128) rather than given to
  // the first peer whole.
  c.grant_out = static_cast<uint32_t>(std::min<uint64_t>(
      attr_.credits, std::max<uint64_t>(room / 2, kMinGrant)));
  c.grant_held = true;
  rx_granted_ += c.grant_out;
  ++stats_.grants;
  if (c.grant_out < attr_.credits) ++stats_.grants_reduced;
  return c.grant_out;
}

void Endpoint::ReleaseGrant(uint32_t peer) {
  PeerCredits& c = conns_[peer].credits;
  if (!c.grant_held) return;
  c.grant_held = false;
  rx_granted_ -= c.grant_out;
  --rx_granted_peers_;
}

bool Endpoint::CanReconnect(uint32_t peer) const {
  const Peer& p = conns_[peer];
  // FI_EP_MSG follows fi_msg: the application connects again. A broken
  // endpoint (its CQ, SRQ or device failed) stays broken. A peer refused for
  // its CM version would refuse again.
  if (attr_.type != EndpointType::kRdm || broken_cause_ != 0 ||
      p.state != PeerState::kFailed || p.failed_prov_errno == kProvCmVersion) {
    return false;
  }
  // While the local port is down a new connection cannot come up: sends are
  // refused naming the port until its PORT_ACTIVE has been read.
  if (attr_.async_events != nullptr && attr_.async_events->port_down()) {
    return false;
  }
  // Every operation of the old connection reported first (its flushed work
  // completions read), so none is taken for the new connection's. (Its
  // messages that arrive late, or waited for CQ room, are known by their QP
  // number: OnBounce.)
  return p.waiting.empty() && p.in_flight == 0 && p.sq_outstanding == 0 &&
         p.acks.empty() && p.reads_waiting.empty();
}

void Endpoint::ResetPeer(uint32_t peer) {
  Peer& p = conns_[peer];
  // The old QP goes first: a credit write-back of the old connection still
  // on the wire then finds no QP, and cannot land on the new one's word.
  if (p.qp != nullptr) {
    // Its number stays known, as the previous connection's, for what
    // arrived on it and is not yet taken (OnBounce); the one before it is
    // forgotten (a late arrival on that is a stray).
    if (p.old_qpn != 0 && p.old_qpn != p.qpn) {
      conns_.ForgetQpn(p.old_qpn, peer);
    }
    p.old_qpn = p.qpn;
    p.qpn = 0;
    (void)p.qp->Destroy();
    p.qp = nullptr;
  }
  ReleaseGrant(peer);  // Already released by FailPeer; a no-op then.
  p.credits = PeerCredits{};
  conns_.credits().Forget(peer);
  p.state = PeerState::kIdle;
  p.ready = false;
  p.psn = 0;
  p.request_id = 0;
  p.retry_at_ns = 0;
  p.deadline_armed = false;
  p.retries = 0;
  p.failed_err = 0;
  p.failed_prov_errno = 0;
  // Messages kept from the old connection stay in the receive context, but
  // not against the new one's credits: they count as stale. Those still
  // kept from the connection before it go now (dropped and counted), so a
  // peer that reconnects again and again cannot grow them without bound: at
  // most 2 x credits stale and 2 x credits current per peer.
  if (p.unexpected_stale > 0) {
    const uint32_t stale = p.unexpected_stale;
    rx_->DropKeptOf(this, peer, p.epoch - 1);  // UnexpectedReleased counts
    stats_.stale_dropped += stale - p.unexpected_stale;
  }
  p.unexpected_stale = p.unexpected_buffered + p.unexpected_withheld;
  p.unexpected_buffered = 0;
  p.unexpected_withheld = 0;
  ++p.epoch;
  ++stats_.reconnects;
}

uint64_t Endpoint::RcRetryNs() const {
  return (uint64_t{4096} << attr_.rc_timeout) *
         (uint64_t{attr_.rc_retry_count} + 1);
}

void Endpoint::FailPeer(uint32_t peer, int err, int prov_errno,
                        const wire::CmMessage* cm) {
  Peer& p = conns_[peer];
  const PeerState was = p.state;
  if (was == PeerState::kFailed && IsAsyncCause(p.failed_prov_errno)) {
    // The device's event named the cause: what fails after it (flushed
    // work) failed because of it.
    err = p.failed_err;
    prov_errno = p.failed_prov_errno;
  }
  p.state = PeerState::kFailed;
  if (was != PeerState::kFailed) {
    // A failed attempt holds the next one off for an RC retry time; a
    // connection that was up may be made again at once.
    p.reconnect_after_ns = was == PeerState::kConnecting
                               ? device_->clock().NowNs() + RcRetryNs()
                               : 0;
  }
  ReleaseGrant(peer);  // Its QP takes no more of our buffers.
  if (attr_.type == EndpointType::kMsg && !listener_ &&
      !conns_.msg().shutdown && was != PeerState::kFailed) {
    const uint8_t* data = cm ? cm->data : nullptr;
    const size_t len = cm ? cm->data_len : 0;
    if (conns_.msg().connected_reported) {
      PushEvent(kEqShutdown, 0, data, len);  // The connection went away.
    } else {
      PushEvent(0, err, data, len, prov_errno);  // Connecting failed.
    }
  }
  p.failed_err = err;
  p.failed_prov_errno = prov_errno;
  if (p.qp != nullptr && attr_.type == EndpointType::kRdm &&
      was != PeerState::kFailed) {
    // The far side may still think the connection up (it connected with a
    // reply of ours that arrived late): with our QP in error its next SEND
    // goes unanswered and fails there too, instead of waiting for ever on
    // an answer (a rendezvous read-done) nobody will send.
    tp::QpAttr a;
    a.qp_state = tp::QpState::kError;
    (void)p.qp->Modify(a, tp::kQpState);
  }
  // Unsignaled work that already succeeded raises nothing now, flushed or
  // not: a signaled request behind it (flushed in order after the rest on a
  // QP in error; on a live one, completed or failed by its retries) retires
  // it, so the connection's count can reach 0 and it can be made anew.
  if (p.qp != nullptr && was != PeerState::kFailed) RetireUnsignaledOf(peer);
  // READs still waiting for send queue room will never be posted on this
  // connection: each fails now, its receive with it (once), and the acks
  // queued for the peer go too (its side fails what they would finish; no
  // more are queued, SendAck). Left queued, they were never reported and
  // kept the peer from being connected anew (CanReconnect).
  while (!p.reads_waiting.empty()) {
    const uint32_t ri = p.reads_waiting.front();
    p.reads_waiting.pop_front();
    tx_.read(ri).prov_errno = prov_errno;
    OnReadDone(ri, false);
  }
  p.acks.clear();
  while (!p.waiting.empty()) {
    const uint32_t index = p.waiting.front();
    p.waiting.pop_front();
    CompleteTx(index, err, prov_errno);
    FreeTx(index);
  }
  // Sends the transport finished that still wait for the peer's answer (the
  // end of a rendezvous READ, a delivery or match acknowledgement) will get
  // none: they fail now, once each. Sends still on the QP complete as its
  // work completions come back (flushed, with the QP in error).
  for (uint32_t index = 0; index < tx_.size(); ++index) {
    TxOp& op = tx_.op(index);
    if (!op.used || op.peer != peer || !op.send_done) continue;
    CompleteTx(index, err, prov_errno);
    --p.in_flight;
    FreeTx(index);
  }
}

void Endpoint::ArmCmTimer(Peer& p, uint64_t now) {
  p.retry_at_ns = now + attr_.cm_retry_ns;
  device_->ScheduleWakeup(p.retry_at_ns);
}

void Endpoint::RetryConnects(uint64_t now) {
  // Index loop over the live list: failing a peer may add to it.
  for (size_t k = 0; k < conns_.busy().size(); ++k) {
    const uint32_t i = conns_.busy()[k];
    Peer& p = conns_[i];
    if (attr_.type == EndpointType::kRdm && p.state == PeerState::kConnected &&
        !p.ready && !p.waiting.empty()) {
      if (now >= p.retry_at_ns) {
        // Accepted; the peer never spoke.
        FailPeer(i, EHOSTUNREACH, Explain(i, kProvPeerUnreachable));
      } else if (!p.deadline_armed) {
        p.deadline_armed = true;
        device_->ScheduleWakeup(p.retry_at_ns);
      }
      continue;
    }
    if (p.state != PeerState::kConnecting || now < p.retry_at_ns) continue;
    if (++p.retries > attr_.cm_retries_max) {
      FailPeer(i, attr_.type == EndpointType::kMsg ? ETIMEDOUT : EHOSTUNREACH,
               Explain(i, kProvPeerUnreachable));
      continue;
    }
    ++stats_.cm_retries;
    (void)SendCm(i, RequestType());
    ArmCmTimer(p, now);
  }
}

}  // namespace softfab::core
