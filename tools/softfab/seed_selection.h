// softfab command line: which seeds a study runs. `--seeds A-B` names an
// inclusive range and `--shard I/N` keeps the seeds whose index in that range
// is congruent to I modulo N (round robin, so shards of a range of any length
// differ in size by at most one and N shards together are exactly the range).
#ifndef SOFTFAB_TOOLS_SOFTFAB_SEED_SELECTION_H_
#define SOFTFAB_TOOLS_SOFTFAB_SEED_SELECTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace softfab::cli {

// An inclusive range of seeds, first <= last.
struct SeedRange {
  uint64_t first = 1;
  uint64_t last = 100;
};

// Shard `index` of `count` (0 <= index < count).
struct Shard {
  uint64_t index = 0;
  uint64_t count = 1;
};

// Most seeds one study runs (keeps memory and the report bounded).
inline constexpr uint64_t kSeedsMax = 10'000'000;
// Most shards a study splits into (a Slurm array is far smaller).
inline constexpr uint64_t kShardsMax = 100'000;

// The whole of `text` as a decimal number: no sign, no spaces, no more than
// 64 bits ("-1" is refused, not wrapped to 2^64-1).
[[nodiscard]] bool ParseNumber(std::string_view text, uint64_t* value);
// --seed's value; false with a sentence in *error.
[[nodiscard]] bool ParseSeed(const std::string& text, uint64_t* seed,
                             std::string* error);

// Parses "A-B" (or a single "A") into a range; false with a sentence in
// *error when malformed, reversed or longer than kSeedsMax.
[[nodiscard]] bool ParseSeedRange(const std::string& text, SeedRange* range,
                                  std::string* error);

// Parses "I/N" with 0 <= I < N <= kShardsMax; false with a sentence in *error.
[[nodiscard]] bool ParseShard(const std::string& text, Shard* shard,
                              std::string* error);

// The seeds of `range` that belong to `shard`, ascending.
std::vector<uint64_t> SelectSeeds(const SeedRange& range, const Shard& shard);

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_SEED_SELECTION_H_
