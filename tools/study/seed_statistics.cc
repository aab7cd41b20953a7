// The bounded statistics a SeedResult carries: the logarithmic latency
// histogram (fixed buckets, mergeable across seeds) and throughput over
// virtual time (at most kThroughputBucketsMax buckets, widened by doubling).
#include <algorithm>

#include "tools/study/runner.h"

namespace softfab::study {

int LatencyHistogram::BucketOf(uint64_t ns) {
  if (ns < 16) return static_cast<int>(ns);
  const int msb = 63 - __builtin_clzll(ns);  // >= 4
  const int sub = static_cast<int>((ns >> (msb - 3)) & (kSubBuckets - 1));
  return 16 + (msb - 4) * kSubBuckets + sub;
}

uint64_t LatencyHistogram::LowerNs(int bucket) {
  if (bucket < 16) return static_cast<uint64_t>(std::max(bucket, 0));
  const int msb = 4 + (bucket - 16) / kSubBuckets;
  const uint64_t sub = static_cast<uint64_t>((bucket - 16) % kSubBuckets);
  return (1ull << msb) + (sub << (msb - 3));
}

void LatencyHistogram::Add(uint64_t ns) {
  ++count;
  sum_ns += ns;
  min_ns = std::min(min_ns, ns);
  max_ns = std::max(max_ns, ns);
  ++buckets[BucketOf(ns)];
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  count += other.count;
  sum_ns += other.sum_ns;
  min_ns = std::min(min_ns, other.min_ns);
  max_ns = std::max(max_ns, other.max_ns);
  for (int i = 0; i < kBuckets; ++i) buckets[i] += other.buckets[i];
}

uint64_t LatencyHistogram::QuantileNs(double q) const {
  if (count == 0) return 0;
  if (q <= 0) return min_ns;
  if (q >= 1) return max_ns;
  // The rank of the sample asked for, 1-based, rounded up.
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count));
  if (static_cast<double>(rank) < q * static_cast<double>(count)) ++rank;
  rank = std::clamp<uint64_t>(rank, 1, count);
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets[i];
    if (seen >= rank) return std::clamp(LowerNs(i), min_ns, max_ns);
  }
  return max_ns;
}

void Throughput::Add(uint64_t t_ns, uint64_t n) {
  if (bucket_ns == 0) bucket_ns = 100'000;
  while (t_ns / bucket_ns >= kThroughputBucketsMax) {
    // Fold pairs: bucket i of the doubled width holds old 2i and 2i + 1.
    std::vector<uint64_t> folded((bytes.size() + 1) / 2, 0);
    for (size_t i = 0; i < bytes.size(); ++i) folded[i / 2] += bytes[i];
    bytes = std::move(folded);
    bucket_ns *= 2;
  }
  const size_t at = static_cast<size_t>(t_ns / bucket_ns);
  if (bytes.size() <= at) bytes.resize(at + 1, 0);
  bytes[at] += n;
}

}  // namespace softfab::study
