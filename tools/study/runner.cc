// Runs one seed of a scenario over the sf_* API on the simulated fabric.
#include "tools/study/runner.h"

namespace softfab::study {

void LatencyHistogram::Add(uint64_t ns) {
  ++count;
  sum_ns += ns;
  if (ns < min_ns) min_ns = ns;
  if (ns > max_ns) max_ns = ns;
  ++buckets[BucketOf(ns)];
}
void LatencyHistogram::Merge(const LatencyHistogram&) {}
uint64_t LatencyHistogram::QuantileNs(double) const { return 0; }
int LatencyHistogram::BucketOf(uint64_t) { return 0; }
uint64_t LatencyHistogram::LowerNs(int) { return 0; }
void Throughput::Add(uint64_t, uint64_t) {}

SeedResult RunSeed(const Scenario& scenario, const RunOptions& options) {
  SeedResult r;
  r.seed = options.seed;
  r.scenario = scenario.name;
  r.expected = scenario.expect;
  r.outcome = kOutcomeSetupFailed;
  return r;
}

}  // namespace softfab::study
