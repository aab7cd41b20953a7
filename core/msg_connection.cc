// FI_EP_MSG connection management (fi_cm(3)) over the CM datagrams: the
// listener and its table of connectors, connect, accept, reject, the
// connector's kEstablished (the IB CM's RTU), shutdown with its repeated
// kDisconnect (DREQ/DREP), and the event queue reports.
#include <cstring>
#include <memory>
#include <optional>

#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

Status Endpoint::BindEq(EventQueue* eq) {
  if (eq == nullptr) return InvalidArgument("null event queue");
  if (eq_ != nullptr && eq_ != eq) {
    return InvalidArgument("an event queue is bound already");
  }
  eq_ = eq;
  eq_->progress_sources().Add(this);
  return Status::Ok();
}

Status Endpoint::Listen() {
  if (!listener_) return InvalidArgument("not a passive endpoint");
  if (eq_ == nullptr) return InvalidArgument("bind an event queue first");
  enabled_ = true;
  return Status::Ok();
}

void Endpoint::PushEvent(uint32_t type, int err, const uint8_t* data,
                         size_t len, int prov_errno) {
  if (eq_ == nullptr) return;
  EqEvent e;
  e.type = type;
  e.err = err;
  e.prov_errno = prov_errno;
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
  if (broken_cause_ != 0) return Status(EIO, BrokenReason(broken_cause_));
  if (!conns_.empty()) {
    return Status(kErrOpBadState, "connecting or connected already");
  }
  return Status::Ok();
}

void Endpoint::SetCmData(const void* data, size_t len) {
  conns_.msg().cm_data_len = static_cast<uint8_t>(len);
  if (len > 0) std::memcpy(conns_.msg().cm_data, data, len);
}

