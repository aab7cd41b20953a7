// The sf_*-over-fi_* shim's control path: fabric (fi_getinfo + fi_fabric on
// softfab's provider, the simulator's settings as FI_SOFTFAB_* parameters),
// domains (node N as domain "sim:N"), registrations, address vectors,
// completion and event queues, endpoints, passive endpoints and connection
// management, each an sf_* call made of fi_* calls. Where sf_* promises a
// check that libfabric leaves to fi_getinfo (capability and mode bits,
// registration arguments), the shim makes it, as a libfabric program's
// fi_getinfo would have refused the request.
#include "tests/libfabric/sf_over_fi/internal/shim_objects.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace softfab::sf_over_fi {

fid* FiFid(sf_fid* f) {
  if (f == nullptr || f->magic != kMagic) return nullptr;
  switch (f->fclass) {
    case SF_CLASS_CQ:
      return &static_cast<Cq*>(reinterpret_cast<sf_cq*>(f))->fi->fid;
    case SF_CLASS_AV:
      return &static_cast<Av*>(reinterpret_cast<sf_av*>(f))->fi->fid;
    case SF_CLASS_EQ:
      return &static_cast<Eq*>(reinterpret_cast<sf_eq*>(f))->fi->fid;
    case SF_CLASS_EP:
      return &static_cast<Ep*>(reinterpret_cast<sf_ep*>(f))->fi->fid;
    case SF_CLASS_PEP:
      return &static_cast<Pep*>(reinterpret_cast<sf_pep*>(f))->fi->fid;
    default:
      return nullptr;
  }
}

namespace {

// fi_getinfo for one endpoint type of the fabric named `name` (nullptr: the
// first verbs device softfab offers).
fi_info* InfoFor(const char* name, fi_ep_type type) {
  fi_info* h = fi_allocinfo();
  h->fabric_attr->prov_name = strdup("softfab");
  if (name != nullptr) h->fabric_attr->name = strdup(name);
  h->ep_attr->type = type;
  h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
  h->domain_attr->mr_mode = FI_MR_LOCAL;
  fi_info* info = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info);
  fi_freeinfo(h);
  if (rc != 0) return nullptr;
  // Without a name: the first fabric that is not the simulator.
  fi_info* pick = info;
  while (name == nullptr && pick && !strcmp(pick->fabric_attr->name, "sim")) {
    pick = pick->next;
  }
  fi_info* one = pick ? fi_dupinfo(pick) : nullptr;
  fi_freeinfo(info);
  return one;
}

void SetEnv(const char* name, double value, bool integer) {
  char text[64];
  if (integer) {
    snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(value));
  } else {
    snprintf(text, sizeof text, "%.17g", value);
  }
  setenv(name, text, 1);
}

// The fi_info an sf_* object of `fabric` is opened with, for node `node`.
fi_info* InfoOn(Fabric* f, int type, int node) {
  fi_info* info = fi_dupinfo(f->info[type]);
  if (info == nullptr) return nullptr;
  if (f->sim) {
    free(info->domain_attr->name);
    info->domain_attr->name = strdup(("sim:" + std::to_string(node)).c_str());
  }
  return info;
}

}  // namespace

