// softfab command line: the log-linear latency histogram.
#include "tools/softfab/latency_histogram.h"

#include <bit>

namespace softfab::cli {
namespace {

constexpr int kSubBits = 3;  // 2^3 = 8 buckets per power of two.
constexpr uint64_t kLinear = uint64_t{1} << (kSubBits + 1);  // 0..15 exact.

}  // namespace

size_t LatencyHistogram::BucketOf(uint64_t ns) {
  if (ns < kLinear) return static_cast<size_t>(ns);
  const int exponent = std::bit_width(ns) - 1;  // >= kSubBits + 1
  const uint64_t mantissa =
      (ns >> (exponent - kSubBits)) & ((1 << kSubBits) - 1);
  return static_cast<size_t>(
      kLinear + (exponent - kSubBits - 1) * (1 << kSubBits) + mantissa);
}

uint64_t LatencyHistogram::UpperBound(size_t bucket) {
  if (bucket < kLinear) return bucket;
  const size_t k = bucket - kLinear;
  const int exponent = static_cast<int>(k >> kSubBits) + kSubBits + 1;
  const uint64_t mantissa = k & ((1 << kSubBits) - 1);
  const uint64_t low =
      (uint64_t{1} << exponent) + (mantissa << (exponent - kSubBits));
  return low + (uint64_t{1} << (exponent - kSubBits)) - 1;
}

void LatencyHistogram::Add(uint64_t ns, uint64_t count) {
  if (count == 0) return;
  const size_t b = BucketOf(ns);
  if (counts_.size() <= b) counts_.resize(b + 1, 0);
  counts_[b] += count;
  total_ += count;
  if (ns > max_ns_) max_ns_ = ns;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (counts_.size() < other.counts_.size()) {
    counts_.resize(other.counts_.size(), 0);
  }
  for (size_t i = 0; i < other.counts_.size(); ++i) {
    counts_[i] += other.counts_[i];
  }
  total_ += other.total_;
  if (other.max_ns_ > max_ns_) max_ns_ = other.max_ns_;
}

uint64_t LatencyHistogram::Quantile(double q) const {
  if (total_ == 0) return 0;
  if (q >= 1.0) return max_ns_;
  // The rank of the q quantile, 1-based, rounded up.
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(total_));
  if (static_cast<double>(rank) < q * static_cast<double>(total_)) ++rank;
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const uint64_t upper = UpperBound(i);
      return upper < max_ns_ ? upper : max_ns_;
    }
  }
  return max_ns_;
}

}  // namespace softfab::cli
