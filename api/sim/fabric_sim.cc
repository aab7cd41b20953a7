// The simulator's entry points of the sf_* API (api/softfab/fabric.h): the
// digest and virtual clock of a simulated fabric. -SF_ENOSYS on a fabric whose
// backend is not a simulation.
#include <cerrno>
#include <cstdint>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::fabric_internal {

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_sim_digest(sf_fabric* pub, uint64_t* digest) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || digest == nullptr) return Fail(EINVAL, "bad argument");
  if (!f->sim) return Fail(ENOSYS, "simulator only: this fabric is verbs");
  *digest = f->sim->digest();
  return 0;
}

int sf_sim_now(sf_fabric* pub, uint64_t* now_ns) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || now_ns == nullptr) return Fail(EINVAL, "bad argument");
  if (!f->sim) return Fail(ENOSYS, "simulator only: this fabric is verbs");
  *now_ns = f->sim->clock().NowNs();
  return 0;
}

}  // extern "C"

}  // namespace softfab::fabric_internal