Status Endpoint::Connect(const wire::Name& to, const void* data, size_t len) {
  if (Status s =
          CheckStartCm("fi_connect needs an FI_EP_MSG endpoint", data, len);
      !s.ok()) {
    return s;
  }
  SetCmData(data, len);
  const uint32_t peer = conns_.FindOrAdd(to);
  if (Status s = StartConnect(peer); !s.ok()) {
    FailPeer(peer, EIO, kProvConnectFailed);
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
  const uint32_t peer = conns_.FindOrAdd(m.from);
  Peer& p = conns_[peer];
  p.qp = *qp;
  p.psn = NewPsn();
  if (Status s = ConnectQp(p, m); !s.ok()) {
    // Nothing stays behind: the call can be retried.
    (void)p.qp->Destroy();
    conns_.Clear();
    return s;
  }
  req.decided = true;
  SetCmData(data, len);
  p.answered_id = m.request_id;
  Credits::Grant(p.credits, m);
  p.peer_buffered_min = m.buffered_min;
  conns_.msg().accepted = true;
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
  const std::optional<uint32_t> it = conns_.Find(req.request.from);
  if (!it || conns_[*it].answered_id != req.request.request_id ||
      conns_[*it].state != PeerState::kIdle) {
    return InvalidArgument("not a pending request of this passive endpoint");
  }
  SetCmData(data, len);
  conns_[*it].state = PeerState::kFailed;
  req.decided = true;
  return SendCm(*it, wire::CmType::kReject);
}

Status Endpoint::Shutdown() {
  if (attr_.type != EndpointType::kMsg || listener_) {
    return InvalidArgument("fi_shutdown needs an FI_EP_MSG endpoint");
  }
  if (conns_.empty() || conns_[0].state != PeerState::kConnected) {
    return Status(kErrOpBadState, "not connected");
  }
  conns_.msg().shutdown = true;
  // Repeated until the peer answers with its own kDisconnect (the IB CM's
  // DREQ/DREP), so a lost datagram does not leave the peer connected.
  conns_.msg().disconnect_pending = true;
  Peer& p = conns_[0];
  p.retries = 0;
  ArmCmTimer(p, device_->clock().NowNs());
  (void)SendCm(0, wire::CmType::kDisconnect);
  FailPeer(0, ECONNRESET, kProvLocalShutdown);
  return Status::Ok();
}

void Endpoint::OnMsgCm(const wire::CmMessage& m) {
  if (listener_) {
    if (m.type != wire::CmType::kConnect) return;
    const uint64_t now = device_->clock().NowNs();
    const std::optional<uint32_t> known = conns_.Find(m.from);
    const bool seen = known && conns_[*known].answered_id == m.request_id;
    if (!seen && (eq_ == nullptr || eq_->full())) {
      return;  // No room to report it: the connector's retry comes back.
    }
    uint32_t peer;
    if (known) {
      peer = *known;
    } else if (conns_.size() < attr_.peers_max) {
      peer = conns_.FindOrAdd(m.from);
    } else {
      // Full: reuse the entry of a request decided long enough ago that its
      // connector has stopped retrying; none such, the connector times out.
      auto stale = ListenerSlotToReuse(now);
      if (!stale) return;
      peer = *stale;
      RetireAh(conns_[peer].ah);
      const wire::Name old = conns_[peer].name;
      conns_[peer] = Peer{};
      conns_[peer].name = old;
      conns_.Rename(peer, m.from);
    }
    Peer& p = conns_[peer];
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
    conns_.msg().cm_data_len = 0;
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
  if (conns_.empty()) return;
  Peer& p = conns_[0];
  switch (m.type) {
    case wire::CmType::kPending:
      // The listener has it: wait for the application's decision.
      if (p.state == PeerState::kConnecting && m.request_id == p.request_id) {
        p.retries = 0;
      }
      return;
    case wire::CmType::kReject:
      if (p.state == PeerState::kConnecting && m.request_id == p.request_id) {
        FailPeer(0, ECONNREFUSED, kProvRejected, &m);
      }
      return;
    case wire::CmType::kReply: {
      if (conns_.msg().accepted || m.request_id != p.request_id) return;
      if (p.state == PeerState::kConnected) {
        // Our kEstablished was lost: the acceptor asks again.
        if (m.from == p.name) (void)SendCm(0, wire::CmType::kEstablished);
        return;
      }
      if (p.state != PeerState::kConnecting) return;
      if (!ConnectQp(p, m).ok()) {
        FailPeer(0, EIO, kProvConnectFailed);
        return;
      }
      // From here on the peer is the accepting endpoint, not the listener.
      conns_.Rename(0, m.from);
      RetireAh(p.ah);
      p.ah = nullptr;
      Credits::Grant(p.credits, m);
      p.peer_buffered_min = m.buffered_min;
      OnConnected(0, /*ready=*/true);
      if (p.state != PeerState::kConnected) return;
      (void)SendCm(0, wire::CmType::kEstablished);
      conns_.msg().connected_reported = true;
      PushEvent(kEqConnected, 0, m.data, m.data_len);
      return;
    }
    case wire::CmType::kEstablished:
      if (conns_.msg().accepted && m.from == p.name &&
          m.request_id == p.answered_id) {
        p.ready = true;
      }
      return;
    case wire::CmType::kDisconnect:
      // A request: answer every one, repeats included (an answer may have
      // been lost). Answers are never answered.
      if (m.from != p.name) return;
      if (p.state == PeerState::kConnected) {
        FailPeer(0, ECONNRESET, kProvPeerShutdown);
      } else if (conns_.msg().shutdown && conns_.msg().connected_reported &&
                 !conns_.msg().peer_shutdown_reported) {
        // fi_cm(3): the peer's fi_shutdown generates FI_SHUTDOWN, also when
        // ours crossed it (both sides shut down at once, as fabtests'
        // cm_data does, and each waits for its SF_SHUTDOWN).
        conns_.msg().peer_shutdown_reported = true;
        PushEvent(kEqShutdown, 0, nullptr, 0);
      }
      (void)SendCm(0, wire::CmType::kDisconnectReply);
      return;
    case wire::CmType::kDisconnectReply:
      if (m.from == p.name) conns_.msg().disconnect_pending = false;
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
  for (uint32_t i = 0; i < conns_.size(); ++i) {
    const Peer& p = conns_[i];
    const bool decided =
        p.state == PeerState::kFailed || (p.request && p.request->decided);
    if (decided && now - p.last_heard_ns >= quiet) return i;
  }
  return std::nullopt;
}

void Endpoint::MsgTimers(uint64_t now) {
  if (listener_ || conns_.empty()) return;
  Peer& p = conns_[0];
  if (conns_.msg().disconnect_pending) {
    if (now < p.retry_at_ns) return;
    if (++p.retries > attr_.cm_retries_max) {
      conns_.msg().disconnect_pending =
          false;  // The peer is gone; nothing to wait for.
      return;
    }
    ++stats_.cm_retries;
    (void)SendCm(0, wire::CmType::kDisconnect);
    ArmCmTimer(p, now);
    return;
  }
  if (!conns_.msg().accepted || p.state != PeerState::kConnected) return;
  if (p.ready) {
    if (!conns_.msg().connected_reported) {
      conns_.msg().connected_reported = true;
      PushEvent(kEqConnected, 0, nullptr, 0);
    }
    return;
  }
  // The acceptor repeats its reply until the connector confirms.
  if (now < p.retry_at_ns) return;
  if (++p.retries > attr_.cm_retries_max) {
    FailPeer(0, ETIMEDOUT, Explain(0, kProvPeerUnreachable));
    return;
  }
  ++stats_.cm_retries;
  (void)SendCm(0, wire::CmType::kReply);
  ArmCmTimer(p, now);
}

}  // namespace softfab::core
