// softfab command line: a study's report from its per-seed results: the
// summary (outcomes, counters, latency per phase, throughput over virtual
// time, worst seeds with their replay commands) as a table on stdout and as
// results.json; results.csv; seeds.jsonl; then plots and index.html drawn by
// tools/report/plot_study.py. Every file is a function of the results alone
// (sorted by seed; no wall clock, job count or shard), so N merged shards
// write the same bytes as one run of the same seeds.
#ifndef SOFTFAB_TOOLS_SOFTFAB_STUDY_REPORT_H_
#define SOFTFAB_TOOLS_SOFTFAB_STUDY_REPORT_H_

#include <string>
#include <vector>

#include "tools/study/runner.h"

namespace softfab::cli {

// File names inside a study directory.
inline constexpr char kResultsJson[] = "results.json";
inline constexpr char kResultsCsv[] = "results.csv";
inline constexpr char kSeedsJsonl[] = "seeds.jsonl";

// Which study a set of results belongs to.
struct StudyIdentity {
  std::string name;    // The scenario's name.
  std::string path;    // The scenario file as given on the command line.
  std::string expect;  // The outcome the scenario expects.
};

// The whole results.json; `results` sorted by seed, seeds unique.
std::string ResultsJson(const StudyIdentity& study,
                        const std::vector<study::SeedResult>& results);

// The summary table a person reads after a study.
std::string SummaryText(const StudyIdentity& study,
                        const std::vector<study::SeedResult>& results);

// The command that replays one seed, writing its trace and capture.
std::string ReplayCommand(const StudyIdentity& study, uint64_t seed);

// Writes results.json, results.csv and seeds.jsonl into `dir` (created if
// missing), then runs `plot_script` (empty: none) with /usr/bin/python3 to
// draw the plots and index.html. False with *error when a file cannot be
// written; a failing plot script only sets *warning.
[[nodiscard]] bool WriteStudyDir(const std::string& dir,
                                 const StudyIdentity& study,
                                 const std::vector<study::SeedResult>& results,
                                 const std::string& plot_script,
                                 std::string* warning, std::string* error);

// Checked before a command runs, so a bad --out or output path fails at
// once instead of after the work: creates `dir` (and its parents) and checks
// that a file can be written in it.
[[nodiscard]] bool PrepareOutputDir(const std::string& dir, std::string* error);
// Checks that `path` can be opened for writing (creating it, empty, if it
// did not exist).
[[nodiscard]] bool PrepareOutputFile(const std::string& path,
                                     std::string* error);

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_STUDY_REPORT_H_
