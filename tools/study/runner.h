// Runs one seed of a scenario: builds the simulated fabric the scenario
// describes, drives its workload through the sf_* API, checks the invariants
// (exactly-once delivery, order where the API promises it, correct bytes,
// every posted operation completed exactly once, no completion lost) and
// reports the outcome, the counters, per-phase latency histograms and
// throughput over virtual time. Memory per seed is bounded by the workload's
// window and the fixed-size histograms, not by the number of messages.
#ifndef SOFTFAB_TOOLS_STUDY_RUNNER_H_
#define SOFTFAB_TOOLS_STUDY_RUNNER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/study/scenario.h"

namespace softfab::study {

// Outcomes. "ok": every message delivered, no error completion. The others
// name what ended the run when it was not ok (the first error completion's
// kind, else the reason the run stopped).
inline constexpr char kOutcomeOk[] = "ok";
inline constexpr char kOutcomeRetryExceeded[] = "retry_exceeded";
inline constexpr char kOutcomeRnrRetryExceeded[] = "rnr_retry_exceeded";
inline constexpr char kOutcomeFlushed[] = "flushed";  // QP to ERROR, peer lost
inline constexpr char kOutcomeTruncated[] = "truncated";
inline constexpr char kOutcomeErrorCompletion[] = "error_completion";
inline constexpr char kOutcomeStalled[] = "stalled";  // idle or deadline
inline constexpr char kOutcomeSetupFailed[] = "setup_failed";

struct RunOptions {
  uint64_t seed = 1;
  std::string trace_path;  // non-empty: write the simulator's event trace.
  std::string pcap_path;   // non-empty: write a RoCEv2 capture (if built in).
};

// Latencies in fixed logarithmic buckets: exact below 16 ns, then 8 buckets
// per power of two (12.5% resolution) up to 2^63 ns. Bucket i holds values in
// [LowerNs(i), LowerNs(i + 1)).
struct LatencyHistogram {
  static constexpr int kSubBuckets = 8;
  static constexpr int kBuckets = 16 + (63 - 3) * kSubBuckets;
  std::string phase;
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  uint64_t min_ns = UINT64_MAX;
  uint64_t max_ns = 0;
  std::vector<uint64_t> buckets = std::vector<uint64_t>(kBuckets, 0);

  void Add(uint64_t ns);
  void Merge(const LatencyHistogram& other);
  // The value below which a fraction q of the samples lie (a bucket's lower
  // bound; min/max exact at 0 and 1).
  uint64_t QuantileNs(double q) const;
  static int BucketOf(uint64_t ns);
  static uint64_t LowerNs(int bucket);
};

// Bytes delivered per bucket of virtual time, starting at 0.
inline constexpr int kThroughputBucketsMax = 1024;
struct Throughput {
  uint64_t bucket_ns = 0;
  std::vector<uint64_t> bytes;  // at most kThroughputBucketsMax entries.

  // Counts `n` bytes delivered at `t_ns`; doubles bucket_ns (folding pairs)
  // when t_ns would need more buckets than allowed.
  void Add(uint64_t t_ns, uint64_t n);
};

struct SeedCounts {
  uint64_t messages_posted = 0;     // sends posted (accepted by sf_*send)
  uint64_t messages_sent = 0;       // sends completed successfully
  uint64_t messages_delivered = 0;  // receives completed with a message
  uint64_t bytes_delivered = 0;
  uint64_t packets_sent = 0;
  uint64_t packets_dropped = 0;
  uint64_t retransmissions = 0;
  uint64_t rnr_naks = 0;
  uint64_t flushes = 0;  // error completions for flushed/cancelled operations
  uint64_t eagain = 0;   // posts refused with -SF_EAGAIN (retried)
  uint64_t events = 0;   // simulator events run
  // Error completions by status name (sf_strerror's, e.g. "ECANCELED"-like
  // names; see runner.cc ErrName), in name order.
  std::map<std::string, uint64_t> errors;
};

struct SeedResult {
  uint64_t seed = 0;
  std::string scenario;  // Scenario::name
  std::string outcome;   // kOutcome* or another named outcome
  std::string expected;  // Scenario::expect
  // Empty when every invariant held; else its name ("exactly_once", "order",
  // "bytes", "completion_once", "completion_lost") and a sentence saying
  // which message or operation broke it. For outcome setup_failed, the
  // detail says why (the refusing call's sf_last_error).
  std::string invariant;
  std::string invariant_detail;
  // The seed passed: no invariant broken and outcome == expected.
  bool passed = false;
  uint64_t digest = 0;       // sf_sim_digest at the end of the run
  uint64_t duration_ns = 0;  // virtual time at the end of the run
  SeedCounts counts;
  std::vector<LatencyHistogram> latency;  // one per scenario phase, in order
  Throughput throughput;
};

// Runs one seed. Never crashes on an expected failure: errors, stalls and
// broken invariants are reported in the result. Deterministic: the same
// scenario and seed give the same result (digest included) in any build.
// Uses only the calling thread; several runs may proceed in parallel threads
// or processes.
SeedResult RunSeed(const Scenario& scenario, const RunOptions& options);

}  // namespace softfab::study

#endif  // SOFTFAB_TOOLS_STUDY_RUNNER_H_