extern "C" {

const char* sf_strerror(int errnum) { return fi_strerror(errnum); }
const char* sf_last_error(void) { return last_error.c_str(); }

int sf_fabric_open(const sf_fabric_attr* attr, sf_fabric** out, void* context) {
  if (attr == nullptr || out == nullptr) return Fail(FI_EINVAL, "arguments");
  const bool sim = Raw(attr->backend) == SF_BACKEND_SIM;
  if (!sim && Raw(attr->backend) != SF_BACKEND_VERBS) {
    return Fail(FI_EINVAL, "backend");
  }
  const char* name = "sim";
  if (sim) {
    if (attr->sim_nodes <= 0 || attr->sim_nodes > 4096) {
      return Fail(FI_EINVAL, "sim_nodes");
    }
    SetEnv("FI_SOFTFAB_SIM_NODES", attr->sim_nodes, true);
    SetEnv("FI_SOFTFAB_SIM_SEED", static_cast<double>(attr->sim_seed), true);
    SetEnv("FI_SOFTFAB_SIM_LATENCY_NS",
           static_cast<double>(attr->sim_latency_ns), true);
    SetEnv("FI_SOFTFAB_SIM_BANDWIDTH_BPS",
           static_cast<double>(attr->sim_bandwidth_bps), true);
    SetEnv("FI_SOFTFAB_SIM_DROP", attr->sim_drop, false);
    SetEnv("FI_SOFTFAB_SIM_DUPLICATE", attr->sim_duplicate, false);
    SetEnv("FI_SOFTFAB_SIM_REORDER", attr->sim_reorder, false);
  } else {
    name = attr->verbs_device ? attr->verbs_device
                              : getenv("SOFTFAB_VERBS_DEVICE");
    if (name != nullptr && *name == '\0') name = nullptr;
  }
  auto* f = New<Fabric>(SF_CLASS_FABRIC, context);
  f->sim = sim;
  f->info[SF_EP_RDM] = InfoFor(name, FI_EP_RDM);
  if (f->info[SF_EP_RDM] == nullptr) {
    Delete(f);
    return Fail(FI_ENODEV, sim ? "no simulator" : "no verbs device");
  }
  f->name = f->info[SF_EP_RDM]->fabric_attr->name;
  f->info[SF_EP_MSG] = InfoFor(f->name.c_str(), FI_EP_MSG);
  f->info[SF_EP_DGRAM] = InfoFor(f->name.c_str(), FI_EP_DGRAM);
  int rc = fi_fabric(f->info[SF_EP_RDM]->fabric_attr, &f->fi, f);
  if (rc != 0) {
    for (fi_info* i : f->info) fi_freeinfo(i);
    Delete(f);
    return Fail(rc, "fi_fabric");
  }
  *out = f;
  return 0;
}

int sf_domain_open(sf_fabric* pub, int node, sf_domain** out, void* context) {
  Fabric* f = As<Fabric>(pub, SF_CLASS_FABRIC);
  if (f == nullptr || out == nullptr) return Fail(FI_EINVAL, "arguments");
  // sf_* numbers a verbs domain in [0, 64) (the number only labels it); on
  // the simulator the provider checks the node of "sim:N".
  if (!f->sim && (node < 0 || node >= 64)) return Fail(FI_EINVAL, "node");
  fi_info* info = InfoOn(f, SF_EP_RDM, node);
  auto* d = New<Domain>(SF_CLASS_DOMAIN, context);
  int rc = fi_domain(f->fi, info, &d->fi, d);
  fi_freeinfo(info);
  if (rc != 0) {
    Delete(d);
    return Fail(rc, "fi_domain");
  }
  d->fabric = f;
  d->node = node;
  *out = d;
  return 0;
}

int sf_sim_digest(sf_fabric*, uint64_t*) {
  return Fail(FI_ENOSYS, "the simulator's digest is not a libfabric call");
}
int sf_sim_now(sf_fabric*, uint64_t*) {
  return Fail(FI_ENOSYS, "the simulator's clock is not a libfabric call");
}

int sf_mr_reg(sf_domain* pub, const void* buf, size_t len, uint64_t access,
              uint64_t offset, uint64_t requested_key, uint64_t flags,
              sf_mr** out, void* context) {
  Domain* d = As<Domain>(pub, SF_CLASS_DOMAIN);
  if (d == nullptr || out == nullptr || buf == nullptr || len == 0 ||
      offset != 0 || requested_key != 0 || flags != 0) {
    return Fail(FI_EINVAL, "arguments");
  }
  constexpr uint64_t kAccess =
      FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  if (access & ~kAccess) return Fail(FI_EINVAL, "access");
  auto* m = New<Mr>(SF_CLASS_MR, context);
  int rc = fi_mr_reg(d->fi, buf, len, access, 0, 0, 0, &m->fi, m);
  if (rc != 0) {
    Delete(m);
    return Fail(rc, "fi_mr_reg");
  }
  *out = m;
  return 0;
}

void* sf_mr_desc(sf_mr* pub) {
  Mr* m = As<Mr>(pub, SF_CLASS_MR);
  return m ? fi_mr_desc(m->fi) : nullptr;
}

int sf_av_open(sf_domain* pub, const sf_av_attr* attr, sf_av** out,
               void* context) {
  Domain* d = As<Domain>(pub, SF_CLASS_DOMAIN);
  if (d == nullptr || out == nullptr) return Fail(FI_EINVAL, "arguments");
  fi_av_attr a{};
  a.type = FI_AV_TABLE;
  if (attr != nullptr) {
    if (attr->flags != 0) return Fail(FI_EINVAL, "flags");
    a.count = attr->count;
  }
  auto* av = New<Av>(SF_CLASS_AV, context);
  int rc = fi_av_open(d->fi, &a, &av->fi, av);
  if (rc != 0) {
    Delete(av);
    return Fail(rc, "fi_av_open");
  }
  *out = av;
  return 0;
}

int sf_av_insert(sf_av* pub, const void* addr, size_t count, sf_addr_t* fi_addr,
                 uint64_t flags, void* context) {
  Av* av = As<Av>(pub, SF_CLASS_AV);
  if (av == nullptr) return Fail(FI_EINVAL, "not an address vector");
  if ((addr == nullptr && count > 0) || flags != 0) {
    return Fail(FI_EINVAL, "arguments");
  }
  return fi_av_insert(av->fi, addr, count, fi_addr, flags, context);
}

int sf_av_remove(sf_av* pub, sf_addr_t* fi_addr, size_t count, uint64_t flags) {
  Av* av = As<Av>(pub, SF_CLASS_AV);
  if (av == nullptr) return Fail(FI_EINVAL, "not an address vector");
  return fi_av_remove(av->fi, fi_addr, count, flags);
}

int sf_av_lookup(sf_av* pub, sf_addr_t fi_addr, void* addr, size_t* addrlen) {
  Av* av = As<Av>(pub, SF_CLASS_AV);
  if (av == nullptr || addrlen == nullptr) return Fail(FI_EINVAL, "arguments");
  return fi_av_lookup(av->fi, fi_addr, addr, addrlen);
}

int sf_cq_open(sf_domain* pub, const sf_cq_attr* attr, sf_cq** out,
               void* context) {
  Domain* d = As<Domain>(pub, SF_CLASS_DOMAIN);
  if (d == nullptr || out == nullptr) return Fail(FI_EINVAL, "arguments");
  fi_cq_attr a{};
  a.format = FI_CQ_FORMAT_CONTEXT;
  if (attr != nullptr) {
    if (attr->flags != 0) return Fail(FI_EINVAL, "flags");
    a.size = attr->size;
    a.format = static_cast<fi_cq_format>(Raw(attr->format));
    a.wait_obj = static_cast<fi_wait_obj>(Raw(attr->wait_obj));
  }
  auto* cq = New<Cq>(SF_CLASS_CQ, context);
  cq->format = a.format;
  int rc = fi_cq_open(d->fi, &a, &cq->fi, cq);
  if (rc != 0) {
    Delete(cq);
    return Fail(rc, "fi_cq_open");
  }
  *out = cq;
  return 0;
}

int sf_eq_open(sf_fabric* pub, const sf_eq_attr* attr, sf_eq** out,
               void* context) {
  Fabric* f = As<Fabric>(pub, SF_CLASS_FABRIC);
  if (f == nullptr || out == nullptr) return Fail(FI_EINVAL, "arguments");
  fi_eq_attr a{};
  if (attr != nullptr) {
    if (attr->flags != 0) return Fail(FI_EINVAL, "flags");
    a.size = attr->size;
  }
  auto* eq = New<Eq>(SF_CLASS_EQ, context);
  int rc = fi_eq_open(f->fi, &a, &eq->fi, eq);
  if (rc != 0) {
    Delete(eq);
    return Fail(rc, "fi_eq_open");
  }
  *out = eq;
  return 0;
}

int sf_endpoint(sf_domain* pub, const sf_ep_attr* attr, sf_ep** out,
                void* context) {
  Domain* d = As<Domain>(pub, SF_CLASS_DOMAIN);
  if (d == nullptr || attr == nullptr || out == nullptr) {
    return Fail(FI_EINVAL, "arguments");
  }
  const int type = Raw(attr->type);
  if (type != SF_EP_MSG && type != SF_EP_RDM && type != SF_EP_DGRAM) {
    return Fail(FI_EINVAL, "endpoint type");
  }
  if (attr->caps & ~(SF_MSG | SF_TAGGED | SF_DIRECTED_RECV | SF_SEND | SF_RECV |
                     SF_VARIABLE_MSG)) {
    return Fail(FI_EINVAL, "capability bits");
  }
  if (attr->mode & ~SF_BUFFERED_RECV) return Fail(FI_EINVAL, "mode bits");
  if (attr->info != nullptr && type != SF_EP_MSG) {
    return Fail(FI_EINVAL, "info is for SF_EP_MSG");
  }
  if (d->fabric->info[type] == nullptr) {
    return Fail(FI_ENODATA, "endpoint type");
  }
  fi_info* info = InfoOn(d->fabric, type, d->node);
  info->caps = (attr->caps & (SF_MSG | SF_TAGGED))
                   ? attr->caps
                   : attr->caps | FI_MSG | FI_TAGGED;
  info->mode |= attr->mode;
  info->tx_attr->op_flags = attr->op_flags;
  info->tx_attr->size = attr->tx_size;
  info->rx_attr->size = attr->rx_size;
  if (attr->info != nullptr) info->handle = attr->info->fi->handle;
  if (attr->caps & SF_VARIABLE_MSG) {
    // The provider's fi_info for FI_VARIABLE_MSG says how large a message
    // may then be.
    fi_info* hints = fi_dupinfo(info);
    free(hints->domain_attr->name);
    hints->domain_attr->name = nullptr;
    hints->handle = nullptr;
    fi_info* answer = nullptr;
    if (fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &answer) ==
        0) {
      info->ep_attr->max_msg_size = answer->ep_attr->max_msg_size;
      fi_freeinfo(answer);
    }
    fi_freeinfo(hints);
  }
  auto* ep = New<Ep>(SF_CLASS_EP, context);
  int rc = fi_endpoint(d->fi, info, &ep->fi, ep);
  info->handle = nullptr;
  if (rc != 0) {
    fi_freeinfo(info);
    Delete(ep);
    return Fail(rc, "fi_endpoint");
  }
  ep->attr = *attr;
  ep->attr.info = nullptr;
  ep->info = info;
  *out = ep;
  return 0;
}

