// softfab command line: a log-linear latency histogram (8 buckets per power
// of two, so any value is within 12.5% of its bucket's upper bound) used to
// join latency samples of many seeds into one CDF in bounded memory. Integer
// arithmetic only, so joining in any grouping gives the same counts.
#ifndef SOFTFAB_TOOLS_SOFTFAB_LATENCY_HISTOGRAM_H_
#define SOFTFAB_TOOLS_SOFTFAB_LATENCY_HISTOGRAM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softfab::cli {

class LatencyHistogram {
 public:
  void Add(uint64_t ns, uint64_t count = 1);
  void Merge(const LatencyHistogram& other);

  uint64_t total() const { return total_; }
  uint64_t max_ns() const { return max_ns_; }
  // Buckets 0 .. buckets()-1; count(i) values fell in bucket i, whose values
  // are at most UpperBound(i).
  size_t buckets() const { return counts_.size(); }
  uint64_t count(size_t i) const { return counts_[i]; }
  static uint64_t UpperBound(size_t bucket);
  // The smallest bucket upper bound at or above fraction q (0..1) of the
  // values (the exact maximum for q = 1); 0 when empty.
  uint64_t Quantile(double q) const;

 private:
  static size_t BucketOf(uint64_t ns);

  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t max_ns_ = 0;
};

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_LATENCY_HISTOGRAM_H_
