// Endpoints and connection management: sf_endpoint and its bindings (CQ, AV,
// EQ, shared receive context), enable, query, names, cancel and options;
// passive endpoints and the FI_EP_MSG connection calls (listen, connect,
// accept, reject, shutdown) whose events arrive on an event queue.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "core/endpoint.h"
#include "core/event_queue.h"
#include "core/wire.h"

namespace softfab::fabric_internal {

static_assert(SF_IOV_LIMIT == core::Endpoint::kIovMax,
              "the public iov limit is the core's");

namespace {

bool ValidInfo(const sf_info* info) {
  return info != nullptr && info->magic == kMagic && info->request != nullptr;
}

}  // namespace

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_endpoint(sf_domain* pub, const sf_ep_attr* attr, sf_ep** out,
                void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr || attr == nullptr) {
    return Fail(EINVAL, "domain, attr and ep must be valid");
  }
  core::EndpointAttr a;
  switch (Raw(attr->type)) {
    case SF_EP_RDM:
      a.type = core::EndpointType::kRdm;
      break;
    case SF_EP_MSG:
      a.type = core::EndpointType::kMsg;
      break;
    case SF_EP_DGRAM:
      a.type = core::EndpointType::kDgram;
      break;
    default:
      return Fail(EINVAL, "unknown endpoint type");
  }
  if (attr->caps & ~(SF_MSG | SF_TAGGED | SF_DIRECTED_RECV | SF_SEND | SF_RECV |
                     SF_VARIABLE_MSG)) {
    return Fail(EINVAL, "unsupported capability bits");
  }
  if (attr->mode & ~SF_BUFFERED_RECV) {
    return Fail(EINVAL, "unsupported mode bits (SF_BUFFERED_RECV only)");
  }
  if ((attr->mode & SF_BUFFERED_RECV || attr->caps & SF_VARIABLE_MSG) &&
      attr->type == SF_EP_DGRAM) {
    return Fail(EINVAL, "DGRAM endpoints have no buffered receives");
  }
  if (attr->op_flags & ~(core::kCompletionLevels | SF_COMPLETION)) {
    return Fail(EINVAL, "op_flags may only choose a completion level");
  }
  a.caps = attr->caps & (SF_DIRECTED_RECV | SF_VARIABLE_MSG);
  a.buffered =
      (attr->mode & SF_BUFFERED_RECV) || (attr->caps & SF_VARIABLE_MSG);
  a.op_flags = attr->op_flags;
  if (attr->tx_size) a.tx_size = static_cast<uint32_t>(attr->tx_size);
  if (attr->rx_size) a.rx_size = static_cast<uint32_t>(attr->rx_size);
  if (attr->tx_size > (1u << 20) || attr->rx_size > (1u << 20)) {
    return Fail(EINVAL, "tx_size and rx_size must be at most 2^20");
  }
  if (attr->info != nullptr &&
      (attr->type != SF_EP_MSG || !ValidInfo(attr->info))) {
    return Fail(EINVAL,
                "info must be an SF_CONNREQ's, for an SF_EP_MSG endpoint");
  }
  SetBackendTiming(d, &a);
  auto ep = core::Endpoint::Create(d->device, d->pd, a);
  if (!ep.ok()) return Fail(ep.status());
  auto* e = NewObject<Ep>(SF_CLASS_EP, context, &d->children);
  if (attr->info != nullptr) e->request = attr->info->request;
  e->primary_caps = attr->caps & (SF_MSG | SF_TAGGED);
  e->domain = d;
  e->ep = std::move(*ep);
  d->endpoints.push_back(e->ep.get());
  e->ep->rx_context()->set_user_handle(
      attr->recv_context_ep ? attr->recv_context_ep : static_cast<sf_ep*>(e));
  e->ep->set_user_handle(&e->fid);
  *out = e;
  return 0;
}

