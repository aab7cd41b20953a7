// The simulator's entry points of the sfv_* API (api/softfab/verbs.h): a
// simulated fabric built from an sfv_sim_config, its device list, and the
// calls that drive it on purpose (a fault study stepping virtual time) or read
// it (clock, digest). Waiting for completions is not among them: a program
// waits with the calls every backend has (sfv_wait_comp_channels).
#include <cerrno>
#include <cstdint>
#include <memory>
#include <utility>

#include "api/softfab/verbs.h"
#include "api/verbs/internal/verbs_objects.h"
#include "backends/sim/sim_backend.h"
#include "backends/sim/sim_fabric.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs_internal {

// The sfv_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/verbs.h declares.
extern "C" {

sfv_sim_fabric* sfv_sim_fabric_create(const sfv_sim_config* config) {
  if (config == nullptr) return Fail<sfv_sim_fabric>(EINVAL);
  softfab::sim::SimConfig c;
  c.nodes = config->nodes;
  c.master_seed = config->master_seed;
  if (config->latency_ns != 0) c.default_link.latency_ns = config->latency_ns;
  if (config->bandwidth_bps != 0)
    c.default_link.bandwidth_bps = config->bandwidth_bps;
  const int mtu = Raw(config->mtu);
  if (mtu != 0) {
    if (!ValidMtu(mtu)) return Fail<sfv_sim_fabric>(EINVAL);
    c.default_link.mtu = static_cast<tp::Mtu>(mtu);
    c.active_mtu = static_cast<tp::Mtu>(mtu);
  }
  const int personality = Raw(config->personality);
  if (personality != SFV_SIM_PERSONALITY_RXE &&
      personality != SFV_SIM_PERSONALITY_MLX5) {
    return Fail<sfv_sim_fabric>(EINVAL, "personality: rxe or mlx5");
  }
  c.personality = personality == SFV_SIM_PERSONALITY_MLX5
                      ? softfab::sim::DevicePersonality::kMlx5
                      : softfab::sim::DevicePersonality::kRxe;
  auto add = [&](softfab::sim::PacketFaultKind kind, double p, uint64_t delay) {
    if (p == 0.0) return;
    softfab::sim::PacketFault f;
    f.kind = kind;
    f.probability = p;
    f.delay_ns = delay;
    c.faults.packet_faults.push_back(f);
  };
  add(softfab::sim::PacketFaultKind::kDrop, config->drop_probability, 0);
  add(softfab::sim::PacketFaultKind::kDuplicate, config->duplicate_probability,
      config->reorder_delay_ns);
  add(softfab::sim::PacketFaultKind::kReorder, config->reorder_probability,
      config->reorder_delay_ns);
  if (!softfab::sim::ValidateSimConfig(c).ok())
    return Fail<sfv_sim_fabric>(EINVAL);
  std::unique_ptr<softfab::sim::SimFabric> sim =
      softfab::sim::CreateSimFabric(c);
  if (!sim) return Fail<sfv_sim_fabric>(EINVAL);
  auto f = std::make_unique<sfv_sim_fabric>();
  f->sim = sim.get();
  f->backend = softfab::sim::CreateSimBackend(std::move(sim));
  for (int n = 0; n < c.nodes; ++n) {
    auto d = std::make_unique<sfv_device>();
    d->backend = f->backend;
    d->node = n;
    d->owner = f.get();
    d->fw_ver = "softfab-sim";
    tp::Device* dev = f->sim->device(n);
    d->name = dev->name();
    tp::DeviceAttr a;
    if (dev->QueryDevice(&a).ok()) d->guid = a.node_guid;
    f->devices.push_back(std::move(d));
  }
  return f.release();
}

void sfv_sim_fabric_destroy(sfv_sim_fabric* fabric) { delete fabric; }

uint64_t sfv_sim_run_until_idle(sfv_sim_fabric* fabric, uint64_t max_events) {
  return fabric ? fabric->sim->RunUntilIdle(max_events) : 0;
}

uint64_t sfv_sim_run_until(sfv_sim_fabric* fabric, uint64_t t_ns) {
  return fabric ? fabric->sim->RunUntil(t_ns) : 0;
}

uint64_t sfv_sim_now_ns(const sfv_sim_fabric* fabric) {
  return fabric ? fabric->sim->clock().NowNs() : 0;
}

uint64_t sfv_sim_digest(const sfv_sim_fabric* fabric) {
  return fabric ? fabric->sim->digest() : 0;
}

sfv_device** sfv_sim_get_device_list(sfv_sim_fabric* fabric, int* num_devices) {
  if (fabric == nullptr) return Fail<sfv_device*>(EINVAL);
  auto** list = new sfv_device*[fabric->devices.size() + 1];
  for (size_t i = 0; i < fabric->devices.size(); ++i)
    list[i] = fabric->devices[i].get();
  list[fabric->devices.size()] = nullptr;
  if (num_devices != nullptr)
    *num_devices = static_cast<int>(fabric->devices.size());
  return list;
}

}  // extern "C"

}  // namespace softfab::verbs_internal
