// softfab command line: a study's report from its per-seed records: the
// summary (outcomes, counters, latency per phase, throughput over virtual
// time, worst seeds with their replay commands) as a table on stdout and as
// results.json; results.csv; seeds.jsonl; then plots and index.html drawn by
// tools/report/plot_study.py. Every file is a function of the records alone
// (sorted by seed; no wall clock, job count or shard), so N merged shards
// write the same bytes as one run of the same seeds.
#ifndef SOFTFAB_TOOLS_SOFTFAB_STUDY_REPORT_H_
#define SOFTFAB_TOOLS_SOFTFAB_STUDY_REPORT_H_

#include <string>
#include <vector>

#include "tools/softfab/run_record.h"

namespace softfab::cli {

// How many worst seeds the summary lists.
inline constexpr size_t kWorstSeedsMax = 10;
// Most throughput buckets the report keeps (adjacent ones are joined).
inline constexpr size_t kThroughputBucketsMax = 200;

// File names inside a study directory.
inline constexpr char kResultsJson[] = "results.json";
inline constexpr char kResultsCsv[] = "results.csv";
inline constexpr char kSeedsJsonl[] = "seeds.jsonl";

// The whole results.json; `records` sorted by seed, seeds unique.
std::string ResultsJson(const StudyIdentity& study,
                        const std::vector<RunRecord>& records);

// The summary table a person reads after a study.
std::string SummaryText(const StudyIdentity& study,
                        const std::vector<RunRecord>& records);

// The command that replays one seed.
std::string ReplayCommand(const StudyIdentity& study, uint64_t seed);

// Writes results.json, results.csv (under `csv_header`), seeds.jsonl into
// `dir` (created if missing), then runs `plot_script` (empty: none) with
// /usr/bin/python3 to draw the plots and index.html. False with *error when
// a file cannot be written; a failing plot script only sets *warning.
[[nodiscard]] bool WriteStudyDir(const std::string& dir,
                                 const StudyIdentity& study,
                                 const std::vector<RunRecord>& records,
                                 const std::string& csv_header,
                                 const std::string& plot_script,
                                 std::string* warning, std::string* error);

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_STUDY_REPORT_H_