int sf_ep_bind(sf_ep* pub, sf_fid* bfid, uint64_t flags) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || bfid == nullptr) return Fail(EINVAL, "bad argument");
  if (ep->ep->enabled()) return Fail(SF_EOPBADSTATE, "endpoint is enabled");
  if (IsClass(bfid, SF_CLASS_CQ)) {
    Cq* cq = ObjectOf<Cq>(bfid);
    if (cq->domain != ep->domain) {
      return Fail(EINVAL, "CQ belongs to another domain");
    }
    const Status s = ep->ep->BindCq(cq->cq.get(), flags);
    if (!s.ok()) return Fail(s);
    Cq* old[2] = {ep->tx_cq, ep->rx_cq};
    if (flags & SF_SEND) ep->tx_cq = cq;
    if (flags & SF_RECV) ep->rx_cq = cq;
    if (std::find(cq->eps.begin(), cq->eps.end(), ep) == cq->eps.end()) {
      cq->eps.push_back(ep);
    }
    // A CQ this binding replaced in both roles no longer drives this endpoint.
    for (Cq* was : old) {
      if (was == nullptr || was == ep->tx_cq || was == ep->rx_cq) continue;
      auto it = std::find(was->eps.begin(), was->eps.end(), ep);
      if (it != was->eps.end()) was->eps.erase(it);
    }
    return 0;
  }
  if (IsClass(bfid, SF_CLASS_AV)) {
    Av* av = ObjectOf<Av>(bfid);
    if (av->domain != ep->domain) {
      return Fail(EINVAL, "AV belongs to another domain");
    }
    if (flags != 0) return Fail(EINVAL, "AV binding takes no flags");
    const Status s = ep->ep->BindAv(av->av.get());
    if (!s.ok()) return Fail(s);
    if (ep->av) --ep->av->users;
    ep->av = av;
    ++av->users;
    return 0;
  }
  if (IsClass(bfid, SF_CLASS_EQ)) {
    Eq* eq = ObjectOf<Eq>(bfid);
    if (eq->fabric != ep->domain->fabric) {
      return Fail(EINVAL, "EQ belongs to another fabric");
    }
    if (flags != 0) return Fail(EINVAL, "EQ binding takes no flags");
    if (ep->eq) return Fail(EINVAL, "an event queue is bound already");
    const Status s = ep->ep->BindEq(eq->eq.get());
    if (!s.ok()) return Fail(s);
    ep->eq = eq;
    ++eq->users;
    return 0;
  }
  if (IsClass(bfid, SF_CLASS_SRX_CTX)) {
    Srx* srx = ObjectOf<Srx>(bfid);
    if (srx->domain != ep->domain) {
      return Fail(EINVAL, "shared context belongs to another domain");
    }
    if (flags != 0)
      return Fail(EINVAL, "shared context binding takes no flags");
    if (ep->srx)
      return Fail(EINVAL, "a shared receive context is bound already");
    const Status s = ep->ep->BindRx(srx->rx.get());
    if (!s.ok()) return Fail(s);
    ep->srx = srx;
    ++srx->users;
    return 0;
  }
  return Fail(EINVAL,
              "only a CQ, an AV, an EQ or a shared receive context can be "
              "bound");
}

int sf_srx_context(sf_domain* pub, const sf_rx_attr* attr, sf_ep** out,
                   void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and rx_ep must be valid");
  }
  core::RxContext::Attr a;
  if (attr != nullptr) {
    if (attr->caps & ~(SF_DIRECTED_RECV | SF_MSG | SF_TAGGED | SF_RECV)) {
      return Fail(EINVAL, "unsupported capability bits");
    }
    if (attr->mode & ~SF_BUFFERED_RECV) return Fail(EINVAL, "unsupported mode");
    if (attr->op_flags != 0) return Fail(EINVAL, "no op_flags are supported");
    if (attr->size > (1u << 20)) return Fail(EINVAL, "size must be <= 2^20");
    a.caps = attr->caps & SF_DIRECTED_RECV;
    a.buffered = attr->mode & SF_BUFFERED_RECV;
    if (attr->size) a.size = static_cast<uint32_t>(attr->size);
  }
  auto rx = core::RxContext::CreateShared(a);
  if (!rx.ok()) return Fail(rx.status());
  auto* x = NewObject<Srx>(SF_CLASS_SRX_CTX, context, &d->children);
  x->domain = d;
  x->rx = std::move(*rx);
  x->rx->set_user_handle(static_cast<sf_ep*>(x));
  d->srxs.push_back(x);
  *out = x;
  return 0;
}

int sf_enable(sf_ep* pub) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr) return Fail(EINVAL, "not an endpoint");
  const Status s = ep->ep->Enable();
  return s.ok() ? 0 : Fail(s);
}

int sf_ep_query(sf_ep* pub, sf_ep_attr* attr) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || attr == nullptr) return Fail(EINVAL, "bad argument");
  const core::EndpointAttr& a = ep->ep->attr();
  switch (a.type) {
    case core::EndpointType::kRdm:
      attr->type = SF_EP_RDM;
      break;
    case core::EndpointType::kMsg:
      attr->type = SF_EP_MSG;
      break;
    case core::EndpointType::kDgram:
      attr->type = SF_EP_DGRAM;
      break;
  }
  // fi_getinfo(3): the primary capabilities asked for and no others (with
  // none asked for, both), SF_SEND and SF_RECV as their modifiers. The
  // endpoint takes both kinds of call either way; what it reports is what
  // the application may rely on.
  const uint64_t primary =
      ep->primary_caps ? ep->primary_caps : (SF_MSG | SF_TAGGED);
  attr->caps = primary | SF_SEND | SF_RECV | a.caps;
  attr->op_flags = a.op_flags;
  attr->tx_size = a.tx_size;
  attr->rx_size = a.rx_size;
  attr->max_msg_size = ep->ep->max_msg_size();
  attr->inject_size = a.inject_size;
  attr->msg_prefix_size = ep->ep->msg_prefix_size();
  return 0;
}

