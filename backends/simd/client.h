// A process's side of a simulated fabric shared by several processes: a
// transport::Backend whose one device is this process's node in the fabric
// daemon (server.h), reached over a Unix socket and a mailbox in shared
// memory (mailbox.h). Every transport call is a request (but a poll of an
// empty CQ); memory the device touches is shadowed in a memfd shared with the
// daemon and copied at post (sources) and when time has moved (what the
// fabric wrote), so the daemon never reads this process's memory itself.
#ifndef SOFTFAB_BACKENDS_SIMD_CLIENT_H_
#define SOFTFAB_BACKENDS_SIMD_CLIENT_H_

#include <memory>
#include <string>

#include "transport/backend.h"
#include "transport/status.h"

namespace softfab::simd {

// The environment variables a process finds its fabric and node by.
inline constexpr char kFabricEnv[] = "SOFTFAB_FABRIC";
inline constexpr char kNodeEnv[] = "SOFTFAB_NODE";

// Connects to the daemon at `socket_path` as `node`. On failure `why` names
// the cause (no daemon there, node taken or out of range, another protocol
// version, another user).
StatusOr<std::unique_ptr<transport::Backend>> ConnectSimdBackend(
    const std::string& socket_path, int node, std::string* why);

// The node this process is, from the environment: SOFTFAB_NODE, else the
// rank a launcher set (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK). -1 when
// none is set; never connection order, which wall-clock timing decides.
int NodeFromEnvironment(std::string* source);

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_CLIENT_H_
