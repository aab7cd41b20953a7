// softfab command line: the subcommands' arguments and entry points. Each
// returns the process exit code: 0 every seed passed, 1 some seed broke an
// invariant or did not end as its scenario expects, 2 usage (bad arguments,
// a scenario file refused, an unreadable directory).
#ifndef SOFTFAB_TOOLS_SOFTFAB_COMMANDS_H_
#define SOFTFAB_TOOLS_SOFTFAB_COMMANDS_H_

#include <string>
#include <vector>

#include "tools/softfab/seed_selection.h"

namespace softfab::cli {

inline constexpr int kExitPassed = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

struct StudyArgs {
  std::string scenario;
  SeedRange seeds;
  Shard shard;
  int jobs = 1;
  std::string out_dir;  // Empty: no report directory, the summary only.
  bool check_determinism = false;
  bool quiet = false;  // No progress output.
};

struct ReplayArgs {
  std::string scenario;
  uint64_t seed = 0;
  std::string trace_path;
  std::string pcap_path;
};

struct MergeArgs {
  std::vector<std::string> shard_dirs;
  std::string out_dir;
};

// softfab run: programs as nodes of one simulated fabric.
// What `run` and `fabricd` share: the fabric and what to record of it.
struct FabricArgs {
  uint64_t seed = 1;
  uint64_t watchdog_ms = 10'000;
  std::string scenario;  // topology and faults (no workload)
  std::string pcap_path;
  std::string trace_path;  // per-process completion trace
};

struct RunArgs : FabricArgs {
  int nodes = 0;                     // 0: one per program of the MPMD form
  std::vector<std::string> command;  // CMD ARGS [: CMD ARGS]...
};

// softfab fabricd: a fabric for a launcher of its own.
struct FabricdArgs : FabricArgs {
  int nodes = 0;
};

int RunStudy(const StudyArgs& args);
int RunRun(const RunArgs& args);
int RunFabricd(const FabricdArgs& args);
int RunReplay(const ReplayArgs& args);
int RunMerge(const MergeArgs& args);
int RunInfo();

// tools/report/plot_study.py beside this binary (Bazel runfiles), or
// $SOFTFAB_PLOT_SCRIPT; empty if neither exists.
std::string FindPlotScript();

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_COMMANDS_H_
