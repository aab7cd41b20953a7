// The simulator extension of the sf_* API (api/sim/sim_api.h): a fabric
// opened from a full SimConfig, the SimFabric under an sf_fabric, and the RC
// tuning a domain gives the endpoints it creates.
#include <cerrno>
#include <memory>
#include <utility>

#include "api/fabric/internal/backends.h"
#include "api/fabric/internal/fabric_objects.h"
#include "api/sim/sim_api.h"
#include "backends/sim/sim_backend.h"

namespace softfab {

using fabric_internal::AsDomain;
using fabric_internal::AsFabric;
using fabric_internal::Fabric;
using fabric_internal::Fail;

int sf_sim_fabric_open(const sim::SimConfig& config, sf_fabric** out,
                       void* context) {
  if (out == nullptr) return Fail(EINVAL, "fabric must not be NULL");
  if (const Status s = sim::ValidateSimConfig(config); !s.ok()) return Fail(s);
  fabric_internal::ClassOfService cos;
  if (const int bad = fabric_internal::ResolveClassOfService(nullptr, &cos);
      bad != 0) {
    return bad;
  }
  std::unique_ptr<sim::SimFabric> sim = sim::CreateSimFabric(config);
  if (!sim) return Fail(EINVAL, "simulator configuration refused");
  sim::SimFabric* view = sim.get();
  *out = fabric_internal::NewFabric(sim::CreateSimBackend(std::move(sim)), view,
                                    cos, context);
  return 0;
}

sim::SimFabric* sf_sim_fabric(sf_fabric* pub) {
  Fabric* f = AsFabric(pub);
  return f == nullptr ? nullptr : f->sim_extension;
}

int sf_sim_domain_tune(sf_domain* pub, const sf_sim_ep_tuning& tuning) {
  fabric_internal::Domain* d = AsDomain(pub);
  if (d == nullptr) return Fail(EINVAL, "domain must be valid");
  if (tuning.rc_timeout > 31) {
    return Fail(EINVAL, "rc_timeout is an IB exponent in [1, 31]");
  }
  if (tuning.credits > (1u << 16)) {
    return Fail(EINVAL, "credits must be at most 65536");
  }
  if (tuning.rc_retry_count > 6) {
    return Fail(EINVAL,
                "rc_retry_count must be 1..6 (0: the default, 6): 7 means "
                "retry forever on rxe, so a dead peer would never be "
                "detected");
  }
  d->tuned_rc_timeout = tuning.rc_timeout;
  d->tuned_rc_retry_count = tuning.rc_retry_count;
  d->tuned_credits = tuning.credits;
  return 0;
}

}  // namespace softfab
