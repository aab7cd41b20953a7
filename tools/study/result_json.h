// A SeedResult as one line of JSON (the per-seed records a study writes and
// its worker processes send back over pipes) and as one CSV row, and back
// from JSON. Written by a few lines of our own (fixed key order, exact
// integers, no floating point: the same result always gives the same bytes,
// which merging shards relies on), read with yaml-cpp's parser (JSON's flow
// syntax is YAML), so the study needs one library, yaml-cpp, for scenarios
// and results alike.
#ifndef SOFTFAB_TOOLS_STUDY_RESULT_JSON_H_
#define SOFTFAB_TOOLS_STUDY_RESULT_JSON_H_

#include <string>

#include "tools/study/runner.h"
#include "transport/status.h"

namespace softfab::study {

// One line, no trailing newline. Histograms list only non-empty buckets as
// [lower_ns, count] pairs; throughput lists every bucket's bytes.
std::string ResultToJson(const SeedResult& result);

// Parses what ResultToJson wrote (and nothing looser): on failure returns
// EINVAL and sets *error to a sentence.
[[nodiscard]] StatusOr<SeedResult> ResultFromJson(const std::string& json,
                                                  std::string* error);

// The CSV header (no newline) and one row for a result, in its columns:
// seed,scenario,outcome,expected,passed,invariant,digest,duration_ns,
// messages_posted,messages_sent,messages_delivered,bytes_delivered,
// packets_sent,packets_dropped,retransmissions,rnr_naks,flushes,eagain,
// errors,latency_p50_ns,latency_p99_ns,latency_max_ns
// (errors: "NAME=count;..." ; latencies over all phases). Fields with a comma
// or quote are quoted.
std::string CsvHeader();
std::string ResultToCsvRow(const SeedResult& result);

}  // namespace softfab::study

#endif  // SOFTFAB_TOOLS_STUDY_RESULT_JSON_H_
