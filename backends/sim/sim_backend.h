// The simulated fabric as a transport::Backend (transport/backend.h): what the
// API holds for a fabric opened on the simulator. Waiting passes virtual time
// (one event, or the clock to the deadline); no channel is slept on.
#ifndef SOFTFAB_BACKENDS_SIM_SIM_BACKEND_H_
#define SOFTFAB_BACKENDS_SIM_SIM_BACKEND_H_

#include <memory>

#include "backends/sim/sim_fabric.h"
#include "transport/backend.h"

namespace softfab::sim {

// Wraps `fabric` (taken over; not null). The fabric stays reachable through
// the pointer the caller had, for the simulator's own entry points, for as
// long as the backend lives.
std::unique_ptr<transport::Backend> CreateSimBackend(
    std::unique_ptr<SimFabric> fabric);

}  // namespace softfab::sim

#endif  // SOFTFAB_BACKENDS_SIM_SIM_BACKEND_H_
