// The device's asynchronous events (see async_events.h for what each does):
// the dispatcher that reads them for every endpoint on the device, and the
// endpoint's handling of those that concern it.
#include "core/async_events.h"

#include <algorithm>
#include <cstring>

#include "core/endpoint.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

// ------------------------------------------------------------- dispatcher

void AsyncEventDispatcher::Join(Endpoint* endpoint) {
  if (std::find(endpoints_.begin(), endpoints_.end(), endpoint) ==
      endpoints_.end()) {
    endpoints_.push_back(endpoint);
  }
}

void AsyncEventDispatcher::Leave(Endpoint* endpoint) {
  auto it = std::find(endpoints_.begin(), endpoints_.end(), endpoint);
  if (it != endpoints_.end()) endpoints_.erase(it);
}

void AsyncEventDispatcher::PollNow() {
  // An endpoint's handling never reads again, but a failure it reports
  // could reach code that asks for a read: one read at a time.
  if (reading_) return;
  reading_ = true;
  next_read_ns_ = device_->clock().NowNs() + kPollIntervalNs;
  for (int i = 0; i < kEventsPerReadMax; ++i) {
    tp::AsyncEvent event;
    if (!device_->GetAsyncEvent(&event).ok()) break;
    ++stats_.read;
    Dispatch(event);
  }
  reading_ = false;
}

void AsyncEventDispatcher::Dispatch(const tp::AsyncEvent& e) {
  using T = tp::AsyncEventType;
  uint64_t* counter = nullptr;
  bool every_endpoint = false;  // Else the one owning the object named.
  switch (e.event_type) {
    case T::kQpFatal:
    case T::kQpReqErr:
    case T::kQpAccessErr:
    case T::kPathMigErr:
      counter = &stats_.qp_errors;
      break;
    case T::kCqErr:
    case T::kSrqErr:
      counter = &stats_.queue_errors;
      break;
    case T::kPortErr:
      // A second PORT_ERR without a PORT_ACTIVE between tells nothing new.
      if (port_down_) {
        ++stats_.ignored;
        return;
      }
      port_down_ = true;
      counter = &stats_.port_down;
      every_endpoint = true;
      break;
    case T::kPortActive:
      // Failures from now on name their own causes (after the grace that
      // PortDownWithin gives connections the down period broke).
      if (port_down_) port_up_ns_ = std::max<uint64_t>(e.time_ns, 1);
      port_down_ = false;
      ++stats_.port_active;
      return;
    case T::kLidChange:
    case T::kGidChange:
      counter = &stats_.address_changes;
      every_endpoint = true;
      break;
    case T::kDeviceFatal:
      device_fatal_ = true;
      counter = &stats_.device_fatal;
      every_endpoint = true;
      break;
    default:  // Informational: nothing to do.
      ++stats_.ignored;
      return;
  }
  bool taken = false;
  // By index: an endpoint's handling neither joins nor leaves, but reports
  // reach user code only through queues, never through a callback.
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if (endpoints_[i]->OnAsyncEvent(e)) {
      taken = true;
      if (!every_endpoint) break;
    }
  }
  if (taken || every_endpoint) {
    ++*counter;
  } else {
    ++stats_.ignored;  // An object no endpoint here owns (the sfv_* layer's).
  }
}

// --------------------------------------------------------------- endpoint

std::optional<uint32_t> Endpoint::PeerOfQp(uint32_t qp_num) const {
  if (auto peer = conns_.ByQpn(qp_num)) return peer;
  // A connection not yet up is not in the QP map.
  for (uint32_t i = 0; i < conns_.size(); ++i) {
    const Peer& p = conns_[i];
    if (p.qp != nullptr && p.qp->qp_num() == qp_num) return i;
  }
  return std::nullopt;
}

