// What a study's messages carry, derived from (seed, flow, sequence number)
// alone so the receiver can check every byte without keeping a copy: the
// message's size (fixed, from a list, or drawn from a distribution with
// integer arithmetic only), its payload pattern, and the 64-bit CQ data that
// names it (flow in the top 24 bits, sequence number in the low 40).
// Private to tools/study.
#ifndef SOFTFAB_TOOLS_STUDY_FLOW_PAYLOAD_H_
#define SOFTFAB_TOOLS_STUDY_FLOW_PAYLOAD_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "tools/study/scenario.h"

namespace softfab::study {

inline constexpr uint64_t kSeqMask = (1ull << 40) - 1;

inline uint64_t CqData(uint32_t flow, uint64_t seq) {
  return (static_cast<uint64_t>(flow) << 40) | (seq & kSeqMask);
}
inline uint32_t CqDataFlow(uint64_t data) {
  return static_cast<uint32_t>(data >> 40);
}
inline uint64_t CqDataSeq(uint64_t data) { return data & kSeqMask; }

// splitmix64's finaliser: a well-mixed 64-bit function of its input, the same
// on every platform.
inline uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t MessageKey(uint64_t seed, uint32_t flow, uint64_t seq) {
  return Mix(Mix(seed) ^ (static_cast<uint64_t>(flow) << 40) ^ seq);
}

inline uint64_t MaxMessageBytes(const SizeSpec& s) {
  switch (s.mode) {
    case SizeMode::kFixed:
      return s.fixed_bytes;
    case SizeMode::kList:
      return *std::max_element(s.list_bytes.begin(), s.list_bytes.end());
    case SizeMode::kDistribution:
      return s.max_bytes;
  }
  return 0;
}

inline int Log2Floor(uint64_t v) {
  return v == 0 ? -1 : 63 - __builtin_clzll(v);
}

inline uint64_t MessageBytes(const SizeSpec& s, uint64_t seed, uint32_t flow,
                             uint64_t seq) {
  switch (s.mode) {
    case SizeMode::kFixed:
      return s.fixed_bytes;
    case SizeMode::kList:
      return s.list_bytes[seq % s.list_bytes.size()];
    case SizeMode::kDistribution:
      break;
  }
  const uint64_t h = MessageKey(seed ^ 0x51235ull, flow, seq);
  const uint64_t span = s.max_bytes - s.min_bytes + 1;
  if (s.distribution == SizeDistribution::kUniform) {
    return s.min_bytes + h % span;
  }
  // Log-uniform: an octave uniformly among those [min, max] touches, then a
  // size uniformly within it (clamped to the range).
  const int lo = std::max(Log2Floor(s.min_bytes), 0);
  const int hi = std::max(Log2Floor(s.max_bytes), 0);
  const int octave = lo + static_cast<int>((h >> 32) % (hi - lo + 1));
  const uint64_t first = std::max<uint64_t>(1ull << octave, s.min_bytes);
  const uint64_t last = std::min<uint64_t>((2ull << octave) - 1, s.max_bytes);
  if (s.min_bytes == 0 && (h & 0xff) == 0) return 0;
  return first + (h & 0xffffffffull) % (last - first + 1);
}

// Word i of a message is Mix(key + i); the tail takes a word's low bytes.
inline void FillPayload(uint64_t seed, uint32_t flow, uint64_t seq,
                        uint8_t* buf, uint64_t len) {
  const uint64_t key = MessageKey(seed, flow, seq);
  uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const uint64_t w = Mix(key + i);
    std::memcpy(buf + i, &w, 8);
  }
  if (i < len) {
    const uint64_t w = Mix(key + i);
    std::memcpy(buf + i, &w, len - i);
  }
}

inline bool CheckPayload(uint64_t seed, uint32_t flow, uint64_t seq,
                         const uint8_t* buf, uint64_t len) {
  const uint64_t key = MessageKey(seed, flow, seq);
  uint64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    const uint64_t w = Mix(key + i);
    if (std::memcmp(buf + i, &w, 8) != 0) return false;
  }
  if (i < len) {
    const uint64_t w = Mix(key + i);
    if (std::memcmp(buf + i, &w, len - i) != 0) return false;
  }
  return true;
}

}  // namespace softfab::study

#endif  // SOFTFAB_TOOLS_STUDY_FLOW_PAYLOAD_H_
