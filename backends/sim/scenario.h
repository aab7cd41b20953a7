// A fixed, faulty workload used by the determinism test and by the sim_digest
// binary (which CI builds in -c opt and -c dbg and whose outputs must match).
#ifndef SOFTFAB_BACKENDS_SIM_SCENARIO_H_
#define SOFTFAB_BACKENDS_SIM_SCENARIO_H_

#include <cstdint>

namespace softfab::sim {

struct ScenarioResult {
  uint64_t digest = 0;
  uint64_t end_time_ns = 0;
  uint64_t events = 0;
  uint64_t rc_delivered = 0;  // RC receive completions with success
  uint64_t rc_sent_ok = 0;    // RC send completions with success
  uint64_t rc_posted = 0;
  uint64_t duplicates_seen = 0;  // RC messages delivered twice (must be 0)
  uint64_t out_of_order = 0;  // RC messages delivered out of order (must be 0)
  uint64_t packets_dropped = 0;  // by faults, link down, corruption
  uint64_t retransmits = 0;
  uint64_t rnr_naks = 0;
};

// Four nodes, six RC pairs (node 3 receives through an SRQ), PSNs that wrap,
// and a fault plan with drop, duplicate, reorder, exponential delay,
// corruption, a link flap and a receiver stall.
ScenarioResult RunFaultyScenario(uint64_t seed);

}  // namespace softfab::sim

#endif  // SOFTFAB_BACKENDS_SIM_SCENARIO_H_
