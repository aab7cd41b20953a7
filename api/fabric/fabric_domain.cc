// The fabric (one simulated fabric and its fault plan, or a verbs device:
// api/fabric/verbs_fabric.cc), its domains (one node or device context and a
// protection domain each), and memory registration.
#include <cerrno>
#include <cstdint>

#include "api/fabric/internal/fabric_objects.h"
#include "api/fabric/internal/verbs_fabric.h"
#include "api/softfab/fabric.h"
#include "backends/sim/sim_fabric.h"
#include "transport/transport.h"

namespace softfab::fabric_internal {

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_fabric_open(const sf_fabric_attr* attr, sf_fabric** out, void* context) {
  if (attr == nullptr || out == nullptr) {
    return Fail(EINVAL, "attr and fabric must not be NULL");
  }
  const int backend = Raw(attr->backend);
  if (backend == SF_BACKEND_VERBS) return OpenVerbsFabric(*attr, out, context);
  if (backend != SF_BACKEND_SIM) {
    return Fail(EINVAL, "backend: SF_BACKEND_SIM or SF_BACKEND_VERBS");
  }
  if (attr->sim_nodes <= 0 || attr->sim_nodes > 4096) {
    return Fail(EINVAL, "sim_nodes must be in [1, 4096]");
  }
  softfab::sim::SimConfig config;
  config.nodes = attr->sim_nodes;
  config.master_seed = attr->sim_seed;
  config.default_link.latency_ns = attr->sim_latency_ns;
  config.default_link.bandwidth_bps = attr->sim_bandwidth_bps;
  const struct {
    double p;
    softfab::sim::PacketFaultKind kind;
    uint64_t delay_ns;
  } faults[] = {
      {attr->sim_drop, softfab::sim::PacketFaultKind::kDrop, 0},
      {attr->sim_duplicate, softfab::sim::PacketFaultKind::kDuplicate, 700},
      {attr->sim_reorder, softfab::sim::PacketFaultKind::kReorder, 5000},
  };
  for (const auto& f : faults) {
    if (!(f.p >= 0.0 && f.p <= 1.0)) {
      return Fail(EINVAL, "fault probabilities must be in [0, 1]");
    }
    if (f.p == 0.0) continue;
    softfab::sim::PacketFault pf;
    pf.kind = f.kind;
    pf.probability = f.p;
    pf.delay_ns = f.delay_ns;
    config.faults.packet_faults.push_back(pf);
  }
  auto sim = softfab::sim::CreateSimFabric(config);
  if (!sim) return Fail(EINVAL, "simulator configuration refused");
  auto* f = NewObject<Fabric>(SF_CLASS_FABRIC, context, nullptr);
  f->sim = std::move(sim);
  *out = f;
  return 0;
}

int sf_domain_open(sf_fabric* pub, int node, sf_domain** out, void* context) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || out == nullptr) {
    return Fail(EINVAL, "fabric and domain must be valid");
  }
  if (f->verbs) return OpenVerbsDomain(f, node, out, context);
  tp::Device* dev = f->sim->device(node);
  if (dev == nullptr) return Fail(EINVAL, "no such node");
  auto pd = dev->AllocPd();
  if (!pd.ok()) return Fail(pd.status());
  auto* d = NewObject<Domain>(SF_CLASS_DOMAIN, context, &f->children);
  d->fabric = f;
  d->device = dev;
  d->pd = *pd;
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

}  // extern "C"

}  // namespace softfab::fabric_internal
