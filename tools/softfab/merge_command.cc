// softfab merge: joins the directories of a study's shards (each written by
// `softfab study --shard I/N --out DIR`) into one report, identical to the
// report one run over the same seeds writes.
#include <yaml-cpp/yaml.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>

#include "tools/softfab/commands.h"
#include "tools/softfab/study_report.h"
#include "tools/study/result_json.h"

namespace softfab::cli {
namespace {

// The study a shard directory belongs to, from its results.json (JSON is
// YAML, so yaml-cpp reads it).
bool ReadIdentity(const std::string& dir, StudyIdentity* identity,
                  std::string* error) {
  const std::string path = dir + "/" + kResultsJson;
  try {
    YAML::Node root = YAML::LoadFile(path);
    YAML::Node s = root["scenario"];
    if (root["format"].as<std::string>("") != "softfab-study-1" || !s) {
      *error = path + ": not a softfab study report";
      return false;
    }
    identity->name = s["name"].as<std::string>();
    identity->path = s["path"].as<std::string>();
    identity->expect = s["expect"].as<std::string>();
  } catch (const YAML::Exception& e) {
    *error = path + ": " + e.what();
    return false;
  }
  return true;
}

}  // namespace

int RunMerge(const MergeArgs& args) {
  StudyIdentity identity;
  std::map<uint64_t, study::SeedResult> by_seed;
  std::string error;
  if (!PrepareOutputDir(args.out_dir, &error)) {
    std::fprintf(stderr, "softfab merge: --out: %s\n", error.c_str());
    return kExitUsage;
  }
  for (const std::string& dir : args.shard_dirs) {
    StudyIdentity shard;
    if (!ReadIdentity(dir, &shard, &error)) {
      std::fprintf(stderr, "softfab merge: %s\n", error.c_str());
      return kExitUsage;
    }
    if (&dir == &args.shard_dirs.front()) {
      identity = shard;
    } else if (shard.name != identity.name || shard.path != identity.path ||
               shard.expect != identity.expect) {
      std::fprintf(stderr,
                   "softfab merge: %s is a study of %s (%s), %s one of %s "
                   "(%s): not shards of one study\n",
                   dir.c_str(), shard.name.c_str(), shard.path.c_str(),
                   args.shard_dirs.front().c_str(), identity.name.c_str(),
                   identity.path.c_str());
      return kExitUsage;
    }
    const std::string path = dir + "/" + kSeedsJsonl;
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "softfab merge: cannot read %s\n", path.c_str());
      return kExitUsage;
    }
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.empty()) continue;
      auto result = study::ResultFromJson(line, &error);
      if (!result.ok()) {
        std::fprintf(stderr, "softfab merge: %s:%d: %s\n", path.c_str(), number,
                     error.c_str());
        return kExitUsage;
      }
      const uint64_t seed = result->seed;
      if (!by_seed.emplace(seed, std::move(*result)).second) {
        std::fprintf(stderr,
                     "softfab merge: seed %" PRIu64
                     " appears in more than one shard (%s)\n",
                     seed, path.c_str());
        return kExitUsage;
      }
    }
  }
  std::vector<study::SeedResult> results;
  for (auto& [seed, result] : by_seed) results.push_back(std::move(result));
  std::string warning;
  if (!WriteStudyDir(args.out_dir, identity, results, FindPlotScript(),
                     &warning, &error)) {
    std::fprintf(stderr, "softfab merge: %s\n", error.c_str());
    return kExitUsage;
  }
  if (!warning.empty())
    std::fprintf(stderr, "softfab merge: %s\n", warning.c_str());
  std::fputs(SummaryText(identity, results).c_str(), stdout);
  std::printf("report: %s/index.html (%zu shards)\n", args.out_dir.c_str(),
              args.shard_dirs.size());
  for (const study::SeedResult& r : results) {
    if (!r.passed) return kExitFailed;
  }
  return kExitPassed;
}

}  // namespace softfab::cli
