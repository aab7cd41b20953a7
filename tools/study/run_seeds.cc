// Runs seeds of a scenario in this process and prints one JSON line each and
// the CPU time per seed: the quick way to measure RunSeed (the `softfab`
// command is the product). Usage: run_seeds SCENARIO FIRST COUNT [TRACE]
// (TRACE: write the last seed's event trace there).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "tools/study/result_json.h"
#include "tools/study/runner.h"
#include "tools/study/scenario.h"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s SCENARIO FIRST COUNT [TRACE]\n", argv[0]);
    return 2;
  }
  std::string error;
  auto s = softfab::study::LoadScenario(argv[1], &error);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  const uint64_t first = std::strtoull(argv[2], nullptr, 10);
  const uint64_t count = std::strtoull(argv[3], nullptr, 10);
  int failed = 0;
  const std::clock_t start = std::clock();
  for (uint64_t seed = first; seed < first + count; ++seed) {
    softfab::study::RunOptions o;
    o.seed = seed;
    if (argc == 5) o.trace_path = argv[4];
    const auto r = softfab::study::RunSeed(*s, o);
    if (!r.passed) ++failed;
    std::printf("%s\n", softfab::study::ResultToJson(r).c_str());
  }
  const double cpu_s = double(std::clock() - start) / CLOCKS_PER_SEC;
  std::fprintf(stderr, "%llu seeds, %d not passed, %.2f ms CPU per seed\n",
               static_cast<unsigned long long>(count), failed,
               1000 * cpu_s / count);
  return failed ? 1 : 0;
}
