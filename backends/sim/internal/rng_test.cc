#include "backends/sim/internal/rng.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

namespace softfab::sim::internal {
namespace {

TEST(RngTest, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    if (x != c.Next()) differs = true;
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, KnownFirstValuesPinTheAlgorithm) {
  // Pinned so that a change to the generator (which would change every digest)
  // is noticed.
  uint64_t s = 0;
  EXPECT_EQ(SplitMix64(&s), 0xe220a8397b1dcdafull);
  Rng r(1);
  const uint64_t first = r.Next();
  Rng r2(1);
  EXPECT_EQ(first, r2.Next());
  EXPECT_NE(DeriveSeed(1, 0), DeriveSeed(1, 1));
  EXPECT_NE(DeriveSeed(1, 0), DeriveSeed(2, 0));
}

TEST(RngTest, BelowIsInRangeAndCoversIt) {
  Rng r(7);
  std::set<uint64_t> seen;
  for (int i = 0; i < 10000; ++i) {
    const uint64_t v = r.Below(10);
    ASSERT_LT(v, 10u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 10u);
}

TEST(RngTest, ChanceMatchesProbability) {
  Rng r(9);
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += r.Chance(0.25);
  EXPECT_NEAR(hits / 100000.0, 0.25, 0.01);
  EXPECT_FALSE(r.Chance(0.0));
  EXPECT_TRUE(r.Chance(1.0));
}

TEST(RngTest, NegLogIsAccurateAndExponentialHasItsMean) {
  EXPECT_DOUBLE_EQ(Rng::NegLog(1.0), 0.0);
  EXPECT_NEAR(Rng::NegLog(0.5), 0.6931471805599453, 1e-12);
  EXPECT_NEAR(Rng::NegLog(1e-9), 20.72326583694641, 1e-9);
  EXPECT_NEAR(Rng::NegLog(0.3), 1.2039728043259361, 1e-12);
  Rng r(11);
  double sum = 0;
  for (int i = 0; i < 100000; ++i)
    sum += static_cast<double>(r.Exponential(1000));
  EXPECT_NEAR(sum / 100000.0, 1000.0, 20.0);
}

}  // namespace
}  // namespace softfab::sim::internal
