// Tests of the determinism check's judgement of two runs.
#include "tools/softfab/determinism_check.h"

#include <gtest/gtest.h>

namespace softfab::cli {
namespace {

study::SeedResult OneRun() {
  study::SeedResult r;
  r.seed = 17;
  r.scenario = "s";
  r.outcome = r.expected = "ok";
  r.passed = true;
  r.digest = 0xabc;
  r.counts.retransmissions = 3;
  return r;
}

TEST(DeterminismCheckTest, SameRunsPass) {
  const study::SeedResult r = CompareRuns(OneRun(), OneRun());
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.invariant, "");
}

TEST(DeterminismCheckTest, ADifferentDigestFailsNamingBoth) {
  study::SeedResult again = OneRun();
  again.digest = 0xdef;
  const study::SeedResult r = CompareRuns(OneRun(), again);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.invariant, "determinism");
  EXPECT_NE(r.invariant_detail.find("seed 17"), std::string::npos);
  EXPECT_NE(r.invariant_detail.find("0000000000000abc then 0000000000000def"),
            std::string::npos)
      << r.invariant_detail;
  EXPECT_EQ(r.digest, 0xabcu);  // The first run is what the report keeps.
}

TEST(DeterminismCheckTest, SameDigestDifferentCountersFails) {
  study::SeedResult again = OneRun();
  again.counts.retransmissions = 4;
  const study::SeedResult r = CompareRuns(OneRun(), again);
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.invariant_detail.find("same digest"), std::string::npos);
}

}  // namespace
}  // namespace softfab::cli