// What sf_* reports of an endpoint, from the fi_info it was opened with.
int sf_ep_query(sf_ep* pub, sf_ep_attr* attr) {
  Ep* ep = As<Ep>(pub, SF_CLASS_EP);
  if (ep == nullptr || attr == nullptr) return Fail(FI_EINVAL, "arguments");
  const uint64_t primary = ep->attr.caps & (SF_MSG | SF_TAGGED);
  *attr = ep->attr;
  attr->caps = (primary ? primary : SF_MSG | SF_TAGGED) | SF_SEND | SF_RECV |
               (ep->attr.caps & (SF_DIRECTED_RECV | SF_VARIABLE_MSG));
  attr->tx_size = ep->info->tx_attr->size ? ep->info->tx_attr->size : 256;
  attr->rx_size = ep->info->rx_attr->size ? ep->info->rx_attr->size : 256;
  // libfabric counts a datagram's sizes without its FI_MSG_PREFIX; sf_*
  // counts the buffer, prefix included.
  const size_t prefix = ep->info->ep_attr->msg_prefix_size;
  attr->max_msg_size = ep->info->ep_attr->max_msg_size + prefix;
  attr->inject_size = ep->info->tx_attr->inject_size + prefix;
  attr->msg_prefix_size = prefix;
  return 0;
}

