// softfab command line: parsing `--seeds A-B` and `--shard I/N`, and the
// round-robin split of a seed range into shards.
#include "tools/softfab/seed_selection.h"

#include <charconv>

namespace softfab::cli {
// The whole of `text` as a decimal number; no sign, no spaces.
bool ParseNumber(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *value);
  return ec == std::errc() && ptr == end;
}

bool ParseSeed(const std::string& text, uint64_t* seed, std::string* error) {
  if (!ParseNumber(text, seed)) {
    *error =
        "--seed: expected an unsigned number (0 to 2^64-1), got '" + text + "'";
    return false;
  }
  return true;
}

bool ParseSeedRange(const std::string& text, SeedRange* range,
                    std::string* error) {
  const size_t dash = text.find('-');
  std::string_view all(text);
  std::string_view a = all.substr(0, dash);
  std::string_view b = dash == std::string::npos ? a : all.substr(dash + 1);
  SeedRange r;
  if (!ParseNumber(a, &r.first) || !ParseNumber(b, &r.last)) {
    *error =
        "--seeds: expected A-B (two unsigned numbers) or A, got '" + text + "'";
    return false;
  }
  if (r.last < r.first) {
    *error = "--seeds: the range '" + text + "' is reversed";
    return false;
  }
  if (r.last - r.first >= kSeedsMax) {
    *error = "--seeds: '" + text + "' holds more than " +
             std::to_string(kSeedsMax) + " seeds";
    return false;
  }
  *range = r;
  return true;
}

bool ParseShard(const std::string& text, Shard* shard, std::string* error) {
  const size_t slash = text.find('/');
  Shard s;
  if (slash == std::string::npos ||
      !ParseNumber(std::string_view(text).substr(0, slash), &s.index) ||
      !ParseNumber(std::string_view(text).substr(slash + 1), &s.count)) {
    *error = "--shard: expected I/N (two unsigned numbers), got '" + text + "'";
    return false;
  }
  if (s.count == 0 || s.count > kShardsMax || s.index >= s.count) {
    *error = "--shard: expected 0 <= I < N <= " + std::to_string(kShardsMax) +
             ", got '" + text + "'";
    return false;
  }
  *shard = s;
  return true;
}

std::vector<uint64_t> SelectSeeds(const SeedRange& range, const Shard& shard) {
  std::vector<uint64_t> seeds;
  const uint64_t n = range.last - range.first + 1;
  seeds.reserve(n / shard.count + 1);
  for (uint64_t i = shard.index; i < n; i += shard.count) {
    seeds.push_back(range.first + i);
  }
  return seeds;
}

}  // namespace softfab::cli