bool Endpoint::OnAsyncEvent(const tp::AsyncEvent& e) {
  using T = tp::AsyncEventType;
  switch (e.event_type) {
    case T::kQpFatal:
    case T::kQpReqErr:
    case T::kQpAccessErr:
    case T::kPathMigErr: {
      if (cm_qp_ != nullptr && e.qp_num == cm_qp_->qp_num()) {
        // No connection can be made (or datagram sent) any more.
        Break(kProvQpFatal);
        return true;
      }
      const std::optional<uint32_t> peer = PeerOfQp(e.qp_num);
      if (!peer) return false;
      Peer& p = conns_[*peer];
      if (p.state == PeerState::kFailed) {
        // Failed already by what the device flushed before the event was
        // read: the event names why, for the refusals still to come.
        if (!IsAsyncCause(p.failed_prov_errno)) {
          p.failed_err = EIO;
          p.failed_prov_errno = kProvQpFatal;
        }
        return true;
      }
      FailPeer(*peer, EIO, kProvQpFatal);
      return true;
    }
    case T::kCqErr:
      if ((send_cq_ != nullptr && e.cq_handle == send_cq_->handle()) ||
          (recv_cq_ != nullptr && e.cq_handle == recv_cq_->handle())) {
        Break(kProvCqError);
        return true;
      }
      return false;
    case T::kSrqErr:
      if (srq_ != nullptr && e.srq_handle == srq_->handle()) {
        Break(kProvSrqError);
        return true;
      }
      return false;
    case T::kDeviceFatal:
      Break(kProvDeviceFatal);
      return true;
    case T::kPortErr:
      PushEvent(0, ENETDOWN, nullptr, 0, kProvPortDown);
      return true;
    case T::kLidChange:
    case T::kGidChange: {
      // Only a change of what our name carries matters (a RoCE port gains
      // and loses GIDs as its netdev's addresses change).
      tp::PortAttr port{};
      tp::Gid gid{};
      const bool same = device_->QueryPort(kPort, &port).ok() &&
                        device_->QueryGid(kPort, 0, &gid).ok() &&
                        port.lid == name_.lid &&
                        std::memcmp(gid.raw, name_.gid, sizeof gid.raw) == 0;
      if (!same) PushEvent(0, EADDRNOTAVAIL, nullptr, 0, kProvAddressChanged);
      return true;
    }
    default:
      return false;
  }
}

void Endpoint::Break(int prov_errno) {
  if (broken_cause_ != 0) return;
  broken_cause_ = prov_errno;
  PushEvent(0, EIO, nullptr, 0, prov_errno);
  for (uint32_t i = 0; i < conns_.size(); ++i) {
    const PeerState s = conns_[i].state;
    if (s == PeerState::kConnecting || s == PeerState::kConnected) {
      FailPeer(i, EIO, prov_errno);
    }
  }
}

int Endpoint::Explain(uint32_t peer, int prov_errno) {
  AsyncEventDispatcher* events = attr_.async_events;
  if (events == nullptr) return prov_errno;
  // The event behind this failure may be waiting: read it before the
  // failure is reported.
  if (conns_[peer].state != PeerState::kFailed) events->PollNow();
  const Peer& p = conns_[peer];
  const bool no_answer =
      prov_errno == static_cast<int>(tp::WcStatus::kRetryExcErr) ||
      prov_errno == static_cast<int>(tp::WcStatus::kRespTimeoutErr) ||
      prov_errno == kProvPeerUnreachable;
  const bool flushed =
      prov_errno == static_cast<int>(tp::WcStatus::kWrFlushErr);
  if (p.state == PeerState::kFailed && IsAsyncCause(p.failed_prov_errno) &&
      (no_answer || flushed)) {
    return p.failed_prov_errno;  // No completion of the device names it.
  }
  if (no_answer) {
    const uint64_t cm_ns =
        uint64_t{attr_.cm_retry_ns} * (uint64_t{attr_.cm_retries_max} + 1);
    const uint64_t window = std::max(RcRetryNs(), cm_ns);
    if (events->PortDownWithin(device_->clock().NowNs(), window)) {
      return kProvPortDown;
    }
  }
  return prov_errno;
}

const char* Endpoint::RefusalFor(int prov_errno) {
  switch (prov_errno) {
    case kProvQpFatal:
      return "connection to that peer failed: the device put its queue pair "
             "in error (SF_PROV_QP_FATAL)";
    case kProvPortDown:
      return "connection to that peer failed while the local port was down "
             "(SF_PROV_PORT_DOWN)";
    case kProvCqError:
    case kProvSrqError:
    case kProvDeviceFatal:
      return BrokenReason(prov_errno);
    default:
      return "connection to that peer failed";
  }
}

const char* Endpoint::BrokenReason(int prov_errno) {
  switch (prov_errno) {
    case kProvQpFatal:
      return "the endpoint is unusable: the device put its datagram queue "
             "pair (the connection manager's; a DGRAM endpoint's data) in "
             "error (SF_PROV_QP_FATAL); close it and open another";
    case kProvCqError:
      return "the endpoint is unusable: one of its completion queues failed "
             "(SF_PROV_CQ_ERROR); close it and open another";
    case kProvSrqError:
      return "the endpoint is unusable: its shared receive queue failed "
             "(SF_PROV_SRQ_ERROR); close it and open another";
    default:
      return "the endpoint is unusable: its device failed "
             "(SF_PROV_DEVICE_FATAL); close the domain and open it again";
  }
}

}  // namespace softfab::core
