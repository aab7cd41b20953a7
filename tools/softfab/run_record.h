// softfab command line: what the report needs of one seed's run, taken from
// the runner's SeedResult (see seed_result_adapter.h), and the study's
// identity. The report (study_report.h) reads only these, so it neither
// depends on the result's JSON layout nor changes when the runner adds a field.
#ifndef SOFTFAB_TOOLS_SOFTFAB_RUN_RECORD_H_
#define SOFTFAB_TOOLS_SOFTFAB_RUN_RECORD_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/softfab/latency_histogram.h"

namespace softfab::cli {

// Names of the counters the repairs plot shows, as RunRecord::counters uses.
inline constexpr char kRetransmissions[] = "retransmissions";
inline constexpr char kRnrNaks[] = "rnr_naks";
inline constexpr char kFlushes[] = "flushes";

struct RunRecord {
  uint64_t seed = 0;
  std::string outcome;    // "ok" or a named outcome.
  std::string invariant;  // The invariant broken; empty if none.
  std::string why;        // A sentence about the invariant or the outcome.
  bool passed = false;    // No invariant broken and the expected outcome.
  uint64_t digest = 0;
  uint64_t virtual_ns = 0;
  // Named counters in a fixed order (the same for every record).
  std::vector<std::pair<std::string, uint64_t>> counters;
  // Latency per workload phase, phases in a fixed order.
  std::vector<std::pair<std::string, LatencyHistogram>> phases;
  // Bytes delivered per bucket of virtual time.
  uint64_t throughput_bucket_ns = 0;
  std::vector<uint64_t> throughput_bytes;
  // The runner's own serialisations of the result: one JSON line, one CSV row.
  std::string json;
  std::string csv;

  uint64_t Counter(const std::string& name) const;
  // Highest p99 over the phases (0 without samples).
  uint64_t WorstP99Ns() const;
};

// Which study a set of records belongs to.
struct StudyIdentity {
  std::string name;    // The scenario's name.
  std::string path;    // The scenario file as given on the command line.
  std::string expect;  // The outcome the scenario expects.
};

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_RUN_RECORD_H_
