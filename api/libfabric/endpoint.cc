// Endpoints of softfab's provider: fi_endpoint (an sf_endpoint shaped by the
// fi_info), fi_passive_ep (an sf_pep on a node of its own), binding, enable,
// options and connection management (fi_cm(3)). The data path is in
// api/libfabric/data_path.cc.
#include <netinet/in.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <cstring>

#include "api/libfabric/internal/provider_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::libfabric {
namespace {

static_assert(FI_SELECTIVE_COMPLETION == SF_SELECTIVE_COMPLETION &&
                  FI_TRANSMIT == SF_TRANSMIT && FI_RECV == SF_RECV &&
                  FI_OPT_MIN_MULTI_RECV == SF_OPT_MIN_MULTI_RECV &&
                  FI_OPT_CM_DATA_SIZE == SF_OPT_CM_DATA_SIZE &&
                  FI_OPT_BUFFERED_MIN == SF_OPT_BUFFERED_MIN &&
                  FI_OPT_BUFFERED_LIMIT == SF_OPT_BUFFERED_LIMIT &&
                  FI_OPT_ENDPOINT == SF_OPT_ENDPOINT,
              "sf_* options and bind flags are libfabric's");

Ep* Of(fid_ep* ep) { return reinterpret_cast<Ep*>(ep); }
Ep* Of(fid* f) { return reinterpret_cast<Ep*>(f); }

// The options sf_* knows; others are not a protocol option of softfab's.
bool KnownOption(int level, int optname) {
  return level == FI_OPT_ENDPOINT && optname >= FI_OPT_MIN_MULTI_RECV &&
         optname <= FI_OPT_BUFFERED_LIMIT;
}

// ---- Active endpoints ----

int CloseEp(fid* f) {
  Ep* ep = Of(f);
  int rc = sf_close(&ep->sf->fid);
  if (rc != 0) return rc;
  --ep->domain->children;
  delete ep;
  return 0;
}

int BindEp(fid* f, fid* bfid, uint64_t flags) {
  if (bfid == nullptr) return -FI_EINVAL;
  sf_fid* target = nullptr;
  switch (bfid->fclass) {
    case FI_CLASS_CQ:
      target = &reinterpret_cast<Cq*>(bfid)->sf->fid;
      break;
    case FI_CLASS_AV:
      target = &reinterpret_cast<Av*>(bfid)->sf->fid;
      break;
    case FI_CLASS_EQ:
      target = &reinterpret_cast<Eq*>(bfid)->sf->fid;
      break;
    case FI_CLASS_CNTR:
    case FI_CLASS_SRX_CTX:
    case FI_CLASS_STX_CTX:
      return -FI_ENOSYS;
    default:
      return -FI_EINVAL;
  }
  return sf_ep_bind(Of(f)->sf, target, flags);
}

int ControlEp(fid* f, int command, void* arg) {
  (void)arg;
  if (command != FI_ENABLE) return -FI_ENOSYS;
  Ep* ep = Of(f);
  int rc = sf_enable(ep->sf);
  if (rc == 0 && ep->responder == nullptr) {
    rc = StartAnswering(*ep->domain->fabric, ep->answer_at.get(), &ep->sf->fid,
                        &ep->responder);
  }
  return rc;
}

ssize_t CancelEp(fid* f, void* context) {
  return sf_cancel(&Of(f)->sf->fid, context);
}

int GetOptEp(fid* f, int level, int optname, void* optval, size_t* optlen) {
  if (!KnownOption(level, optname)) return -FI_ENOPROTOOPT;
  return sf_getopt(&Of(f)->sf->fid, level, optname, optval, optlen);
}

int SetOptEp(fid* f, int level, int optname, const void* optval,
             size_t optlen) {
  if (!KnownOption(level, optname)) return -FI_ENOPROTOOPT;
  return sf_setopt(&Of(f)->sf->fid, level, optname, optval, optlen);
}

int SetName(fid*, void*, size_t) { return -FI_ENOSYS; }
int GetName(fid* f, void* addr, size_t* addrlen) {
  if (f->fclass == FI_CLASS_PEP) {
    return sf_getname(&reinterpret_cast<Pep*>(f)->sf->fid, addr, addrlen);
  }
  return sf_getname(&Of(f)->sf->fid, addr, addrlen);
}
int GetPeer(fid_ep*, void*, size_t*) { return -FI_ENOSYS; }
int Connect(fid_ep* ep, const void* addr, const void* param, size_t len) {
  return sf_connect(Of(ep)->sf, addr, param, len);
}
int NoConnect(fid_ep*, const void*, const void*, size_t) { return -FI_ENOSYS; }
int NoListen(fid_pep*) { return -FI_ENOSYS; }
int Accept(fid_ep* ep, const void* param, size_t len) {
  return sf_accept(Of(ep)->sf, param, len);
}
int NoAccept(fid_ep*, const void*, size_t) { return -FI_ENOSYS; }
int NoReject(fid_pep*, fid_t, const void*, size_t) { return -FI_ENOSYS; }
int Shutdown(fid_ep* ep, uint64_t flags) {
  return sf_shutdown(Of(ep)->sf, flags);
}
int NoShutdown(fid_ep*, uint64_t) { return -FI_ENOSYS; }
int NoJoin(fid_ep*, const void*, uint64_t, fid_mc**, void*) {
  return -FI_ENOSYS;
}

fi_ops ep_fid_ops = {
    .size = sizeof(fi_ops),
    .close = CloseEp,
    .bind = BindEp,
    .control = ControlEp,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

fi_ops_ep ep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = CancelEp,
    .getopt = GetOptEp,
    .setopt = SetOptEp,
    .tx_ctx = NoTxCtx,
    .rx_ctx = NoRxCtx,
    .rx_size_left = NoSizeLeft,
    .tx_size_left = NoSizeLeft,
};

fi_ops_cm ep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = SetName,
    .getname = GetName,
    .getpeer = GetPeer,
    .connect = Connect,
    .listen = NoListen,
    .accept = Accept,
    .reject = NoReject,
    .shutdown = Shutdown,
    .join = NoJoin,
};

