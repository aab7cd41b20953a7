// fi_fabric for softfab's provider: one sf_fabric per fid_fabric, on the
// simulator (configured by the FI_SOFTFAB_SIM_* parameters, or a scenario
// file's topology and faults: FI_SOFTFAB_SIM_SCENARIO) or on the verbs
// device the fabric's name gives; and the fabric's ops table.
#include "api/softfab/fabric.h"

#include <rdma/fi_errno.h>
#include <rdma/providers/fi_log.h>

#include <cstdlib>
#include <string>

#include "api/libfabric/internal/provider_objects.h"
#include "api/sim/sim_api.h"
#include "backends/simd/client.h"
#include "tools/study/scenario.h"

namespace softfab::libfabric {
namespace {

int CloseFabric(fid* f) {
  auto* fab = reinterpret_cast<Fabric*>(f);
  if (fab->children != 0) return -FI_EBUSY;
  for (auto& cr : fab->connreqs) {
    if (cr->sf != nullptr && cr->owned) sf_freeinfo(cr->sf);
  }
  int rc = sf_close(&fab->sf->fid);
  if (rc != 0) return rc;
  delete fab;
  return 0;
}

int NoWaitOpen(fid_fabric*, fi_wait_attr*, fid_wait**) { return -FI_ENOSYS; }

int Domain2(fid_fabric* fabric, fi_info* info, fid_domain** domain,
            uint64_t flags, void* context) {
  if (flags != 0) return -FI_EBADFLAGS;
  return OpenDomain(fabric, info, domain, context);
}

fi_ops fabric_fid_ops = {
    .size = sizeof(fi_ops),
    .close = CloseFabric,
    .bind = NoBind,
    .control = NoControl,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

fi_ops_fabric fabric_ops = {
    .size = sizeof(fi_ops_fabric),
    .domain = OpenDomain,
    .passive_ep = OpenPassiveEp,
    .eq_open = OpenEq,
    .wait_open = NoWaitOpen,
    .trywait = TryWait,
    .domain2 = Domain2,
};

// A probability parameter (a string, as libfabric has no floating type);
// 0 when unset, -1 when not a number.
double Probability(const char* name) {
  char* text = nullptr;
  if (fi_param_get_str(&provider, name, &text) != FI_SUCCESS || !text) return 0;
  char* end = nullptr;
  const double p = strtod(text, &end);
  return end != text && *end == '\0' ? p : -1;
}

// The simulator's settings from the provider's parameters.
sf_fabric_attr SimAttr() {
  sf_fabric_attr a{};
  a.backend = SF_BACKEND_SIM;
  int nodes = kSimNodesDefault;
  fi_param_get_int(&provider, "sim_nodes", &nodes);
  a.sim_nodes = nodes;
  size_t value = 1;
  fi_param_get_size_t(&provider, "sim_seed", &value);
  a.sim_seed = value;
  value = 0;
  fi_param_get_size_t(&provider, "sim_latency_ns", &value);
  a.sim_latency_ns = value;
  value = 0;
  fi_param_get_size_t(&provider, "sim_bandwidth_bps", &value);
  a.sim_bandwidth_bps = value;
  a.sim_drop = Probability("sim_drop");
  a.sim_duplicate = Probability("sim_duplicate");
  a.sim_reorder = Probability("sim_reorder");
  return a;
}

// A string parameter, "" when unset.
std::string StringParam(const char* name) {
  char* text = nullptr;
  if (fi_param_get_str(&provider, name, &text) != FI_SUCCESS || !text) {
    return "";
  }
  return text;
}

// Opens the simulated fabric a scenario file (FI_SOFTFAB_SIM_SCENARIO)
// describes: its topology and faults, with the seed of `a`. The file's
// errors are logged with their line; -FI_EINVAL then.
int OpenScenarioFabric(const std::string& path, const sf_fabric_attr& a,
                       int* nodes, sf_fabric** out, void* context) {
  if (std::getenv(simd::kFabricEnv) != nullptr) {
    FI_WARN(&provider, FI_LOG_FABRIC,
            "FI_SOFTFAB_SIM_SCENARIO is for a simulator in this process; "
            "this process is on a shared fabric (SOFTFAB_FABRIC): give the "
            "scenario to `softfab run --scenario` or `softfab fabricd`\n");
    return -FI_EINVAL;
  }
  for (const char* p : {"sim_latency_ns", "sim_bandwidth_bps", "sim_drop",
                        "sim_duplicate", "sim_reorder", "sim_nodes"}) {
    if (!StringParam(p).empty()) {
      FI_WARN(&provider, FI_LOG_FABRIC,
              "FI_SOFTFAB_SIM_SCENARIO and FI_SOFTFAB_%s both describe the "
              "fabric: set one\n",
              p);
      return -FI_EINVAL;
    }
  }
  std::string error;
  auto scenario =
      study::LoadScenario(path, &error, study::ScenarioUse::kProgram);
  if (!scenario.ok()) {
    FI_WARN(&provider, FI_LOG_FABRIC, "%s\n", error.c_str());
    return -FI_EINVAL;
  }
  *nodes = scenario->topology.nodes;
  return sf_sim_fabric_open(study::SimConfigFor(*scenario, a.sim_seed), out,
                            context);
}

}  // namespace

int OpenFabric(fi_fabric_attr* attr, fid_fabric** out, void* context) {
  if (attr == nullptr || out == nullptr) return -FI_EINVAL;
  FabricChoice choice;
  if (!ParseFabricName(attr->name, &choice)) return -FI_ENODATA;
  sf_fabric_attr a{};
  if (choice.sim) {
    a = SimAttr();
  } else {
    a.backend = SF_BACKEND_VERBS;
    a.verbs_device = choice.device.c_str();
  }
  auto* fab = new Fabric;
  InitFid(&fab->fid.fid, FI_CLASS_FABRIC, context, &fabric_fid_ops);
  fab->fid.ops = &fabric_ops;
  fab->fid.api_version = attr->api_version;
  fab->choice = choice;
  fab->nodes = choice.sim ? a.sim_nodes : 64;
  const std::string scenario = choice.sim ? StringParam("sim_scenario") : "";
  const int rc = scenario.empty() ? sf_fabric_open(&a, &fab->sf, fab)
                                  : OpenScenarioFabric(scenario, a, &fab->nodes,
                                                       &fab->sf, fab);
  if (rc != 0) {
    delete fab;
    return rc == -FI_ENODEV ? -FI_ENODATA : rc;
  }
  *out = &fab->fid;
  return 0;
}

}  // namespace softfab::libfabric
