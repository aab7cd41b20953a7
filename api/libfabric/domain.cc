// fi_domain, fi_mr_reg and fi_av_open for softfab's provider. A domain is
// one sf_domain: on the simulator the next node of the fabric (domains and
// passive endpoints take nodes 0, 1, ... in the order they are opened), or,
// when opened from an FI_CONNREQ's fi_info, the node of the listener that
// got the request; on verbs a context of its own on the fabric's device.
#include <rdma/fi_errno.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/libfabric/internal/provider_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::libfabric {
namespace {

constexpr size_t kAvNamesMax = size_t{1} << 24;

// ---- Memory registration ----

int CloseMr(fid* f) {
  auto* mr = reinterpret_cast<Mr*>(f);
  int rc = sf_close(&mr->sf->fid);
  if (rc != 0) return rc;
  --mr->domain->children;
  delete mr;
  return 0;
}

fi_ops mr_fid_ops = {
    .size = sizeof(fi_ops),
    .close = CloseMr,
    .bind = NoBind,
    .control = NoControl,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

// Keys only name a registration to its owner: softfab has no RMA, so they
// are never sent. Counted per domain from 1.
int RegMr(fid* f, const void* buf, size_t len, uint64_t access, uint64_t offset,
          uint64_t requested_key, uint64_t flags, fid_mr** out, void* context) {
  (void)requested_key;  // FI_MR_PROV_KEY or not: softfab picks the key
  if (f == nullptr || f->fclass != FI_CLASS_DOMAIN || out == nullptr) {
    return -FI_EINVAL;
  }
  if (flags != 0) return -FI_EBADFLAGS;
  if (offset != 0) return -FI_EINVAL;
  auto* d = reinterpret_cast<Domain*>(f);
  constexpr uint64_t kAccess =
      FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  auto* mr = new Mr;
  const int rc =
      sf_mr_reg(d->sf, buf, len, access & kAccess, 0, 0, 0, &mr->sf, mr);
  if (rc != 0) {
    delete mr;
    return rc;
  }
  InitFid(&mr->fid.fid, FI_CLASS_MR, context, &mr_fid_ops);
  mr->fid.mem_desc = sf_mr_desc(mr->sf);
  mr->fid.key = ++d->next_key;
  ++d->children;
  mr->domain = d;
  *out = &mr->fid;
  return 0;
}

int RegMrV(fid* f, const iovec* iov, size_t count, uint64_t access,
           uint64_t offset, uint64_t requested_key, uint64_t flags,
           fid_mr** out, void* context) {
  if (count != 1 || iov == nullptr) return -FI_ENOSYS;
  return RegMr(f, iov->iov_base, iov->iov_len, access, offset, requested_key,
               flags, out, context);
}

int RegMrAttr(fid* f, const fi_mr_attr* attr, uint64_t flags, fid_mr** out) {
  if (attr == nullptr) return -FI_EINVAL;
  if (attr->iface != FI_HMEM_SYSTEM) return -FI_ENOSYS;
  return RegMrV(f, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
                attr->requested_key, flags, out, attr->context);
}

fi_ops_mr mr_ops = {
    .size = sizeof(fi_ops_mr),
    .reg = RegMr,
    .regv = RegMrV,
    .regattr = RegMrAttr,
};

// ---- Address vectors ----

int CloseAv(fid* f) {
  auto* av = reinterpret_cast<Av*>(f);
  int rc = sf_close(&av->sf->fid);
  if (rc != 0) return rc;
  --av->domain->children;
  delete av;
  return 0;
}

fi_ops av_fid_ops = {
    .size = sizeof(fi_ops),
    .close = CloseAv,
    .bind = NoBind,
    .control = NoControl,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

int AvInsert(fid_av* f, const void* addr, size_t count, fi_addr_t* fi_addr,
             uint64_t flags, void* context) {
  // FI_MORE only says more inserts follow; softfab inserts at once.
  if (flags & ~FI_MORE) return -FI_EBADFLAGS;
  return sf_av_insert(reinterpret_cast<Av*>(f)->sf, addr, count, fi_addr, 0,
                      context);
}

int AvInsertSvc(fid_av*, const char*, const char*, fi_addr_t*, uint64_t,
                void*) {
  return -FI_ENOSYS;
}

int AvInsertSym(fid_av*, const char*, size_t, const char*, size_t, fi_addr_t*,
                uint64_t, void*) {
  return -FI_ENOSYS;
}

int AvRemove(fid_av* f, fi_addr_t* fi_addr, size_t count, uint64_t flags) {
  return sf_av_remove(reinterpret_cast<Av*>(f)->sf, fi_addr, count, flags);
}

int AvLookup(fid_av* f, fi_addr_t fi_addr, void* addr, size_t* addrlen) {
  return sf_av_lookup(reinterpret_cast<Av*>(f)->sf, fi_addr, addr, addrlen);
}

// "softfab:" and the name's bytes in hex; cut to *len (with its NUL) and
// *len set to what the whole string needs, as fi_av_straddr(3) says.
const char* AvStraddr(fid_av*, const void* addr, char* buf, size_t* len) {
  char text[8 + 2 * SF_NAME_BYTES + 1];
  int n = snprintf(text, sizeof text, "softfab:");
  const auto* bytes = static_cast<const unsigned char*>(addr);
  for (int i = 0; i < SF_NAME_BYTES; ++i) {
    n += snprintf(text + n, sizeof text - n, "%02x", bytes[i]);
  }
  if (buf != nullptr && *len > 0) snprintf(buf, *len, "%s", text);
  *len = static_cast<size_t>(n) + 1;
  return buf;
}

int AvSet(fid_av*, fi_av_set_attr*, fid_av_set**, void*) { return -FI_ENOSYS; }

fi_ops_av av_ops = {
    .size = sizeof(fi_ops_av),
    .insert = AvInsert,
    .insertsvc = AvInsertSvc,
    .insertsym = AvInsertSym,
    .remove = AvRemove,
    .lookup = AvLookup,
    .straddr = AvStraddr,
    .av_set = AvSet,
};

int OpenAv(fid_domain* df, fi_av_attr* attr, fid_av** out, void* context) {
  if (attr == nullptr || out == nullptr) return -FI_EINVAL;
  if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP &&
      attr->type != FI_AV_TABLE) {
    return -FI_EINVAL;
  }
  // Shared (named) vectors, receive contexts and asynchronous inserts.
  if (attr->name != nullptr || attr->rx_ctx_bits != 0) return -FI_ENOSYS;
  if (attr->flags != 0) return -FI_ENOSYS;
  auto* d = reinterpret_cast<Domain*>(df);
  // fi_av(3): count is how many addresses the application expects, not a
  // limit (Open MPI passes its local ranks and inserts every rank). An
  // sf_av's count is its limit: give it room for as many endpoints as
  // QP numbers can name.
  sf_av_attr a{};
  a.count = std::max<size_t>(attr->count, kAvNamesMax);
  auto* av = new Av;
  const int rc = sf_av_open(d->sf, &a, &av->sf, av);
  if (rc != 0) {
    delete av;
    return rc;
  }
  InitFid(&av->fid.fid, FI_CLASS_AV, context, &av_fid_ops);
  av->fid.ops = &av_ops;
  av->domain = d;
  ++d->children;
  *out = &av->fid;
  return 0;
}

// ---- The domain ----

int CloseDomain(fid* f) {
  auto* d = reinterpret_cast<Domain*>(f);
  int rc = sf_close(&d->sf->fid);
  if (rc != 0) return rc;
  --d->fabric->children;
  delete d;
  return 0;
}

int NoScalableEp(fid_domain*, fi_info*, fid_ep**, void*) { return -FI_ENOSYS; }
int NoCntr(fid_domain*, fi_cntr_attr*, fid_cntr**, void*) { return -FI_ENOSYS; }
int NoPoll(fid_domain*, fi_poll_attr*, fid_poll**) { return -FI_ENOSYS; }
int NoStx(fid_domain*, fi_tx_attr*, fid_stx**, void*) { return -FI_ENOSYS; }
int NoSrx(fid_domain*, fi_rx_attr*, fid_ep**, void*) { return -FI_ENOSYS; }
int NoQueryAtomic(fid_domain*, fi_datatype, fi_op, fi_atomic_attr*, uint64_t) {
  return -FI_ENOSYS;
}
int NoQueryCollective(fid_domain*, fi_collective_op, fi_collective_attr*,
                      uint64_t) {
  return -FI_ENOSYS;
}
int Endpoint2(fid_domain* d, fi_info* info, fid_ep** ep, uint64_t flags,
              void* context) {
  if (flags != 0) return -FI_EBADFLAGS;
  return OpenEndpoint(d, info, ep, context);
}

fi_ops domain_fid_ops = {
    .size = sizeof(fi_ops),
    .close = CloseDomain,
    .bind = NoBind,
    .control = NoControl,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

fi_ops_domain domain_ops = {
    .size = sizeof(fi_ops_domain),
    .av_open = OpenAv,
    .cq_open = OpenCq,
    .endpoint = OpenEndpoint,
    .scalable_ep = NoScalableEp,
    .cntr_open = NoCntr,
    .poll_open = NoPoll,
    .stx_ctx = NoStx,
    .srx_ctx = NoSrx,
    .query_atomic = NoQueryAtomic,
    .query_collective = NoQueryCollective,
    .endpoint2 = Endpoint2,
};

}  // namespace

int NodeFor(Fabric* fab, const fi_info* info, int* node) {
  // A domain opened from a connection request lives on the listener's node.
  if (info->handle != nullptr && info->handle->fclass == FI_CLASS_CONNREQ) {
    *node = reinterpret_cast<const ConnReq*>(info->handle)->node;
    return 0;
  }
  const char* name = info->domain_attr ? info->domain_attr->name : nullptr;
  const std::string own = fab->choice.sim ? kSimName : fab->choice.device;
  if (name == nullptr || own == name) {
    *node = fab->next_node++ % fab->nodes;
    return 0;
  }
  // "sim:N" names node N of the simulator.
  const std::string prefix = own + ":";
  if (!fab->choice.sim || strncmp(name, prefix.c_str(), prefix.size()) != 0) {
    return -FI_EINVAL;
  }
  char* end = nullptr;
  const long n = strtol(name + prefix.size(), &end, 10);
  if (end == name + prefix.size() || *end != '\0' || n < 0 || n >= fab->nodes) {
    return -FI_EINVAL;
  }
  *node = static_cast<int>(n);
  return 0;
}

int OpenDomain(fid_fabric* ff, fi_info* info, fid_domain** out, void* context) {
  if (ff == nullptr || info == nullptr || out == nullptr) return -FI_EINVAL;
  auto* fab = reinterpret_cast<Fabric*>(ff);
  int node = 0;
  const int rc0 = NodeFor(fab, info, &node);
  if (rc0 != 0) return rc0;
  auto* d = new Domain;
  const int rc = sf_domain_open(fab->sf, node, &d->sf, d);
  if (rc != 0) {
    delete d;
    return rc;
  }
  InitFid(&d->fid.fid, FI_CLASS_DOMAIN, context, &domain_fid_ops);
  d->fid.ops = &domain_ops;
  d->fid.mr = &mr_ops;
  d->fabric = fab;
  d->node = node;
  ++fab->children;
  *out = &d->fid;
  return 0;
}

}  // namespace softfab::libfabric
