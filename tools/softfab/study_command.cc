// softfab study: one run per seed in forked workers, optionally twice to
// check determinism; progress, the summary table and the report directory.
#include <sys/resource.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <optional>

#include "tools/softfab/commands.h"
#include "tools/softfab/determinism_check.h"
#include "tools/softfab/progress.h"
#include "tools/softfab/study_report.h"
#include "tools/softfab/worker_pool.h"
#include "tools/study/result_json.h"

namespace softfab::cli {
namespace {

// A result the command itself writes: a worker died, or answered something
// that is not a result. Outcome "crashed", invariant "completed".
study::SeedResult Crashed(const StudyIdentity& identity, uint64_t seed,
                          const std::string& why) {
  study::SeedResult r;
  r.seed = seed;
  r.scenario = identity.name;
  r.expected = identity.expect;
  r.outcome = "crashed";
  r.invariant = "completed";
  r.invariant_detail = why;
  r.passed = false;
  return r;
}

// Both runs of one seed.
struct SeedRuns {
  std::optional<study::SeedResult> first, second;
};

}  // namespace

int RunStudy(const StudyArgs& args) {
  std::string error;
  auto scenario = study::LoadScenario(args.scenario, &error);
  if (!scenario.ok()) {
    std::fprintf(stderr, "softfab study: %s\n", error.c_str());
    return kExitUsage;
  }
  if (!args.out_dir.empty() && !PrepareOutputDir(args.out_dir, &error)) {
    std::fprintf(stderr, "softfab study: --out: %s\n", error.c_str());
    return kExitUsage;
  }
  const StudyIdentity identity{scenario->name, args.scenario, scenario->expect};
  const std::vector<uint64_t> seeds = SelectSeeds(args.seeds, args.shard);
  std::vector<SeedTask> tasks;
  for (uint64_t seed : seeds) tasks.push_back({seed, 0});
  if (args.check_determinism) {
    for (uint64_t seed : seeds) tasks.push_back({seed, 1});
  }

  std::map<uint64_t, SeedRuns> runs;  // Ordered by seed for the report.
  Progress progress(tasks.size(), stderr, isatty(STDERR_FILENO) != 0);
  const study::Scenario& loaded = *scenario;
  auto work = [&loaded](uint64_t seed) {
    study::RunOptions options;
    options.seed = seed;
    return study::ResultToJson(study::RunSeed(loaded, options));
  };
  auto keep = [&](const SeedTask& task, study::SeedResult result) {
    if (!args.quiet) progress.Done(!result.passed);
    SeedRuns& r = runs[task.seed];
    (task.pass == 0 ? r.first : r.second) = std::move(result);
  };
  auto answer = [&](const SeedTask& task, std::string line) {
    std::string parse_error;
    auto result = study::ResultFromJson(line, &parse_error);
    keep(task, result.ok() && result->seed == task.seed
                   ? std::move(*result)
                   : Crashed(identity, task.seed,
                             "the worker's answer is not this seed's result: " +
                                 parse_error));
  };
  auto crash = [&](const SeedTask& task, const std::string& why) {
    keep(task, Crashed(identity, task.seed, why));
  };
  if (!RunInWorkers(tasks, args.jobs, work, answer, crash, &error)) {
    std::fprintf(stderr, "softfab study: %s\n", error.c_str());
    return kExitUsage;
  }
  if (!args.quiet) progress.Finish();

  std::vector<study::SeedResult> results;
  uint64_t differed = 0;
  for (auto& [seed, r] : runs) {
    results.push_back(r.second ? CompareRuns(std::move(*r.first), *r.second)
                               : std::move(*r.first));
    differed += results.back().invariant == kDeterminismInvariant;
  }
  std::fputs(SummaryText(identity, results).c_str(), stdout);
  if (args.check_determinism) {
    std::printf("determinism: %zu seeds run twice, %" PRIu64 " differed\n",
                seeds.size(), differed);
  }
  if (!args.quiet) {
    const double seconds = progress.ElapsedSeconds();
    rusage children{};
    getrusage(RUSAGE_CHILDREN, &children);  // ru_maxrss: the largest worker.
    std::fprintf(
        stderr,
        "%zu runs in %.1f s wall (%.1f runs/s, %d jobs, peak memory "
        "per worker %.1f MB)\n",
        tasks.size(), seconds,
        seconds > 0 ? static_cast<double>(tasks.size()) / seconds : 0.0,
        args.jobs, static_cast<double>(children.ru_maxrss) / 1024.0);
  }
  if (!args.out_dir.empty()) {
    std::string warning;
    if (!WriteStudyDir(args.out_dir, identity, results, FindPlotScript(),
                       &warning, &error)) {
      std::fprintf(stderr, "softfab study: %s\n", error.c_str());
      return kExitUsage;
    }
    if (!warning.empty()) {
      std::fprintf(stderr, "softfab study: %s\n", warning.c_str());
    }
    std::printf("report: %s/index.html\n", args.out_dir.c_str());
  }
  for (const study::SeedResult& r : results) {
    if (!r.passed) return kExitFailed;
  }
  return kExitPassed;
}

}  // namespace softfab::cli