int sf_ep_bind(sf_ep* pub, sf_fid* bfid, uint64_t flags) {
  Ep* ep = As<Ep>(pub, SF_CLASS_EP);
  if (ep == nullptr) return Fail(FI_EINVAL, "not an endpoint");
  if (IsClass(bfid, SF_CLASS_SRX_CTX)) {
    return Fail(FI_ENOSYS, "shared receive contexts");
  }
  fid* target = FiFid(bfid);
  if (target == nullptr) return Fail(FI_EINVAL, "bind target");
  const int rc = fi_ep_bind(ep->fi, target, flags);
  if (rc == 0 && IsClass(bfid, SF_CLASS_CQ) && (flags & FI_RECV) &&
      ((ep->attr.mode & SF_BUFFERED_RECV) ||
       (ep->attr.caps & SF_VARIABLE_MSG))) {
    static_cast<Cq*>(reinterpret_cast<sf_cq*>(bfid))->buffered.push_back(ep);
  }
  return rc;
}

int sf_srx_context(sf_domain*, const sf_rx_attr*, sf_ep**, void*) {
  return Fail(FI_ENOSYS, "fi_srx_context");
}

int sf_enable(sf_ep* pub) {
  Ep* ep = As<Ep>(pub, SF_CLASS_EP);
  if (ep == nullptr) return Fail(FI_EINVAL, "not an endpoint");
  return fi_enable(ep->fi);
}

