// softfab command line: `study --check-determinism` judges a seed's two runs.
// The runs must serialise to the same bytes (digest, counters, histograms,
// throughput); otherwise the first run's result is marked as breaking the
// invariant "determinism", with a sentence naming both digests.
#ifndef SOFTFAB_TOOLS_SOFTFAB_DETERMINISM_CHECK_H_
#define SOFTFAB_TOOLS_SOFTFAB_DETERMINISM_CHECK_H_

#include "tools/study/runner.h"

namespace softfab::cli {

inline constexpr char kDeterminismInvariant[] = "determinism";

// `first` unchanged when `second` is the same result; else `first` failed
// with invariant kDeterminismInvariant.
study::SeedResult CompareRuns(study::SeedResult first,
                              const study::SeedResult& second);

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_DETERMINISM_CHECK_H_
