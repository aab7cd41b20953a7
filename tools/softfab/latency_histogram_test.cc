// Tests of the report's log-linear latency histogram.
#include "tools/softfab/latency_histogram.h"

#include <gtest/gtest.h>

namespace softfab::cli {
namespace {

TEST(LatencyHistogramTest, EveryValueFallsInABucketThatHoldsIt) {
  for (uint64_t v : {0ull, 1ull, 15ull, 16ull, 17ull, 31ull, 32ull, 1000ull,
                     123456789ull, 1ull << 40, ~0ull >> 1}) {
    LatencyHistogram h;
    h.Add(v);
    ASSERT_EQ(h.total(), 1u);
    size_t bucket = 0;
    while (h.count(bucket) == 0) ++bucket;
    EXPECT_LE(v, LatencyHistogram::UpperBound(bucket)) << v;
    if (bucket > 0) {
      EXPECT_GT(v, LatencyHistogram::UpperBound(bucket - 1)) << v;
    }
    // Within 12.5% of the bound.
    EXPECT_LE(LatencyHistogram::UpperBound(bucket) - v, v / 8 + 1) << v;
  }
}

TEST(LatencyHistogramTest, QuantilesAndMerge) {
  LatencyHistogram a, b;
  for (uint64_t v = 1; v <= 100; ++v) a.Add(v * 1000);
  b.Add(5'000'000, 100);
  EXPECT_EQ(a.Quantile(1.0), 100'000u);
  EXPECT_GE(a.Quantile(0.5), 50'000u);
  EXPECT_LE(a.Quantile(0.5), 50'000u * 9 / 8);
  LatencyHistogram ab = a, ba = b;
  ab.Merge(b);
  ba.Merge(a);
  EXPECT_EQ(ab.total(), 200u);
  EXPECT_EQ(ab.max_ns(), 5'000'000u);
  for (double q : {0.1, 0.5, 0.51, 0.99}) {
    EXPECT_EQ(ab.Quantile(q), ba.Quantile(q)) << q;
  }
  EXPECT_LE(ab.Quantile(0.5), 100'000u * 9 / 8);
  EXPECT_EQ(ab.Quantile(0.51), 5'000'000u);
  EXPECT_EQ(LatencyHistogram().Quantile(0.5), 0u);
}

}  // namespace
}  // namespace softfab::cli
