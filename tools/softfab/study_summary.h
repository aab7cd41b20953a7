// softfab command line: a study's per-seed results joined into one summary:
// outcome counts, counters (mean, max and the seed of the max), latency per
// phase over all seeds, throughput over virtual time (mean and spread over
// the seeds), and the worst seeds. Integer arithmetic where it decides
// anything, so the same results always give the same summary.
#ifndef SOFTFAB_TOOLS_SOFTFAB_STUDY_SUMMARY_H_
#define SOFTFAB_TOOLS_SOFTFAB_STUDY_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/study/runner.h"

namespace softfab::cli {

inline constexpr size_t kWorstSeedsMax = 10;
// Most throughput buckets a summary keeps (adjacent ones are joined): few
// enough that bursts (a window, then an ack timeout) average out in a plot.
inline constexpr size_t kSummaryBucketsMax = 60;

struct CounterSummary {
  std::string name;
  double mean = 0;
  uint64_t max = 0;
  uint64_t max_seed = 0;
};

struct ThroughputSummary {
  uint64_t bucket_ns = 0;              // 0: no throughput recorded.
  std::vector<double> mean, p10, p90;  // MB/s per bucket, over the seeds.
};

struct WorstSeed {
  uint64_t seed = 0;
  std::string outcome;
  std::string why;  // The broken invariant, the unexpected outcome, or p99.
};

struct StudySummary {
  uint64_t runs = 0, passed = 0, broken = 0;
  uint64_t first_seed = 0, last_seed = 0;
  std::map<std::string, uint64_t> outcomes;     // By name.
  std::vector<CounterSummary> counters;         // In a fixed order.
  std::vector<study::LatencyHistogram> phases;  // In the scenario's order.
  ThroughputSummary throughput;
  std::vector<WorstSeed> worst;  // Failed first (by seed), then by p99.
};

// `results` sorted by seed; `expect` is the scenario's expected outcome.
StudySummary Summarize(const std::vector<study::SeedResult>& results,
                       const std::string& expect);

// The highest p99 latency over a result's phases (0 without samples).
uint64_t WorstP99Ns(const study::SeedResult& result);

// A duration for people: "412 ns", "17.1 us", "1.07 s".
std::string FormatNs(uint64_t ns);

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_STUDY_SUMMARY_H_
