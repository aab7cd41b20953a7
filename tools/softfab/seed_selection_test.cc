// Tests of the command line's seed ranges and shards.
#include "tools/softfab/seed_selection.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace softfab::cli {
namespace {

TEST(SeedRangeTest, ParsesRangesAndSingleSeeds) {
  SeedRange r;
  std::string error;
  ASSERT_TRUE(ParseSeedRange("5-9", &r, &error)) << error;
  EXPECT_EQ(r.first, 5u);
  EXPECT_EQ(r.last, 9u);
  ASSERT_TRUE(ParseSeedRange("42", &r, &error)) << error;
  EXPECT_EQ(r.first, 42u);
  EXPECT_EQ(r.last, 42u);
}

TEST(SeedRangeTest, RefusesMalformedReversedAndHugeRanges) {
  SeedRange r{7, 8};
  std::string error;
  for (const char* bad : {"", "-", "1-", "-5", "a-b", "1-2-3", "+1-4", "1 - 4",
                          "9-3", "0-99999999999"}) {
    EXPECT_FALSE(ParseSeedRange(bad, &r, &error)) << bad;
    EXPECT_NE(error.find("--seeds"), std::string::npos) << error;
  }
  EXPECT_EQ(r.first, 7u);  // Untouched on failure.
}

TEST(ShardTest, ParsesAndRefuses) {
  Shard s;
  std::string error;
  ASSERT_TRUE(ParseShard("3/4", &s, &error)) << error;
  EXPECT_EQ(s.index, 3u);
  EXPECT_EQ(s.count, 4u);
  for (const char* bad : {"4/4", "0/0", "1", "/2", "1/", "a/b", "1/2/3"}) {
    EXPECT_FALSE(ParseShard(bad, &s, &error)) << bad;
    EXPECT_NE(error.find("--shard"), std::string::npos) << error;
  }
}

TEST(SelectSeedsTest, ShardsPartitionTheRange) {
  const SeedRange range{10, 36};  // 27 seeds.
  for (uint64_t n : {1, 2, 4, 5, 27, 40}) {
    std::vector<uint64_t> all;
    for (uint64_t i = 0; i < n; ++i) {
      std::vector<uint64_t> part = SelectSeeds(range, Shard{i, n});
      EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
      EXPECT_LE(part.size(), 27 / n + 1);
      all.insert(all.end(), part.begin(), part.end());
    }
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), 27u) << n;
    for (uint64_t k = 0; k < 27; ++k) EXPECT_EQ(all[k], 10 + k);
  }
  EXPECT_EQ(SelectSeeds(range, Shard{1, 4}),
            (std::vector<uint64_t>{11, 15, 19, 23, 27, 31, 35}));
}

}  // namespace
}  // namespace softfab::cli
