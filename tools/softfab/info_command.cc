// softfab info: the backends and their devices: the simulator's (a default
// two-node fabric) and the RDMA devices libibverbs finds, each with its port.
#include <cinttypes>
#include <cstdio>

#include "api/softfab/verbs.h"
#include "tools/softfab/commands.h"

namespace softfab::cli {
namespace {

int MtuBytes(enum sfv_mtu mtu) { return 128 << static_cast<int>(mtu); }

const char* PortState(enum sfv_port_state state) {
  switch (state) {
    case SFV_PORT_DOWN:
      return "DOWN";
    case SFV_PORT_INIT:
      return "INIT";
    case SFV_PORT_ARMED:
      return "ARMED";
    case SFV_PORT_ACTIVE:
      return "ACTIVE";
    case SFV_PORT_ACTIVE_DEFER:
      return "ACTIVE_DEFER";
    default:
      return "NOP";
  }
}

// One line per device: name, GUID and, if it opens, its port.
void PrintDevices(struct sfv_device** list) {
  for (int i = 0; list[i] != nullptr; ++i) {
    std::printf("  %-12s guid %016" PRIx64, sfv_get_device_name(list[i]),
                sfv_get_device_guid(list[i]));
    struct sfv_context* context = sfv_open_device(list[i]);
    if (context == nullptr) {
      std::printf("  (cannot open: %s)\n", sfv_last_error());
      continue;
    }
    struct sfv_port_attr port = {};
    if (sfv_query_port(context, 1, &port) == 0) {
      std::printf("  port %s, active MTU %d", PortState(port.state),
                  MtuBytes(port.active_mtu));
    }
    std::printf("\n");
    (void)sfv_close_device(context);
  }
}

}  // namespace

int RunInfo() {
  std::printf(
      "backend sim: deterministic simulated fabric, in process (what "
      "studies run on)\n");
  struct sfv_sim_config config = {};
  config.nodes = 2;
  struct sfv_sim_fabric* fabric = sfv_sim_fabric_create(&config);
  if (fabric == nullptr) {
    std::printf("  cannot create a simulated fabric: %s\n", sfv_last_error());
  } else {
    int count = 0;
    struct sfv_device** list = sfv_sim_get_device_list(fabric, &count);
    std::printf(
        "  a scenario's nodes become devices like these (one per "
        "node; %d shown):\n",
        count);
    if (list != nullptr) PrintDevices(list);
    sfv_free_device_list(list);
    sfv_sim_fabric_destroy(fabric);
  }
  std::printf(
      "backend verbs: rdma-core (rxe, siw, ConnectX, any RoCE/IB HCA)\n");
  int count = 0;
  struct sfv_device** list = sfv_get_device_list(&count);
  if (list == nullptr) {
    std::printf("  cannot list devices: %s\n", sfv_last_error());
    return kExitPassed;
  }
  if (count == 0) {
    std::printf("  no device: %s\n", sfv_last_error());
  } else {
    PrintDevices(list);
  }
  sfv_free_device_list(list);
  return kExitPassed;
}

}  // namespace softfab::cli
