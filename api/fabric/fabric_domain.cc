// The fabric (a backend: the simulated fabric or a real device, chosen here
// and opened by api/sim/fabric_sim.cc or api/fabric/verbs_fabric.cc), its
// domains (one node's device, a protection domain and a completion channel
// each), and memory registration.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "api/fabric/internal/backends.h"
#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "transport/backend.h"
#include "transport/transport.h"

namespace softfab::fabric_internal {

sf_fabric* NewFabric(std::unique_ptr<tp::Backend> backend,
                     softfab::sim::SimFabric* sim_extension,
                     const ClassOfService& cos, void* context) {
  auto* f = NewObject<Fabric>(SF_CLASS_FABRIC, context, nullptr);
  f->backend = std::move(backend);
  f->parks_idle_reads = f->backend->ParksIdleReads();
  f->sim_extension = sim_extension;
  f->class_of_service = cos;
  return f;
}

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_fabric_open(const sf_fabric_attr* attr, sf_fabric** out, void* context) {
  if (attr == nullptr || out == nullptr) {
    return Fail(EINVAL, "attr and fabric must not be NULL");
  }
  ClassOfService cos;
  if (const int bad = ResolveClassOfService(attr, &cos); bad != 0) return bad;
  // The one place a backend is chosen; each opener reads its own fields.
  Fabric opened;
  int rc;
  switch (Raw(attr->backend)) {
    case SF_BACKEND_SIM:
      // Several processes on one simulated fabric: its daemon is named in
      // the environment (softfab run, softfab fabricd).
      rc = std::getenv("SOFTFAB_FABRIC") != nullptr
               ? OpenSharedSimBackend(*attr, &opened)
               : OpenSimBackend(*attr, &opened);
      break;
    case SF_BACKEND_VERBS:
      rc = OpenVerbsBackend(*attr, &opened);
      break;
    default:
      return Fail(EINVAL, "backend: SF_BACKEND_SIM or SF_BACKEND_VERBS");
  }
  if (rc != 0) return rc;
  Fabric* f = static_cast<Fabric*>(
      NewFabric(std::move(opened.backend), opened.sim_extension, cos, context));
  f->mr_cache = opened.mr_cache;
  f->sread_spin_ns = opened.sread_spin_ns;
  *out = f;
  return 0;
}

int sf_domain_open(sf_fabric* pub, int node, sf_domain** out, void* context) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || out == nullptr) {
    return Fail(EINVAL, "fabric and domain must be valid");
  }
  std::string why;
  auto dev = f->backend->OpenDevice(node, &why);
  if (!dev.ok()) {
    return FailWith(dev.status().code(),
                    why.empty() ? dev.status().message() : why);
  }
  // The fabric's P_Key index must be in this port's table.
  tp::PortAttr port;
  if (Status s = (*dev)->QueryPort(1, &port); !s.ok()) {
    f->backend->CloseDevice(*dev);
    return Fail(s);
  }
  if (f->class_of_service.pkey_index >= port.pkey_tbl_len) {
    f->backend->CloseDevice(*dev);
    return FailWith(
        EINVAL, "pkey_index " + std::to_string(f->class_of_service.pkey_index) +
                    " is beyond the port's P_Key table (" +
                    std::to_string(port.pkey_tbl_len) + " entries)");
  }
  // Undone in reverse if a later step fails, so a refused open leaves the
  // backend as it was.
  auto channel = (*dev)->CreateCompChannel();
  if (!channel.ok()) {
    f->backend->CloseDevice(*dev);
    return Fail(channel.status());
  }
  auto pd = (*dev)->AllocPd();
  if (!pd.ok()) {
    (void)(*channel)->Destroy();
    f->backend->CloseDevice(*dev);
    return Fail(pd.status());
  }
  auto* d = NewObject<Domain>(SF_CLASS_DOMAIN, context, &f->children);
  d->fabric = f;
  d->device = *dev;
  d->pd = *pd;
  d->channel = *channel;
  // The registration cache watches unmaps where it can; without that it is
  // on only where the application promised (fabric.h, SF_VERBS_MR_CACHE).
  using Mode = Fabric::MrCacheMode;
  std::unique_ptr<core::UnmapMonitor> monitor;
  if (f->mr_cache != Mode::kOff) {
    auto opened = core::UnmapMonitor::Open();
    if (opened.ok()) monitor = std::move(*opened);
  }
  core::MrCache::Options cache;
  cache.enabled = monitor != nullptr || f->mr_cache == Mode::kTrusted;
  d->mr_cache =
      std::make_unique<core::MrCache>(d->pd, cache, std::move(monitor));
  f->domains.push_back(d);
  *out = d;
  return 0;
}

int sf_mr_reg(sf_domain* pub, const void* buf, size_t len, uint64_t access,
              uint64_t offset, uint64_t requested_key, uint64_t flags,
              sf_mr** out, void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and mr must be valid");
  }
  if (buf == nullptr || len == 0) {
    return Fail(EINVAL, "a registration needs a buffer and a length");
  }
  constexpr uint64_t kAccess =
      SF_SEND | SF_RECV | SF_READ | SF_WRITE | SF_REMOTE_READ | SF_REMOTE_WRITE;
  if (access & ~kAccess) return Fail(EINVAL, "unknown access bits");
  if (offset != 0 || requested_key != 0 || flags != 0) {
    return Fail(EINVAL, "offset, requested_key and flags must be 0");
  }
  // Local write lets receives and READs land; remote read serves rendezvous
  // sends; remote write is asked for explicitly.
  uint32_t ibv = tp::kAccessLocalWrite | tp::kAccessRemoteRead;
  if (access & SF_REMOTE_WRITE) ibv |= tp::kAccessRemoteWrite;
  auto mr = d->pd->RegMr(const_cast<void*>(buf), len, ibv);
  if (!mr.ok()) return Fail(mr.status());
  // A registration the application makes says it manages this range: the
  // cache forgets what it holds there (it may be a new mapping).
  if (d->mr_cache) d->mr_cache->Invalidate(buf, len);
  auto* m = NewObject<Mr>(SF_CLASS_MR, context, &d->children);
  m->domain = d;
  m->mr = *mr;
  d->mrs.insert(static_cast<sf_mr*>(m));
  *out = m;
  return 0;
}

void* sf_mr_desc(sf_mr* pub) { return AsMr(pub) ? pub : nullptr; }

int sf_mr_cache_query(sf_domain* pub, sf_mr_cache_stats* out) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and stats must be valid");
  }
  *out = sf_mr_cache_stats{};
  if (!d->mr_cache) return 0;
  const core::MrCache& c = *d->mr_cache;
  const core::MrCache::Stats& s = c.stats();
  out->enabled = c.enabled();
  out->watching = c.watching();
  out->hits = s.hits;
  out->misses = s.misses;
  out->evictions = s.evictions;
  out->invalidations = s.invalidations;
  out->unmapped = s.unmapped;
  out->unwatched = s.unwatched;
  out->enomem_retries = s.enomem_retries;
  out->entries = c.entries();
  out->bytes = c.bytes_cached();
  return 0;
}

}  // extern "C"

}  // namespace softfab::fabric_internal
