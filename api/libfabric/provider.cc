// The entry point of libsoftfab-fi.so, libfabric's "softfab" provider:
// fi_prov_ini hands libfabric the provider record and declares the
// provider's parameters, which libfabric reads from FI_SOFTFAB_<NAME> and
// lists in `fi_info -e`. It is the only symbol the library exports
// (api/libfabric/softfab-fi.lds).
#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <cstring>

#include "api/libfabric/internal/provider_objects.h"

namespace softfab::libfabric {
namespace {

void Cleanup() {}

}  // namespace

// The provider's own version (fi_info's prov_version) and the libfabric API
// it implements: 1.17, what Debian 12's libfabric-dev describes.
fi_provider provider = {
    .version = FI_VERSION(1, 0),
    .fi_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION),
    .context = {},
    .name = "softfab",
    .getinfo = GetInfo,
    .fabric = OpenFabric,
    .cleanup = Cleanup,
};

}  // namespace softfab::libfabric

using softfab::libfabric::provider;

extern "C" FI_EXT_INI {
  // libfabric layers its utility providers (ofi_rxm over MSG, ofi_rxd over
  // DGRAM) on every core provider unless the provider record's context says
  // not to, which libfabric's fabric.c sets for sockets, shm, efa and psm3.
  // softfab has its own RDM endpoint: `-p softfab` must give it, not
  // ofi_rxm over softfab's MSG ("softfab;ofi_rxm" still asks for that). The
  // context starts with the provider's type (an enum) and two flags, the
  // second of which is this one (struct ofi_prov_context, libfabric 1.x).
  struct LayeringFlags {
    int type;
    bool disable_logging;
    bool disable_layering;
  };
  static_assert(sizeof(LayeringFlags) <= sizeof(provider.context));
  // Through a copy: the field is declared a pointer (no aliasing through a
  // cast, which the optimizer may assume does not happen).
  LayeringFlags flags;
  std::memcpy(&flags, &provider.context, sizeof flags);
  flags.disable_layering = true;
  std::memcpy(&provider.context, &flags, sizeof flags);
  // The parameters: name (FI_SOFTFAB_<NAME>), type, help for `fi_info -e`.
  static const struct {
    const char* name;
    fi_param_type type;
    const char* help;
  } kParams[] = {
      {"backend", FI_PARAM_STRING,
       "Which fabrics fi_getinfo offers: \"sim\" (the simulator), \"verbs\" "
       "(every RDMA device) or one device by name (ibv_devices); unset: every "
       "device, then \"sim\""},
      {"lookup_timeout_ms", FI_PARAM_INT,
       "Verbs: how long fi_getinfo with a node and service waits for the "
       "listener there to give its name, in ms (default 2000)"},
      {"sim_nodes", FI_PARAM_INT,
       "Simulator: nodes of each simulated fabric (default 16); its domains "
       "and passive endpoints take nodes 0, 1, ... in the order they are "
       "opened"},
      {"sim_seed", FI_PARAM_SIZE_T, "Simulator: master seed (default 1)"},
      {"sim_scenario", FI_PARAM_STRING,
       "Simulator: a scenario file (softfab study's YAML) whose topology and "
       "faults make the fabric (link latency, bandwidth, MTU, loss, "
       "duplication, reordering, link flaps, QP errors, receiver stalls); "
       "not with the other FI_SOFTFAB_SIM_* settings but the seed"},
      {"sim_latency_ns", FI_PARAM_SIZE_T,
       "Simulator: one-way latency of every link in ns (default 0)"},
      {"sim_bandwidth_bps", FI_PARAM_SIZE_T,
       "Simulator: bandwidth of every link in bit/s (0: unlimited)"},
      {"sim_drop", FI_PARAM_STRING,
       "Simulator: probability in [0, 1] that a packet is lost"},
      {"sim_duplicate", FI_PARAM_STRING,
       "Simulator: probability in [0, 1] that a packet is delivered twice"},
      {"sim_reorder", FI_PARAM_STRING,
       "Simulator: probability in [0, 1] that a packet is held back 5 us "
       "(reordered)"},
  };
  for (const auto& p : kParams) {
    fi_param_define(&provider, p.name, p.type, "%s", p.help);
  }
  return &provider;
}
