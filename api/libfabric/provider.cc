// The entry point of libsoftfab-fi.so, libfabric's "softfab" provider:
// fi_prov_ini hands libfabric the provider record and declares the
// provider's parameters, which libfabric reads from FI_SOFTFAB_<NAME> and
// lists in `fi_info -e`. It is the only symbol the library exports
// (api/libfabric/softfab-fi.lds).
#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

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
  reinterpret_cast<LayeringFlags*>(&provider.context)->disable_layering = true;
  fi_param_define(&provider, "backend", FI_PARAM_STRING,
                  "Which fabrics fi_getinfo offers: \"sim\" (the simulator), "
                  "\"verbs\" (every RDMA device) or one device by name "
                  "(ibv_devices); unset: every device, then \"sim\"");
  fi_param_define(&provider, "sim_nodes", FI_PARAM_INT,
                  "Simulator: nodes of each simulated fabric (default 16); "
                  "its domains and passive endpoints take nodes 0, 1, ... in "
                  "the order they are opened");
  fi_param_define(&provider, "sim_seed", FI_PARAM_SIZE_T,
                  "Simulator: master seed (default 1)");
  fi_param_define(&provider, "sim_latency_ns", FI_PARAM_SIZE_T,
                  "Simulator: one-way latency of every link in ns (default: "
                  "the simulator's)");
  fi_param_define(&provider, "sim_bandwidth_bps", FI_PARAM_SIZE_T,
                  "Simulator: bandwidth of every link in bit/s (0: "
                  "unlimited)");
  fi_param_define(&provider, "sim_drop", FI_PARAM_STRING,
                  "Simulator: probability in [0, 1] that a packet is lost");
  fi_param_define(&provider, "sim_duplicate", FI_PARAM_STRING,
                  "Simulator: probability in [0, 1] that a packet is "
                  "delivered twice");
  fi_param_define(&provider, "sim_reorder", FI_PARAM_STRING,
                  "Simulator: probability in [0, 1] that a packet is held "
                  "back 5 us (reordered)");
  return &provider;
}
