// softfab command line: runs seeds in forked worker processes. Each worker
// gets seed numbers over a pipe and answers each with one line of text (a
// seed's result as JSON); the parent multiplexes the answers with poll(2).
// A worker that dies mid-seed is reported for that seed and replaced, so one
// crashing seed never takes the study down.
#ifndef SOFTFAB_TOOLS_SOFTFAB_WORKER_POOL_H_
#define SOFTFAB_TOOLS_SOFTFAB_WORKER_POOL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace softfab::cli {

// One run of one seed. `pass` is 0, or 1 for the second run of a determinism
// check: a pass-1 run goes to another worker process than its pass-0 run
// whenever more than one worker is alive, so a difference between processes
// (or state one seed leaves behind for the next) shows up.
struct SeedTask {
  uint64_t seed = 0;
  int pass = 0;
};

// Most worker processes (more would only contend for the cores).
inline constexpr int kJobsMax = 256;

// Runs in the worker (a forked child): one seed's result as one line of text
// without a newline. Must not write to stdout.
using SeedWork = std::function<std::string(uint64_t seed)>;
// Runs in the parent for every answer, in arrival order.
using SeedAnswer = std::function<void(const SeedTask& task, std::string line)>;
// Runs in the parent when a worker died during `task`; `why` says how
// ("killed by signal 11", "exited with status 3").
using SeedCrash =
    std::function<void(const SeedTask& task, const std::string& why)>;

// Runs every task in `jobs` workers (1 <= jobs <= kJobsMax; fewer if there
// are fewer tasks), every pass-0 task before any pass-1 task. Returns when
// each task got exactly one answer or crash report; false with *error only if
// the workers could not be started (pipe or fork failed).
[[nodiscard]] bool RunInWorkers(const std::vector<SeedTask>& tasks, int jobs,
                                const SeedWork& work, const SeedAnswer& answer,
                                const SeedCrash& crash, std::string* error);

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_WORKER_POOL_H_
