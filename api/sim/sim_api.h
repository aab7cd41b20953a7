// softfab's simulator extension to the sf_* API (C++ only): open an sf_fabric
// from a full simulator configuration (topology, per-pair links, a fault plan
// with every scope, trace), reach the simulated fabric under an sf_fabric (its
// stats, trace and digest, or a packet capture), and tune the RC transport of
// the endpoints a domain creates (ack timeout, credits), which sf_ep_attr,
// mirroring fi_endpoint(3), has no field for.
//
// Meant for studies and tests that drive a workload through the sf_* calls
// and need the simulator's knobs; a program that only needs a lossy link
// uses sf_fabric_open with its sim_* fields.
#ifndef SOFTFAB_API_SIM_SIM_API_H_
#define SOFTFAB_API_SIM_SIM_API_H_

#include <cstdint>

#include "api/softfab/fabric.h"
#include "backends/sim/sim_fabric.h"

namespace softfab {

// Opens a simulated fabric built from `config` (validated as
// sim::ValidateSimConfig does: -SF_EINVAL and nothing opened when refused).
// Closed with sf_close like any fabric. Same config and the same calls ->
// the same run and digest as ever.
[[nodiscard]] int sf_sim_fabric_open(const sim::SimConfig& config,
                                     sf_fabric** fabric, void* context);

// The simulated fabric under `fabric`, owned by it (valid until sf_close);
// nullptr for a verbs fabric, a NULL or a closed one. Reading its stats,
// trace or digest changes nothing; driving it (Step, RunUntil) from outside
// the sf_* calls is allowed between calls, as the sf_* calls do themselves.
[[nodiscard]] sim::SimFabric* sf_sim_fabric(sf_fabric* fabric);

// RC transport settings for the endpoints a domain creates from now on (the
// ones created before keep theirs). Zero fields keep the defaults.
struct sf_sim_ep_tuning {
  // Local ACK timeout as the IB exponent: 4.096 us * 2^rc_timeout (1..31);
  // 0: the default (14, 67 ms).
  uint8_t rc_timeout;
  // SENDs in flight to one peer (the core's credit window); 0: the default
  // (64). Small values make a receiver's bounce buffers (and so its SRQ)
  // small too.
  uint32_t credits;
  // RC retries of an unacknowledged packet before the connection fails
  // (ibv_qp_attr.retry_cnt), 1..6; 0: the default (6, so 7 tries: about
  // 0.47 s at the default timeout). 7 is refused: Soft-RoCE takes it as
  // "retry forever" and would never report a dead peer. A failed RDM
  // connection is made anew by the next send to the peer.
  uint8_t rc_retry_count;
};
// -SF_EINVAL for a bad domain or out-of-range values; works on any backend.
[[nodiscard]] int sf_sim_domain_tune(sf_domain* domain,
                                     const sf_sim_ep_tuning& tuning);

}  // namespace softfab

#endif  // SOFTFAB_API_SIM_SIM_API_H_
