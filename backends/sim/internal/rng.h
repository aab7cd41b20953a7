// The simulator's own random numbers: splitmix64 to derive per-component seeds
// from the master seed, xoshiro256** for each stream. Every derived number
// comes from raw bits with integer or basic IEEE arithmetic only, so results
// are identical across standard libraries, build modes and machines (no
// std::*_distribution, no libm).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_RNG_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_RNG_H_

#include <cstdint>

namespace softfab::sim::internal {

// One step of splitmix64: advances *state and returns a well-mixed value.
inline uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The seed of stream `stream_id` under `master_seed`: distinct ids give
// unrelated streams.
inline uint64_t DeriveSeed(uint64_t master_seed, uint64_t stream_id) {
  uint64_t s = master_seed ^ (stream_id * 0xd1342543de82ef95ull);
  SplitMix64(&s);
  return SplitMix64(&s);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& word : s_) word = SplitMix64(&sm);
  }

  // xoshiro256**.
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, bound) by Lemire's multiply-shift with rejection; bound > 0.
  uint64_t Below(uint64_t bound) {
    for (int i = 0; i < 64; ++i) {
      const unsigned __int128 m = static_cast<unsigned __int128>(Next()) *
                                  static_cast<unsigned __int128>(bound);
      const uint64_t low = static_cast<uint64_t>(m);
      if (low >= (0 - bound) % bound) return static_cast<uint64_t>(m >> 64);
    }
    return Next() % bound;  // unreachable in practice; keeps the loop bounded.
  }

  // Uniform double in [0, 1) with 53 random bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // True with probability p (p <= 0 never, p >= 1 always).
  bool Chance(double p) {
    if (p <= 0.0) return false;
    if (p >= 1.0) return true;
    return Unit() < p;
  }

  // An exponential variate with the given mean, rounded down to whole ns; uses
  // NegLog below.
  uint64_t Exponential(uint64_t mean) {
    const double u = 1.0 - Unit();  // (0, 1]
    const double x = NegLog(u) * static_cast<double>(mean);
    if (x >= 1.8e19) return UINT64_MAX / 2;
    return static_cast<uint64_t>(x);
  }

  // -ln(u) for u in (0, 1], with + - * / only (IEEE-exact, so the same bits
  // everywhere): u = m * 2^e with m in [1, 2); ln(m) = 2 atanh((m-1)/(m+1)) by
  // its series.
  static double NegLog(double u) {
    int e = 0;
    double m = u;
    while (m < 1.0) {
      m *= 2.0;
      --e;
    }
    const double y = (m - 1.0) / (m + 1.0);  // in [0, 1/3)
    const double y2 = y * y;
    double term = y;
    double sum = 0.0;
    for (int k = 1; k <= 41; k += 2) {
      sum += term / static_cast<double>(k);
      term *= y2;
    }
    constexpr double kLn2 = 0.6931471805599453;
    return -(2.0 * sum + static_cast<double>(e) * kLn2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_RNG_H_