// ---- Passive endpoints ----

Pep* PepOf(fid* f) { return reinterpret_cast<Pep*>(f); }

int ClosePep(fid* f) {
  Pep* pep = PepOf(f);
  int rc = sf_close(&pep->sf->fid);
  if (rc != 0) return rc;
  sf_close(&pep->domain->fid);
  fi_freeinfo(pep->info);
  --pep->fabric->children;
  delete pep;
  return 0;
}

int BindPep(fid* f, fid* bfid, uint64_t flags) {
  if (bfid == nullptr || bfid->fclass != FI_CLASS_EQ) return -FI_EINVAL;
  return sf_pep_bind(PepOf(f)->sf, &reinterpret_cast<Eq*>(bfid)->sf->fid,
                     flags);
}

int GetOptPep(fid* f, int level, int optname, void* optval, size_t* optlen) {
  if (!KnownOption(level, optname)) return -FI_ENOPROTOOPT;
  return sf_getopt(&PepOf(f)->sf->fid, level, optname, optval, optlen);
}

int Listen(fid_pep* pf) {
  Pep* pep = reinterpret_cast<Pep*>(pf);
  int rc = sf_listen(pep->sf);
  if (rc == 0 && pep->responder == nullptr) {
    rc = StartAnswering(*pep->fabric, pep->answer_at.get(), &pep->sf->fid,
                        &pep->responder);
  }
  return rc;
}

int Reject(fid_pep* pf, fid_t handle, const void* param, size_t len) {
  if (handle == nullptr || handle->fclass != FI_CLASS_CONNREQ) {
    return -FI_EINVAL;
  }
  auto* cr = reinterpret_cast<ConnReq*>(handle);
  if (cr->sf == nullptr) return -FI_EINVAL;  // already rejected
  const int rc = sf_reject(reinterpret_cast<Pep*>(pf)->sf, cr->sf, param, len);
  if (rc == 0) {
    if (cr->owned) sf_freeinfo(cr->sf);
    cr->sf = nullptr;
  }
  return rc;
}

fi_ops pep_fid_ops = {
    .size = sizeof(fi_ops),
    .close = ClosePep,
    .bind = BindPep,
    .control = NoControl,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

fi_ops_ep pep_ops = {
    .size = sizeof(fi_ops_ep),
    .cancel = NoCancel,
    .getopt = GetOptPep,
    .setopt = NoSetOpt,
    .tx_ctx = NoTxCtx,
    .rx_ctx = NoRxCtx,
    .rx_size_left = NoSizeLeft,
    .tx_size_left = NoSizeLeft,
};

fi_ops_cm pep_cm_ops = {
    .size = sizeof(fi_ops_cm),
    .setname = SetName,
    .getname = GetName,
    .getpeer = GetPeer,
    .connect = NoConnect,
    .listen = Listen,
    .accept = NoAccept,
    .reject = Reject,
    .shutdown = NoShutdown,
    .join = NoJoin,
};

sf_ep_type TypeOf(const fi_info* info) {
  switch (info->ep_attr ? info->ep_attr->type : FI_EP_UNSPEC) {
    case FI_EP_MSG:
      return SF_EP_MSG;
    case FI_EP_DGRAM:
      return SF_EP_DGRAM;
    default:
      return SF_EP_RDM;
  }
}

}  // namespace

std::unique_ptr<IpAddress> AnswerAddressOf(const fi_info* info) {
  if (info->src_addr == nullptr || info->src_addrlen == SF_NAME_BYTES ||
      info->src_addrlen > sizeof(sockaddr_storage)) {
    return nullptr;
  }
  const auto family = static_cast<const sockaddr*>(info->src_addr)->sa_family;
  if (family != AF_INET && family != AF_INET6) return nullptr;
  auto at = std::make_unique<IpAddress>();
  memcpy(&at->addr, info->src_addr, info->src_addrlen);
  at->len = static_cast<socklen_t>(info->src_addrlen);
  return at;
}

