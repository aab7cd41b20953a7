// The spin governor: a look whose yield kept the core away for longer than a
// contended gap turns spinning off for a while, then spinning is tried again.
#include "backends/simd/spin_governor.h"

#include "gtest/gtest.h"

namespace softfab::simd {
namespace {

constexpr uint64_t kStart = 5'000'000'000;  // any monotonic time

TEST(SpinGovernor, SpinsUntilAYieldKeepsTheCoreAway) {
  SpinGovernor g;
  EXPECT_TRUE(g.MaySpin(kStart));
  // Yields that come back within microseconds (the other side answered).
  uint64_t t = kStart;
  for (int i = 0; i < 1000; ++i, t += 20'000) g.Looked(t, t + 20'000);
  EXPECT_TRUE(g.MaySpin(t));
  // Exactly the contended gap is not yet contended.
  g.Looked(t, t + SpinGovernor::kContendedGapNs);
  EXPECT_TRUE(g.MaySpin(t + SpinGovernor::kContendedGapNs));
}

TEST(SpinGovernor, AContendedLookTurnsSpinningOffForAWhile) {
  SpinGovernor g;
  const uint64_t after = kStart + SpinGovernor::kContendedGapNs + 1;
  g.Looked(kStart, after);
  EXPECT_FALSE(g.MaySpin(after));
  EXPECT_FALSE(g.MaySpin(after + SpinGovernor::kSpinOffNs - 1));
  EXPECT_TRUE(g.MaySpin(after + SpinGovernor::kSpinOffNs));
}

TEST(SpinGovernor, AnotherContendedLookExtendsThePause) {
  SpinGovernor g;
  const uint64_t first = kStart + 4'000'000;  // a 4 ms time slice
  g.Looked(kStart, first);
  const uint64_t second = first + 50'000'000;
  g.Looked(second - 2'000'000, second);
  EXPECT_FALSE(g.MaySpin(first + SpinGovernor::kSpinOffNs));
  EXPECT_TRUE(g.MaySpin(second + SpinGovernor::kSpinOffNs));
}

}  // namespace
}  // namespace softfab::simd
