// softfab run and softfab fabricd: several processes on one simulated fabric.
// `run` starts the fabric daemon's engine in this process, forks the program
// (or each program of the MPMD form) as nodes 0..n-1 with SOFTFAB_FABRIC and
// SOFTFAB_NODE set, serves them until all have ended, prints the run summary
// and exits with the worst exit status. `fabricd` serves a fabric for a
// launcher of its own (mpirun): it prints where to reach it and serves until
// every node has come and gone.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/simd/client.h"
#include "backends/simd/server.h"
#include "tools/softfab/commands.h"
#include "tools/softfab/study_report.h"
#include "tools/study/scenario.h"

namespace softfab::cli {
namespace {

// A private directory for the socket: mkdtemp makes it 0700.
bool MakeSocketDir(std::string* dir, std::string* error) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/softfab-fabric-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    *error = "cannot make a private directory under " +
             pattern.substr(0, pattern.rfind('/')) + ": " +
             std::strerror(errno);
    return false;
  }
  *dir = pattern;
  return true;
}

void RemoveSocketDir(const std::string& dir) {
  unlink((dir + "/fabric.sock").c_str());
  rmdir(dir.c_str());
}

// Splits `a b : c d` into the programs of the MPMD form.
std::vector<std::vector<std::string>> SplitPrograms(
    const std::vector<std::string>& words) {
  std::vector<std::vector<std::string>> programs(1);
  for (const std::string& w : words) {
    if (w == ":") {
      programs.emplace_back();
    } else {
      programs.back().push_back(w);
    }
  }
  return programs;
}

// The fabric `run` or `fabricd` (`who`) serves: the scenario's topology and
// faults (or a plain fabric of `nodes` nodes), with at least `nodes` nodes,
// and what to record. False, with the reason printed, when it cannot be.
bool FabricOptions(const char* who, const FabricArgs& args, int nodes,
                   simd::ServerOptions* options) {
  std::string error;
  for (const std::string* path : {&args.pcap_path, &args.trace_path}) {
    if (!path->empty() && !PrepareOutputFile(*path, &error)) {
      std::fprintf(stderr, "softfab %s: %s\n", who, error.c_str());
      return false;
    }
  }
  if (args.scenario.empty()) {
    options->config.nodes = nodes;
    options->config.master_seed = args.seed;
  } else {
    auto scenario = study::LoadScenario(args.scenario, &error,
                                        study::ScenarioUse::kProgram);
    if (!scenario.ok()) {
      std::fprintf(stderr, "softfab %s: %s\n", who, error.c_str());
      return false;
    }
    if (scenario->topology.nodes < nodes) {
      std::fprintf(stderr,
                   "softfab %s: %s has %d nodes, fewer than the %d "
                   "processes\n",
                   who, args.scenario.c_str(), scenario->topology.nodes, nodes);
      return false;
    }
    options->config = study::SimConfigFor(*scenario, args.seed);
  }
  options->expected_nodes = nodes;
  options->watchdog_ms = args.watchdog_ms;
  options->pcap_path = args.pcap_path;
  options->trace_path = args.trace_path;
  return true;
}

// Closes what the server recorded and prints the summary; false when a
// record could not be written.
bool Finish(const char* who, simd::FabricServer& server) {
  std::string error;
  const bool ok = server.Finish(&error).ok();
  if (!ok) std::fprintf(stderr, "softfab %s: %s\n", who, error.c_str());
  const simd::RunSummary s = server.summary();
  FILE* out = stderr;
  std::fprintf(out,
               "softfab %s: digest %016" PRIx64
               ", virtual time %.3f ms, "
               "%" PRIu64 " advances\n",
               who, s.digest, static_cast<double>(s.now_ns) / 1e6, s.advances);
  std::fprintf(out,
               "  packets %" PRIu64 " sent, %" PRIu64
               " dropped; "
               "retransmissions %" PRIu64 "; RNR NAKs %" PRIu64
               "; completions %" PRIu64 "\n",
               s.stats.packets_sent, s.stats.packets_dropped,
               s.stats.retransmits, s.stats.rnr_naks, s.stats.completions);
  if (s.outside_advances > 0 || s.look_rounds > 0) {
    std::fprintf(out,
                 "  advances with a process outside the fabric %" PRIu64
                 "; look rounds %" PRIu64 "\n",
                 s.outside_advances, s.look_rounds);
  }
  return ok;
}

}  // namespace