int StartAnswering(const Fabric& fabric, const IpAddress* at, sf_fid* f,
                   std::unique_ptr<Answerer>* responder) {
  // On the simulator in one process nobody can ask (fi_getinfo finds no
  // address there): nothing to answer.
  if (at == nullptr || (fabric.choice.sim && !SharedSimAddressing())) return 0;
  Name name{};
  size_t len = name.size();
  int rc = sf_getname(f, name.data(), &len);
  if (rc != 0) return rc;
  std::string why;
  rc = fabric.choice.sim ? StartSharedAnswerer(*at, name, responder, &why)
                         : NameResponder::Start(*at, name, responder, &why);
  if (rc != 0) FI_WARN(&provider, FI_LOG_EP_CTRL, "%s\n", why.c_str());
  return rc;
}

int OpenEndpoint(fid_domain* df, fi_info* info, fid_ep** out, void* context) {
  if (df == nullptr || info == nullptr || out == nullptr) return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_UNSPEC &&
      info->ep_attr->type != FI_EP_MSG && info->ep_attr->type != FI_EP_RDM &&
      info->ep_attr->type != FI_EP_DGRAM) {
    return -FI_EINVAL;
  }
  auto* d = reinterpret_cast<Domain*>(df);
  sf_ep_attr a{};
  a.type = TypeOf(info);
  a.caps = info->caps & (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV);
  if (a.type == SF_EP_RDM) a.caps |= info->caps & FI_DIRECTED_RECV;
  // Buffered receives (fi_msg(3)), when the fi_info asks for them.
  if (a.type != SF_EP_DGRAM) {
    a.caps |= info->caps & FI_VARIABLE_MSG;
    a.mode = info->mode & FI_BUFFERED_RECV;
  }
  if (info->tx_attr) {
    a.op_flags =
        info->tx_attr->op_flags & (FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE |
                                   FI_DELIVERY_COMPLETE | FI_COMPLETION);
    a.tx_size = info->tx_attr->size;
  }
  if (info->rx_attr) a.rx_size = info->rx_attr->size;
  if (info->handle != nullptr) {
    if (info->handle->fclass != FI_CLASS_CONNREQ) return -FI_EINVAL;
    a.info = reinterpret_cast<ConnReq*>(info->handle)->sf;
    if (a.info == nullptr) return -FI_EINVAL;  // rejected already
  }
  auto* ep = new Ep;
  // A buffered message's fi_recv_context names the application's endpoint.
  a.recv_context_ep = &ep->fid;
  const int rc = sf_endpoint(d->sf, &a, &ep->sf, ep);
  if (rc != 0) {
    delete ep;
    return rc;
  }
  InitFid(&ep->fid.fid, FI_CLASS_EP, context, &ep_fid_ops);
  ep->fid.ops = &ep_ops;
  ep->fid.cm = &ep_cm_ops;
  // An endpoint accepting a connection request does not answer at the
  // listener's address (which its fi_info, the request's, still carries).
  if (info->handle == nullptr) ep->answer_at = AnswerAddressOf(info);
  ep->tx_flags = a.op_flags;
  ep->rx_flags = info->rx_attr ? info->rx_attr->op_flags & FI_COMPLETION : 0;
  const bool default_flags = (ep->tx_flags | ep->rx_flags) & FI_COMPLETION;
  ep->fid.msg = default_flags ? &msg_ops_default_flags : &msg_ops;
  ep->fid.rma = &unsupported_rma;
  ep->fid.tagged = default_flags ? &tagged_ops_default_flags : &tagged_ops;
  ep->fid.atomic = &unsupported_atomic;
  ep->fid.collective = &unsupported_collective;
  ep->domain = d;
  ++d->children;
  *out = &ep->fid;
  return 0;
}

int OpenPassiveEp(fid_fabric* ff, fi_info* info, fid_pep** out, void* context) {
  if (ff == nullptr || info == nullptr || out == nullptr) return -FI_EINVAL;
  if (info->ep_attr && info->ep_attr->type != FI_EP_MSG) return -FI_EINVAL;
  auto* fab = reinterpret_cast<Fabric*>(ff);
  int node = 0;
  int rc = NodeFor(fab, info, &node);
  if (rc != 0) return rc;
  auto* pep = new Pep;
  pep->node = node;
  rc = sf_domain_open(fab->sf, pep->node, &pep->domain, nullptr);
  if (rc == 0) {
    rc = sf_passive_ep(pep->domain, &pep->sf, pep);
    if (rc != 0) sf_close(&pep->domain->fid);
  }
  if (rc == 0) {
    pep->info = fi_dupinfo(info);
    if (pep->info == nullptr) {
      sf_close(&pep->sf->fid);
      sf_close(&pep->domain->fid);
      rc = -FI_ENOMEM;
    }
  }
  if (rc != 0) {
    delete pep;
    return rc;
  }
  pep->answer_at = AnswerAddressOf(info);
  // A connection request's fi_info is this one with the request's handle.
  pep->info->handle = nullptr;
  InitFid(&pep->fid.fid, FI_CLASS_PEP, context, &pep_fid_ops);
  pep->fid.ops = &pep_ops;
  pep->fid.cm = &pep_cm_ops;
  pep->fabric = fab;
  ++fab->children;
  *out = &pep->fid;
  return 0;
}

}  // namespace softfab::libfabric