int sf_getname(sf_fid* f, void* addr, size_t* addrlen) {
  if ((!IsClass(f, SF_CLASS_EP) && !IsClass(f, SF_CLASS_PEP)) ||
      addrlen == nullptr) {
    return Fail(FI_EINVAL, "arguments");
  }
  return fi_getname(FiFid(f), addr, addrlen);
}

ssize_t sf_cancel(sf_fid* f, void* context) {
  if (!IsClass(f, SF_CLASS_EP)) return Fail(FI_EINVAL, "not an endpoint");
  return fi_cancel(FiFid(f), context);
}

int sf_setopt(sf_fid* f, int level, int optname, const void* optval,
              size_t optlen) {
  if (!IsClass(f, SF_CLASS_EP)) return Fail(FI_EINVAL, "not an endpoint");
  return fi_setopt(FiFid(f), level, optname, optval, optlen);
}

int sf_getopt(sf_fid* f, int level, int optname, void* optval, size_t* optlen) {
  if (!IsClass(f, SF_CLASS_EP) && !IsClass(f, SF_CLASS_PEP)) {
    return Fail(FI_EINVAL, "not an endpoint");
  }
  return fi_getopt(FiFid(f), level, optname, optval, optlen);
}

int sf_control(sf_fid* f, int command, void* arg) {
  if (!IsClass(f, SF_CLASS_CQ)) {
    return Fail(FI_EINVAL, "wait objects belong to completion queues");
  }
  return fi_control(FiFid(f), command, arg);
}

int sf_trywait(sf_fabric* pub, sf_fid** fids, int count) {
  Fabric* f = As<Fabric>(pub, SF_CLASS_FABRIC);
  if (f == nullptr || count < 0 || (count > 0 && fids == nullptr)) {
    return Fail(FI_EINVAL, "arguments");
  }
  std::vector<fid*> fi(count);
  for (int i = 0; i < count; ++i) {
    if (!IsClass(fids[i], SF_CLASS_CQ)) return Fail(FI_EINVAL, "not a CQ");
    fi[i] = FiFid(fids[i]);
  }
  return fi_trywait(f->fi, fi.data(), count);
}

