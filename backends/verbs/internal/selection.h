// Choosing the port and GID a VerbsDevice stands for, and the diagnostics that
// say what was found when the choice fails. Pure functions over the
// VerbsDeviceInfo read from the hardware, so they are tested without one.
#ifndef SOFTFAB_BACKENDS_VERBS_INTERNAL_SELECTION_H_
#define SOFTFAB_BACKENDS_VERBS_INTERNAL_SELECTION_H_

#include <cstdint>
#include <string>

#include "backends/verbs/verbs_device.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs::internal {

// The diagnostic when libibverbs finds no device at all.
inline constexpr const char kNoDeviceHint[] =
    "no RDMA device: load a driver, e.g. `rdma link add rxe0 type rxe netdev "
    "eth0`, or install rdma-core's provider package (ibverbs-providers)";

// RLIMIT_MEMLOCK below this draws a warning when a device is opened.
inline constexpr uint64_t kMemlockWarnBytes = 64ull << 20;

const char* PortStateName(transport::PortState state);
const char* LinkLayerName(uint8_t link_layer);
const char* GidTypeName(VerbsGidType type);
bool IsIpv4MappedGid(const transport::Gid& gid);

// "port 1: ACTIVE (Ethernet), port 2: DOWN (InfiniBand)".
std::string DescribePorts(const VerbsDeviceInfo& device);
// "0 fe80::1 RoCEv1, 1 fe80::1 RoCEv2" or "none".
std::string DescribeGids(const VerbsPortInfo& port);

// The port to use: `wanted` (1-based) or, for 0, the first active one. EINVAL
// for a port the device does not have, ENETDOWN when the port (or every port)
// is not active; *diagnostic gets a sentence naming what was found.
Status SelectPort(const VerbsDeviceInfo& device, uint8_t wanted,
                  const VerbsPortInfo** port, std::string* diagnostic);

// The GID index to use on `port`: `wanted` when it is a valid entry, or for -1
// the first RoCEv2 entry (IPv4-mapped preferred) on Ethernet, entry 0 on
// InfiniBand. EINVAL for an index that is not a valid entry (the valid ones
// are listed), EADDRNOTAVAIL when -1 finds nothing usable.
Status SelectGid(const VerbsDeviceInfo& device, const VerbsPortInfo& port,
                 int wanted, int* index, std::string* diagnostic);

// A warning about a small RLIMIT_MEMLOCK (soft limit in bytes, or unlimited),
// or "" when it is large enough.
std::string MemlockWarning(bool unlimited, uint64_t soft_limit_bytes);

}  // namespace softfab::verbs::internal

#endif  // SOFTFAB_BACKENDS_VERBS_INTERNAL_SELECTION_H_