int RunRun(const RunArgs& args) {
  const auto programs = SplitPrograms(args.command);
  for (const auto& p : programs) {
    if (p.empty()) {
      std::fprintf(stderr, "softfab run: an empty program in `-- CMD : CMD`\n");
      return kExitUsage;
    }
  }
  int nodes = args.nodes;
  if (programs.size() > 1) {
    if (nodes != 0 && nodes != static_cast<int>(programs.size())) {
      std::fprintf(stderr,
                   "softfab run: -n %d but %zu programs (one node each)\n",
                   nodes, programs.size());
      return kExitUsage;
    }
    nodes = static_cast<int>(programs.size());
  }
  if (nodes <= 0 || nodes > 4096) {
    std::fprintf(stderr, "softfab run: -n must be in [1, 4096]\n");
    return kExitUsage;
  }
  std::string dir, error;
  if (!MakeSocketDir(&dir, &error)) {
    std::fprintf(stderr, "softfab run: %s\n", error.c_str());
    return kExitUsage;
  }
  simd::ServerOptions options;
  if (!FabricOptions("run", args, nodes, &options)) {
    RemoveSocketDir(dir);
    return kExitUsage;
  }
  options.socket_path = dir + "/fabric.sock";
  if (const char* o = std::getenv("SOFTFAB_OUTSIDE_MS")) {
    options.outside_ms = std::strtoull(o, nullptr, 10);
  }
  auto server = simd::CreateFabricServer(options, &error);
  if (!server.ok()) {
    std::fprintf(stderr, "softfab run: %s\n", error.c_str());
    RemoveSocketDir(dir);
    return kExitUsage;
  }
  std::vector<pid_t> children;
  for (int i = 0; i < nodes; ++i) {
    const auto& program = programs[programs.size() == 1 ? 0 : i];
    const pid_t pid = fork();
    if (pid == 0) {
      setenv(simd::kFabricEnv, options.socket_path.c_str(), 1);
      setenv(simd::kNodeEnv, std::to_string(i).c_str(), 1);
      std::vector<char*> argv;
      for (const std::string& w : program)
        argv.push_back(const_cast<char*>(w.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "softfab run: cannot run %s: %s\n", argv[0],
                   std::strerror(errno));
      _exit(127);
    }
    children.push_back(pid);
  }
  // A waiter reaps the children; when the last has ended it stops the
  // server (which also ends by itself once every node came and went).
  int stop[2];
  if (pipe(stop) != 0) return kExitUsage;
  int worst = 0;
  std::thread waiter([&] {
    for (size_t n = 0; n < children.size(); ++n) {
      int status = 0;
      const pid_t pid = wait(&status);
      if (pid < 0) break;
      const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                       : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                             : 1;
      if (code != 0) {
        std::fprintf(stderr, "softfab run: node %zu (pid %d) exited with %d\n",
                     static_cast<size_t>(
                         std::find(children.begin(), children.end(), pid) -
                         children.begin()),
                     static_cast<int>(pid), code);
      }
      worst = std::max(worst, code);
    }
    (void)!write(stop[1], "x", 1);
  });
  (*server)->Run(stop[0]);
  waiter.join();
  close(stop[0]);
  close(stop[1]);
  const bool recorded = Finish("run", **server);
  RemoveSocketDir(dir);
  return worst != 0 ? worst : recorded ? 0 : 1;
}

int RunFabricd(const FabricdArgs& args) {
  if (args.nodes <= 0 || args.nodes > 4096) {
    std::fprintf(stderr, "softfab fabricd: --nodes must be in [1, 4096]\n");
    return kExitUsage;
  }
  std::string dir, error;
  if (!MakeSocketDir(&dir, &error)) {
    std::fprintf(stderr, "softfab fabricd: %s\n", error.c_str());
    return kExitUsage;
  }
  simd::ServerOptions options;
  if (!FabricOptions("fabricd", args, args.nodes, &options)) {
    RemoveSocketDir(dir);
    return kExitUsage;
  }
  options.socket_path = dir + "/fabric.sock";
  auto server = simd::CreateFabricServer(options, &error);
  if (!server.ok()) {
    std::fprintf(stderr, "softfab fabricd: %s\n", error.c_str());
    RemoveSocketDir(dir);
    return kExitUsage;
  }
  std::printf("%s=%s\n", simd::kFabricEnv, options.socket_path.c_str());
  std::fflush(stdout);
  const int rc = (*server)->Run(-1);
  const bool recorded = Finish("fabricd", **server);
  RemoveSocketDir(dir);
  return rc == 0 && recorded ? 0 : 1;
}

}  // namespace softfab::cli
