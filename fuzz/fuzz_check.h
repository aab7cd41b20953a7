// FUZZ_CHECK: the fuzz targets' invariant check. Unlike assert it stays on in
// every build (libFuzzer's -O1, the corpus tests' -c opt), and a failure names
// the check before aborting, which libFuzzer reports as a crash.
#ifndef SOFTFAB_FUZZ_FUZZ_CHECK_H_
#define SOFTFAB_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

#endif  // SOFTFAB_FUZZ_FUZZ_CHECK_H_
