// Deterministic test bytes: the same (n, seed) always gives the same bytes.
#ifndef SOFTFAB_TESTS_TEST_PATTERN_H_
#define SOFTFAB_TESTS_TEST_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softfab::testing {

inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_TEST_PATTERN_H_
