// softfab command line: comparing the two runs of a determinism check.
#include "tools/softfab/determinism_check.h"

#include <cinttypes>
#include <cstdio>

#include "tools/study/result_json.h"

namespace softfab::cli {

study::SeedResult CompareRuns(study::SeedResult first,
                              const study::SeedResult& second) {
  if (study::ResultToJson(second) == study::ResultToJson(first)) return first;
  char why[200];
  if (second.digest != first.digest) {
    std::snprintf(why, sizeof why,
                  "two runs of seed %" PRIu64 " differ: digest %016" PRIx64
                  " then %016" PRIx64,
                  first.seed, first.digest, second.digest);
  } else {
    std::snprintf(why, sizeof why,
                  "two runs of seed %" PRIu64
                  " differ in their results (same digest %016" PRIx64 ")",
                  first.seed, first.digest);
  }
  first.invariant = kDeterminismInvariant;
  first.invariant_detail = why;
  first.passed = false;
  return first;
}

}  // namespace softfab::cli
