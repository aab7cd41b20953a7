// The simulator's part of the sf_* API (api/softfab/fabric.h): opening an
// sf_fabric on the simulator from sf_fabric_attr's sim_* fields, and the
// digest and virtual clock of a simulated fabric (-SF_ENOSYS on a backend
// that is no simulation).
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "api/fabric/internal/backends.h"
#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "backends/sim/sim_backend.h"
#include "backends/sim/sim_fabric.h"
#include "backends/simd/client.h"

namespace softfab::fabric_internal {

int OpenSimBackend(const sf_fabric_attr& attr, Fabric* f) {
  if (attr.sim_nodes <= 0 || attr.sim_nodes > 4096) {
    return Fail(EINVAL, "sim_nodes must be in [1, 4096]");
  }
  const int personality = Raw(attr.sim_personality);
  if (personality != SF_SIM_PERSONALITY_RXE &&
      personality != SF_SIM_PERSONALITY_MLX5) {
    return Fail(EINVAL, "sim_personality: SF_SIM_PERSONALITY_RXE or _MLX5");
  }
  sim::SimConfig config;
  config.nodes = attr.sim_nodes;
  config.personality = personality == SF_SIM_PERSONALITY_MLX5
                           ? sim::DevicePersonality::kMlx5
                           : sim::DevicePersonality::kRxe;
  config.master_seed = attr.sim_seed;
  config.default_link.latency_ns = attr.sim_latency_ns;
  config.default_link.bandwidth_bps = attr.sim_bandwidth_bps;
  const struct {
    double p;
    sim::PacketFaultKind kind;
    uint64_t delay_ns;
  } faults[] = {
      {attr.sim_drop, sim::PacketFaultKind::kDrop, 0},
      {attr.sim_duplicate, sim::PacketFaultKind::kDuplicate, 700},
      {attr.sim_reorder, sim::PacketFaultKind::kReorder, 5000},
  };
  for (const auto& fault : faults) {
    if (!(fault.p >= 0.0 && fault.p <= 1.0)) {
      return Fail(EINVAL, "fault probabilities must be in [0, 1]");
    }
    if (fault.p == 0.0) continue;
    sim::PacketFault pf;
    pf.kind = fault.kind;
    pf.probability = fault.p;
    pf.delay_ns = fault.delay_ns;
    config.faults.packet_faults.push_back(pf);
  }
  std::unique_ptr<sim::SimFabric> sim = sim::CreateSimFabric(config);
  if (!sim) return Fail(EINVAL, "simulator configuration refused");
  f->sim_extension = sim.get();
  f->backend = sim::CreateSimBackend(std::move(sim));
  return 0;
}

int OpenSharedSimBackend(const sf_fabric_attr& attr, Fabric* f) {
  (void)attr;  // the fabric's shape and faults are the daemon's
  const char* path = std::getenv(simd::kFabricEnv);
  std::string source;
  const int node = simd::NodeFromEnvironment(&source);
  if (node < 0) {
    return Fail(EINVAL,
                "SOFTFAB_FABRIC names a shared fabric but nothing names this "
                "process's node: set SOFTFAB_NODE (softfab run does), or "
                "start it with a launcher that sets a rank");
  }
  std::string why;
  auto backend = simd::ConnectSimdBackend(path, node, &why);
  if (!backend.ok()) {
    return FailWith(backend.status().code(),
                    why.empty() ? backend.status().message() : why);
  }
  f->backend = std::move(*backend);
  return 0;
}

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_sim_digest(sf_fabric* pub, uint64_t* digest) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || digest == nullptr) return Fail(EINVAL, "bad argument");
  const tp::Simulation* sim = f->backend->simulation();
  if (sim == nullptr) return Fail(ENOSYS, "simulator only: devices are real");
  *digest = sim->digest();
  return 0;
}

int sf_sim_now(sf_fabric* pub, uint64_t* now_ns) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || now_ns == nullptr) return Fail(EINVAL, "bad argument");
  if (f->backend->simulation() == nullptr) {
    return Fail(ENOSYS, "simulator only: devices are real");
  }
  *now_ns = f->backend->clock().NowNs();
  return 0;
}

}  // extern "C"

}  // namespace softfab::fabric_internal
