// A fault-injection study's scenario: the topology of the simulated fabric,
// the workload run over the sf_* API, the faults (everything sim::FaultPlan
// expresses), the phases latencies are reported by, and the outcome the
// scenario should produce. Read from a YAML file (the schema is documented in
// examples/scenarios/README.md); a bad file is refused with a located message
// and nothing runs.
#ifndef SOFTFAB_TOOLS_STUDY_SCENARIO_H_
#define SOFTFAB_TOOLS_STUDY_SCENARIO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "transport/status.h"

namespace softfab::study {

// ---- Topology ----
// One link; node_a/node_b are -1 for the default link.
struct LinkSpec {
  int32_t node_a = -1;
  int32_t node_b = -1;
  uint64_t latency_ns = 1000;
  uint64_t bandwidth_bps = 100'000'000'000ull;  // 0: unlimited.
  uint32_t mtu_bytes = 4096;                    // 256, 512, 1024, 2048, 4096.
};

struct Topology {
  int32_t nodes = 2;
  LinkSpec default_link;
  std::vector<LinkSpec> links;  // per pair, both directions.
  // HCA limits (SimConfig): a small SRQ makes an RNR storm easy to provoke.
  int32_t max_srq_wr = 16384;
  sim::DevicePersonality personality = sim::DevicePersonality::kRxe;
};

// ---- Workload ----
enum class WorkloadKind : uint8_t {
  kPingPong,  // node 0 sends, node 1 answers; `messages` round trips.
  kStream,    // node 0 sends `messages` to node 1, `window` in flight.
  kAllToAll,  // every node sends `messages` to every other node.
  kIncast,    // every node but `target` sends `messages` to it.
};
enum class ApiKind : uint8_t { kMsg, kTagged };    // sf_send / sf_tsend
enum class EndpointKind : uint8_t { kRdm, kMsg };  // SF_EP_RDM / SF_EP_MSG

enum class SizeMode : uint8_t {
  kFixed,         // every message `fixed_bytes`.
  kList,          // message i is list_bytes[i % size].
  kDistribution,  // drawn per message from the seed's workload stream.
};
enum class SizeDistribution : uint8_t {
  kUniform,     // uniform in [min_bytes, max_bytes].
  kLogUniform,  // log2 of the size uniform: as many tiny as large messages.
};
struct SizeSpec {
  SizeMode mode = SizeMode::kFixed;
  uint64_t fixed_bytes = 64;
  std::vector<uint64_t> list_bytes;
  SizeDistribution distribution = SizeDistribution::kUniform;
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
};

// The completion level of sends (fi_cq(3) / sf_ep_attr.op_flags).
enum class CompletionLevel : uint8_t {
  kTransmit,  // the default
  kInject,
  kDelivery,
  kMatch,
};

struct Workload {
  WorkloadKind kind = WorkloadKind::kStream;
  ApiKind api = ApiKind::kMsg;
  EndpointKind ep = EndpointKind::kRdm;
  SizeSpec sizes;
  uint64_t messages = 100;         // per sending flow (see WorkloadKind).
  int32_t endpoints_per_node = 1;  // flows use endpoint i of each node.
  // Receives go to a shared receive context of this depth per node; 0: each
  // endpoint's own receive queue.
  uint32_t srq_depth = 0;
  uint32_t window = 16;  // sends (and pre-posted receives) in flight per flow.
  uint32_t credits = 0;  // sf_sim_ep_tuning.credits; 0: the default (64).
  uint8_t rc_timeout = 0;  // IB exponent; 0: the default (14, 67 ms).
  CompletionLevel completion = CompletionLevel::kTransmit;
  int32_t target = 0;  // kIncast: the receiving node.
  // A run stops (outcome "stalled") when the fabric is idle, or this much
  // virtual time passes, without every operation complete.
  uint64_t deadline_ns = 10'000'000'000ull;
};

// ---- Phases ----
// Latencies are reported per phase: a message belongs to the phase in which
// it was sent. Phases are ordered by start; the first starts at 0.
struct Phase {
  std::string name;
  uint64_t start_ns = 0;
};

// An application that stops calling into softfab for a while (a long
// computation, a GC pause): the node neither reads its CQ nor posts, so its
// endpoint returns no credits and reposts no receive buffers, while its HCA
// goes on acknowledging and filling the buffers already posted. Unlike
// receiver_stall (the HCA fetches no receive at all), what the peers see then
// depends on flow control: with credits they wait; without, they meet an
// empty SRQ.
struct AppPause {
  int32_t node = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

// ---- The scenario ----
struct Scenario {
  std::string name;
  std::string description;
  std::string path;  // the file it was read from (for replay commands).
  Topology topology;
  Workload workload;
  sim::FaultPlan faults;  // QP numbers: see examples/scenarios/README.md.
  std::vector<AppPause> app_pauses;  // faults.timed entries of kind app_pause.
  std::vector<Phase> phases;  // never empty after loading ("all" by default).
  // The outcome every seed should produce: "ok" or a named outcome (see
  // runner.h: kOutcome*).
  std::string expect = "ok";
  // Throughput is bucketed by this much virtual time (doubled as needed so a
  // run never has more than kThroughputBucketsMax buckets).
  uint64_t throughput_bucket_ns = 100'000;
};

// What a scenario is read for: a study (`softfab study`, `replay`: its
// workload section is required and runs), or a fabric that users' own
// programs run on (`softfab run`, `softfab fabricd`, the libfabric
// provider's FI_SOFTFAB_SIM_SCENARIO): topology and faults only, and a
// workload, phases, report, expect or an app_pause fault (all about the
// built-in workload) are refused with that reason.
enum class ScenarioUse { kStudy, kProgram };

// The largest scenario file LoadScenario reads (shipped ones are a few KB).
inline constexpr uint64_t kScenarioBytesMax = 1 << 20;

// Reads and validates a scenario file. On failure returns the error status
// and sets *error (which must not be null) to one located line:
//   FILE:LINE:COL: field 'workload.sizes': expected ..., got ...
// (syntax errors, unknown fields, wrong types, out-of-range values, missing
// sections). Nothing else is read or run.
[[nodiscard]] StatusOr<Scenario> LoadScenario(
    const std::string& path, std::string* error,
    ScenarioUse use = ScenarioUse::kStudy);
// The same from text already in memory; `path` only names it in messages.
[[nodiscard]] StatusOr<Scenario> ParseScenario(
    const std::string& text, const std::string& path, std::string* error,
    ScenarioUse use = ScenarioUse::kStudy);

// The simulator configuration the scenario describes, for `seed`.
sim::SimConfig SimConfigFor(const Scenario& scenario, uint64_t seed);

// Names, as the YAML file spells them.
const char* WorkloadKindName(WorkloadKind kind);
const char* ApiKindName(ApiKind kind);
const char* EndpointKindName(EndpointKind kind);

}  // namespace softfab::study

#endif  // SOFTFAB_TOOLS_STUDY_SCENARIO_H_