int sf_close(sf_fid* f) {
  if (f == nullptr || f->magic != kMagic) return Fail(FI_EINVAL, "not open");
  int rc = 0;
  switch (f->fclass) {
    case SF_CLASS_FABRIC: {
      auto* fab = static_cast<Fabric*>(reinterpret_cast<sf_fabric*>(f));
      rc = fi_close(&fab->fi->fid);
      if (rc == 0) {
        for (fi_info* i : fab->info) fi_freeinfo(i);
        Delete(fab);
      }
      break;
    }
    case SF_CLASS_DOMAIN: {
      auto* d = static_cast<Domain*>(reinterpret_cast<sf_domain*>(f));
      rc = fi_close(&d->fi->fid);
      if (rc == 0) Delete(d);
      break;
    }
    case SF_CLASS_MR: {
      auto* m = static_cast<Mr*>(reinterpret_cast<sf_mr*>(f));
      rc = fi_close(&m->fi->fid);
      if (rc == 0) Delete(m);
      break;
    }
    case SF_CLASS_EP: {
      auto* ep = static_cast<Ep*>(reinterpret_cast<sf_ep*>(f));
      rc = fi_close(&ep->fi->fid);
      if (rc == 0) {
        fi_freeinfo(ep->info);
        Delete(ep);
      }
      break;
    }
    default: {
      fid* fi = FiFid(f);
      if (fi == nullptr) return Fail(FI_EINVAL, "not open");
      rc = fi_close(fi);
      if (rc != 0) break;
      const uint32_t fclass = f->fclass;
      f->magic = 0;
      if (fclass == SF_CLASS_CQ) delete reinterpret_cast<Cq*>(f);
      if (fclass == SF_CLASS_AV) delete reinterpret_cast<Av*>(f);
      if (fclass == SF_CLASS_EQ) {
        auto* eq = reinterpret_cast<Eq*>(f);
        for (sf_info* info : eq->peeked) {
          fi_freeinfo(info->fi);
          delete info;
        }
        delete eq;
      }
      if (fclass == SF_CLASS_PEP) delete reinterpret_cast<Pep*>(f);
    }
  }
  return rc == 0 ? 0 : Fail(rc, "fi_close");
}

// ---- Connections and event queues ----

int sf_passive_ep(sf_domain* pub, sf_pep** out, void* context) {
  Domain* d = As<Domain>(pub, SF_CLASS_DOMAIN);
  if (d == nullptr || out == nullptr) return Fail(FI_EINVAL, "arguments");
  fi_info* info = InfoOn(d->fabric, SF_EP_MSG, d->node);
  auto* pep = New<Pep>(SF_CLASS_PEP, context);
  int rc = fi_passive_ep(d->fabric->fi, info, &pep->fi, pep);
  fi_freeinfo(info);
  if (rc != 0) {
    Delete(pep);
    return Fail(rc, "fi_passive_ep");
  }
  *out = pep;
  return 0;
}

int sf_pep_bind(sf_pep* pub, sf_fid* bfid, uint64_t flags) {
  Pep* pep = As<Pep>(pub, SF_CLASS_PEP);
  if (pep == nullptr || !IsClass(bfid, SF_CLASS_EQ)) {
    return Fail(FI_EINVAL, "arguments");
  }
  return fi_pep_bind(pep->fi, FiFid(bfid), flags);
}

int sf_listen(sf_pep* pub) {
  Pep* pep = As<Pep>(pub, SF_CLASS_PEP);
  return pep ? fi_listen(pep->fi) : Fail(FI_EINVAL, "not a listener");
}

int sf_connect(sf_ep* pub, const void* addr, const void* param,
               size_t paramlen) {
  Ep* ep = As<Ep>(pub, SF_CLASS_EP);
  return ep ? fi_connect(ep->fi, addr, param, paramlen)
            : Fail(FI_EINVAL, "not an endpoint");
}

int sf_accept(sf_ep* pub, const void* param, size_t paramlen) {
  Ep* ep = As<Ep>(pub, SF_CLASS_EP);
  return ep ? fi_accept(ep->fi, param, paramlen)
            : Fail(FI_EINVAL, "not an endpoint");
}

int sf_reject(sf_pep* pub, sf_info* info, const void* param, size_t paramlen) {
  Pep* pep = As<Pep>(pub, SF_CLASS_PEP);
  if (pep == nullptr || info == nullptr) return Fail(FI_EINVAL, "arguments");
  return fi_reject(pep->fi, info->fi->handle, param, paramlen);
}

int sf_shutdown(sf_ep* pub, uint64_t flags) {
  Ep* ep = As<Ep>(pub, SF_CLASS_EP);
  return ep ? fi_shutdown(ep->fi, flags) : Fail(FI_EINVAL, "not an endpoint");
}

void sf_freeinfo(sf_info* info) {
  if (info == nullptr) return;
  if (info->owner != nullptr) {
    auto& peeked = info->owner->peeked;
    peeked.erase(std::find(peeked.begin(), peeked.end(), info));
  }
  fi_freeinfo(info->fi);
  delete info;
}

}  // extern "C"

}  // namespace softfab::sf_over_fi