int sf_getname(sf_fid* fid, void* addr, size_t* addrlen) {
  const bool pep = IsClass(fid, SF_CLASS_PEP);
  if ((!IsClass(fid, SF_CLASS_EP) && !pep) || addrlen == nullptr) {
    return Fail(EINVAL, "bad argument");
  }
  core::Endpoint* ep =
      pep ? ObjectOf<Pep>(fid)->ep.get() : ObjectOf<Ep>(fid)->ep.get();
  const size_t room = *addrlen;
  *addrlen = SF_NAME_BYTES;
  if (addr == nullptr || room < SF_NAME_BYTES) {
    return Fail(SF_ETOOSMALL, "name buffer too small (size written back)");
  }
  softfab::wire::EncodeName(ep->name(), static_cast<uint8_t*>(addr));
  return 0;
}

ssize_t sf_cancel(sf_fid* fid, void* context) {
  Status s;
  if (IsClass(fid, SF_CLASS_EP)) {
    s = ObjectOf<Ep>(fid)->ep->Cancel(context);
  } else if (IsClass(fid, SF_CLASS_SRX_CTX)) {
    s = ObjectOf<Srx>(fid)->rx->Cancel(context);
  } else {
    return Fail(EINVAL, "not an endpoint or a shared receive context");
  }
  SyncWaitFds(IsClass(fid, SF_CLASS_EP) ? ObjectOf<Ep>(fid)->domain->fabric
                                        : ObjectOf<Srx>(fid)->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_setopt(sf_fid* fid, int level, int optname, const void* optval,
              size_t optlen) {
  const bool is_ep = IsClass(fid, SF_CLASS_EP);
  if ((!is_ep && !IsClass(fid, SF_CLASS_SRX_CTX)) || optval == nullptr) {
    return Fail(EINVAL, "bad argument");
  }
  if (level != SF_OPT_ENDPOINT) return Fail(ENOSYS, "unknown option level");
  core::Endpoint* ep = is_ep ? ObjectOf<Ep>(fid)->ep.get() : nullptr;
  core::RxContext* rx = is_ep ? ep->rx_context() : ObjectOf<Srx>(fid)->rx.get();
  if (optname != SF_OPT_MIN_MULTI_RECV && optname != SF_OPT_BUFFERED_MIN &&
      optname != SF_OPT_BUFFERED_LIMIT) {
    return Fail(optname == SF_OPT_CM_DATA_SIZE ? EINVAL : ENOSYS,
                optname == SF_OPT_CM_DATA_SIZE
                    ? "SF_OPT_CM_DATA_SIZE is read-only"
                    : "unknown option");
  }
  if (optlen != sizeof(size_t)) return Fail(EINVAL, "option is a size_t");
  size_t v;
  std::memcpy(&v, optval, sizeof v);
  Status s;
  if (optname == SF_OPT_MIN_MULTI_RECV) {
    s = rx->SetMinMultiRecv(v);
  } else if (optname == SF_OPT_BUFFERED_LIMIT) {
    s = ep ? ep->SetBufferedLimit(v) : rx->SetBufferedLimit(v);
  } else if (ep == nullptr) {
    return Fail(EINVAL, "SF_OPT_BUFFERED_MIN is a sender's (endpoint) option");
  } else {
    s = ep->SetBufferedMin(v);
  }
  return s.ok() ? 0 : Fail(s);
}

int sf_getopt(sf_fid* fid, int level, int optname, void* optval,
              size_t* optlen) {
  const bool is_ep = IsClass(fid, SF_CLASS_EP);
  const bool is_pep = IsClass(fid, SF_CLASS_PEP);
  if ((!is_ep && !is_pep && !IsClass(fid, SF_CLASS_SRX_CTX)) ||
      optval == nullptr || optlen == nullptr) {
    return Fail(EINVAL, "bad argument");
  }
  if (level != SF_OPT_ENDPOINT) return Fail(ENOSYS, "unknown option level");
  // A passive endpoint has one option, the private data size its
  // connections carry (fi_endpoint(3)).
  if (is_pep && optname != SF_OPT_CM_DATA_SIZE) {
    return Fail(ENOSYS, "a passive endpoint has SF_OPT_CM_DATA_SIZE only");
  }
  core::Endpoint* ep = is_ep ? ObjectOf<Ep>(fid)->ep.get() : nullptr;
  core::RxContext* rx = is_ep    ? ep->rx_context()
                        : is_pep ? nullptr
                                 : ObjectOf<Srx>(fid)->rx.get();
  size_t v;
  switch (optname) {
    case SF_OPT_MIN_MULTI_RECV:
      v = rx->min_multi_recv();
      break;
    case SF_OPT_BUFFERED_LIMIT:
      v = rx->attr().buffered_limit;
      break;
    case SF_OPT_BUFFERED_MIN:
      if (ep == nullptr) return Fail(EINVAL, "an endpoint option");
      v = ep->buffered_min();
      break;
    case SF_OPT_CM_DATA_SIZE:
      v = softfab::wire::kCmDataMax;
      break;
    default:
      return Fail(ENOSYS, "unknown option");
  }
  if (*optlen < sizeof(size_t)) {
    *optlen = sizeof(size_t);
    return Fail(SF_ETOOSMALL, "option is a size_t");
  }
  std::memcpy(optval, &v, sizeof v);
  *optlen = sizeof v;
  return 0;
}

// ---- Connections ----

int sf_passive_ep(sf_domain* pub, sf_pep** out, void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and pep must be valid");
  }
  core::EndpointAttr like;
  SetBackendTiming(d, &like);
  auto ep = core::Endpoint::CreateListener(d->device, d->pd, 4096, &like);
  if (!ep.ok()) return Fail(ep.status());
  auto* pep = NewObject<Pep>(SF_CLASS_PEP, context, &d->children);
  pep->domain = d;
  pep->ep = std::move(*ep);
  d->endpoints.push_back(pep->ep.get());
  pep->ep->set_user_handle(&pep->fid);
  *out = pep;
  return 0;
}

int sf_pep_bind(sf_pep* pub, sf_fid* bfid, uint64_t flags) {
  Pep* pep = AsPep(pub);
  if (pep == nullptr) return Fail(EINVAL, "not a passive endpoint");
  if (!IsClass(bfid, SF_CLASS_EQ)) return Fail(EINVAL, "bind an event queue");
  if (flags != 0) return Fail(EINVAL, "EQ binding takes no flags");
  Eq* eq = ObjectOf<Eq>(bfid);
  if (eq->fabric != pep->domain->fabric) {
    return Fail(EINVAL, "EQ belongs to another fabric");
  }
  if (pep->eq) return Fail(EINVAL, "an event queue is bound already");
  const Status s = pep->ep->BindEq(eq->eq.get());
  if (!s.ok()) return Fail(s);
  pep->eq = eq;
  ++eq->users;
  return 0;
}

int sf_listen(sf_pep* pub) {
  Pep* pep = AsPep(pub);
  if (pep == nullptr) return Fail(EINVAL, "not a passive endpoint");
  const Status s = pep->ep->Listen();
  return s.ok() ? 0 : Fail(s);
}

int sf_connect(sf_ep* pub, const void* addr, const void* param,
               size_t paramlen) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || addr == nullptr) {
    return Fail(EINVAL, "ep and addr must be valid");
  }
  softfab::wire::Name name;
  softfab::wire::DecodeName(static_cast<const uint8_t*>(addr), &name);
  const Status s = ep->ep->Connect(name, param, paramlen);
  SyncWaitFds(ep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_accept(sf_ep* pub, const void* param, size_t paramlen) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr) return Fail(EINVAL, "not an endpoint");
  if (ep->request == nullptr) {
    return Fail(EINVAL, "create the endpoint with the SF_CONNREQ's info");
  }
  const Status s = ep->ep->Accept(*ep->request, param, paramlen);
  SyncWaitFds(ep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_reject(sf_pep* pub, sf_info* info, const void* param, size_t paramlen) {
  Pep* pep = AsPep(pub);
  if (pep == nullptr || !ValidInfo(info)) {
    return Fail(EINVAL, "pep and info must be valid");
  }
  const Status s = pep->ep->Reject(*info->request, param, paramlen);
  SyncWaitFds(pep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_shutdown(sf_ep* pub, uint64_t flags) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || flags != 0) return Fail(EINVAL, "bad argument");
  const Status s = ep->ep->Shutdown();
  SyncWaitFds(ep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

void sf_freeinfo(sf_info* info) {
  if (!ValidInfo(info)) return;
  // A peek's info belongs to its event queue, which releases it.
  if (core::EventQueue::ReleasePeekHandle(*info->request, info)) return;
  info->magic = 0;
  delete info;
}

}  // extern "C"

}  // namespace softfab::fabric_internal
