// Real devices as a transport::Backend (transport/backend.h): what the API
// holds for a fabric opened on a device through libibverbs. Each node is a
// context of its own on the one device, port and GID the options select, and
// waiting sleeps in poll(2) on completion channels.
#ifndef SOFTFAB_BACKENDS_VERBS_VERBS_BACKEND_H_
#define SOFTFAB_BACKENDS_VERBS_VERBS_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "backends/verbs/verbs_device.h"
#include "transport/backend.h"

namespace softfab::verbs {

// The most contexts one backend opens at once (nodes 0 .. kNodesMax-1).
inline constexpr int32_t kVerbsNodesMax = 64;

// A backend whose every node is a context of the device OpenVerbsDevice
// (options) opens (nodes 0 .. kVerbsNodesMax-1). Nothing is opened until
// OpenDevice; pin the options (device name, physical port, GID index) from a
// probe first if the choice must not change later.
std::unique_ptr<transport::Backend> CreateVerbsBackend(
    const VerbsOptions& options);
// A backend over a list of devices: node i opens `names[i]` (first active
// port, automatic GID), as many times as asked. One wait can watch channels
// of all of them.
std::unique_ptr<transport::Backend> CreateVerbsListBackend(
    std::vector<std::string> names);

}  // namespace softfab::verbs

#endif  // SOFTFAB_BACKENDS_VERBS_VERBS_BACKEND_H_
