// softfab: the command line of the fault-injection studies (study, replay,
// merge, info) and of the shared simulated fabric (run, fabricd). Parses
// arguments with CLI11 and hands over to commands.h.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <thread>

#include "tools/softfab/commands.h"
#include "tools/softfab/worker_pool.h"

namespace {

using softfab::cli::kExitUsage;

// A CLI11 check built from one of seed_selection.h's parsers.
template <typename T>
CLI::Validator ParsedBy(bool (*parse)(const std::string&, T*, std::string*),
                        const char* name) {
  return CLI::Validator(
      [parse](std::string& text) {
        T ignored;
        std::string error;
        return parse(text, &ignored, &error) ? std::string() : error;
      },
      name);
}

// The options `run` and `fabricd` share.
void AddFabricOptions(CLI::App* cmd, softfab::cli::FabricArgs* args) {
  cmd->add_option("--scenario", args->scenario,
                  "A scenario file whose topology and faults make the fabric "
                  "(no workload section: the programs are the workload)");
  cmd->add_option("--pcap", args->pcap_path,
                  "Write every packet the fabric delivers here (RoCEv2 pcap)");
  cmd->add_option("--trace", args->trace_path,
                  "Write each process's completions (virtual time, CQ, QP, "
                  "opcode, status, length) here, by node");
  cmd->add_option("--watchdog-ms", args->watchdog_ms,
                  "Name a process that keeps time from moving this long");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace softfab::cli;  // NOLINT: the program's own namespace.
  CLI::App app{
      "softfab: fault-injection studies on the simulated RDMA fabric.\n"
      "Exit codes: 0 every seed passed, 1 some seed failed, 2 usage."};
  app.require_subcommand(1);

  StudyArgs study;
  std::string seeds_text = "1-100", shard_text = "0/1";
  CLI::App* study_cmd = app.add_subcommand(
      "study", "Run a scenario once per seed in worker processes and report.");
  study_cmd->add_option("SCENARIO", study.scenario, "Scenario file (YAML)")
      ->required();
  study_cmd
      ->add_option("--seeds", seeds_text,
                   "Inclusive range A-B (or one seed A); default 1-100")
      ->check(ParsedBy<SeedRange>(ParseSeedRange, "A-B"));
  study_cmd
      ->add_option("--jobs,-j", study.jobs,
                   "Worker processes (default: the number of cores)")
      ->check(CLI::Range(1, kJobsMax));
  study_cmd->add_option("--out,-o", study.out_dir,
                        "Report directory: results.json, results.csv, "
                        "seeds.jsonl, plots, index.html");
  study_cmd
      ->add_option("--shard", shard_text,
                   "Run shard I of N: the seeds whose index in the range is "
                   "I mod N (merge the shards with `softfab merge`)")
      ->check(ParsedBy<Shard>(ParseShard, "I/N"));
  study_cmd->add_flag("--check-determinism", study.check_determinism,
                      "Run every seed twice (in different workers) and "
                      "compare the results");
  study_cmd->add_flag("--quiet,-q", study.quiet, "No progress output");

  ReplayArgs replay;
  CLI::App* replay_cmd = app.add_subcommand(
      "replay",
      "Rerun one seed: its digest, the invariant it broke if any, "
      "its event trace and a RoCEv2 capture.");
  replay_cmd->add_option("SCENARIO", replay.scenario, "Scenario file (YAML)")
      ->required();
  std::string replay_seed_text;
  replay_cmd->add_option("--seed", replay_seed_text, "The seed (0 to 2^64-1)")
      ->required();
  replay_cmd->add_option("--trace", replay.trace_path,
                         "Write the simulator's event trace here");
  replay_cmd->add_option("--pcap", replay.pcap_path,
                         "Write the packets as a RoCEv2 capture here");

  MergeArgs merge;
  CLI::App* merge_cmd = app.add_subcommand(
      "merge", "Join shard directories of one study into one report.");
  merge_cmd->add_option("DIR", merge.shard_dirs, "Shard directories")
      ->required()
      ->check(CLI::ExistingDirectory);
  merge_cmd->add_option("--out,-o", merge.out_dir, "Report directory")
      ->required();

  RunArgs run;
  std::string run_seed_text = "1";
  CLI::App* run_cmd = app.add_subcommand(
      "run",
      "Run a program as several processes on one simulated fabric: "
      "softfab run -n 2 -- CMD ARGS, or -- CMD1 ARGS : CMD2 ARGS.");
  run_cmd->add_option("-n,--nodes", run.nodes,
                      "Processes (nodes); the MPMD form gives one each");
  run_cmd->add_option("--seed", run_seed_text, "The fabric's seed (default 1)");
  AddFabricOptions(run_cmd, &run);
  run_cmd->add_option("command", run.command, "-- CMD ARGS [: CMD ARGS]...")
      ->required();

  FabricdArgs fabricd;
  std::string fabricd_seed_text = "1";
  CLI::App* fabricd_cmd = app.add_subcommand(
      "fabricd",
      "Serve one simulated fabric to processes a launcher of its own starts "
      "(mpirun -x SOFTFAB_FABRIC): prints SOFTFAB_FABRIC=PATH, serves until "
      "every node has come and gone.");
  fabricd_cmd->add_option("--nodes", fabricd.nodes, "Processes (nodes)")
      ->required();
  fabricd_cmd->add_option("--seed", fabricd_seed_text,
                          "The fabric's seed (default 1)");
  AddFabricOptions(fabricd_cmd, &fabricd);

  CLI::App* info_cmd =
      app.add_subcommand("info", "List the backends and their devices.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }

  if (*study_cmd) {
    std::string error;
    if (!ParseSeedRange(seeds_text, &study.seeds, &error) ||
        !ParseShard(shard_text, &study.shard, &error)) {
      std::fprintf(stderr, "softfab study: %s\n", error.c_str());
      return kExitUsage;
    }
    if (study_cmd->count("--jobs") == 0) {
      const unsigned cores = std::thread::hardware_concurrency();
      study.jobs = cores == 0 ? 1 : static_cast<int>(std::min(cores, 64u));
    }
    return RunStudy(study);
  }
  if (*replay_cmd) {
    std::string error;
    if (!ParseSeed(replay_seed_text, &replay.seed, &error)) {
      std::fprintf(stderr, "softfab replay: %s\n", error.c_str());
      return kExitUsage;
    }
    return RunReplay(replay);
  }
  if (*merge_cmd) return RunMerge(merge);
  if (*run_cmd || *fabricd_cmd) {
    std::string error;
    const bool is_run = static_cast<bool>(*run_cmd);
    if (!ParseSeed(is_run ? run_seed_text : fabricd_seed_text,
                   is_run ? &run.seed : &fabricd.seed, &error)) {
      std::fprintf(stderr, "softfab %s: %s\n", is_run ? "run" : "fabricd",
                   error.c_str());
      return kExitUsage;
    }
    return is_run ? RunRun(run) : RunFabricd(fabricd);
  }
  if (*info_cmd) return RunInfo();
  return kExitUsage;
}
