// InputReader: how the fuzz targets that run programs (api_calls,
// hostile_peer) read their input. Past the end every read gives zeros, so any
// input is a whole program and libFuzzer's truncations stay meaningful.
#ifndef SOFTFAB_FUZZ_INPUT_READER_H_
#define SOFTFAB_FUZZ_INPUT_READER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softfab::fuzz {

class InputReader {
 public:
  InputReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool empty() const { return n_ == 0; }
  uint8_t U8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  // `bytes` bytes (at most 8), little-endian.
  uint64_t Bits(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{U8()} << (8 * i);
    return v;
  }
  // Copies up to `max` bytes to `out`; returns how many there were.
  size_t Take(uint8_t* out, size_t max) {
    const size_t n = std::min(max, n_);
    std::memcpy(out, p_, n);
    p_ += n;
    n_ -= n;
    return n;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace softfab::fuzz

#endif  // SOFTFAB_FUZZ_INPUT_READER_H_
