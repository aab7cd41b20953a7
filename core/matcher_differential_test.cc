// Differential test: TagMatcher against NaiveMatcher (one list each, scanned in
// order), driven by the same random operation stream, compared at every step.
//
// A failure prints its seed; SOFTFAB_MATCHER_SEED=<seed> runs that seed alone,
// and SOFTFAB_MATCHER_OPS=<n> changes the number of operations per seed.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/matcher.h"
#include "core/naive_matcher.h"

namespace softfab {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform enough for a test stream: n is small against 2^64.
  uint64_t Below(uint64_t n) { return Next() % n; }
  bool Percent(int p) { return Below(100) < static_cast<uint64_t>(p); }

 private:
  uint64_t state_;
};

// How a seed draws its tags, masks and sources.
struct Profile {
  uint64_t tag_space;  // 0 = full 64-bit tags.
  int masks;           // Distinct ignore masks in use (beyond exact and any).
  int sources;
  size_t depth_target;  // Queue depth around which the stream hovers.
};

Profile ProfileFor(uint64_t seed) {
  switch (seed % 5) {
    case 0:
      return {8, 2, 2, 64};  // Tiny tag space: many equal tags.
    case 1:
      return {0, 3, 4, 256};  // Large tags, few masks.
    case 2:
      return {1024, 12, 3, 128};  // More masks than the unexpected index holds.
    case 3:
      return {64, 5, 8, 512};  // Deep queues.
    default:
      return {1u << 20, 8, 1, 32};  // One source, shallow.
  }
}

std::string Describe(const PostedReceive& r) {
  return "recv{tag=" + std::to_string(r.tag) +
         " ignore=" + std::to_string(r.ignore) +
         " src=" + std::to_string(r.source) +
         " ctx=" + std::to_string(r.context) +
         " multi=" + std::to_string(r.multi_recv) + "}";
}

bool Same(const PostedReceive& a, const PostedReceive& b) {
  return a.tag == b.tag && a.ignore == b.ignore && a.source == b.source &&
         a.context == b.context && a.multi_recv == b.multi_recv;
}

void RunSeed(uint64_t seed, int ops) {
  SCOPED_TRACE(
      "seed " + std::to_string(seed) +
      " (replay: --test_env=SOFTFAB_MATCHER_SEED=" + std::to_string(seed) +
      " via bazel test --test_env=SOFTFAB_MATCHER_SEED=...)");
  const Profile profile = ProfileFor(seed);
  Rng rng(seed * 0x2545F4914F6CDD1DULL + 1);
  TagMatcher fast;
  NaiveMatcher naive;

  std::vector<uint64_t> masks = {0, ~uint64_t{0}};
  for (int i = 0; i < profile.masks; ++i) {
    // Masks that ignore a few low bits, a random bit set, or a field in the
    // middle.
    switch (i % 3) {
      case 0:
        masks.push_back((uint64_t{1} << (1 + rng.Below(6))) - 1);
        break;
      case 1:
        masks.push_back(rng.Next() & rng.Next() & rng.Next());
        break;
      default:
        masks.push_back(uint64_t{0xF0} << (4 * rng.Below(8)));
        break;
    }
  }
  auto draw_tag = [&] {
    return profile.tag_space == 0 ? rng.Next() : rng.Below(profile.tag_space);
  };
  auto draw_mask = [&]() -> uint64_t {
    if (rng.Percent(60)) return 0;
    return masks[rng.Below(masks.size())];
  };
  auto draw_source = [&] { return rng.Below(profile.sources); };

  uint64_t next_context = 1;
  uint64_t next_cookie = 1;
  std::vector<uint64_t>
      used_contexts;  // For cancels and retiring multi-recv buffers.
  std::vector<uint64_t> claim_contexts;

  for (int step = 0; step < ops; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const size_t depth = naive.posted_count() + naive.unexpected_count();
    const int bias = depth > profile.depth_target ? 10 : 0;
    const int op = static_cast<int>(rng.Below(100));
    if (op < 30) {
      // Post a receive (fi_trecv).
      PostedReceive r;
      r.tag = draw_tag();
      r.ignore = draw_mask();
      r.source = rng.Percent(50) ? kAnySource : draw_source();
      r.context = (rng.Percent(5) && !used_contexts.empty())
                      ? used_contexts[rng.Below(used_contexts.size())]
                      : next_context++;
      r.multi_recv = rng.Percent(5);
      used_contexts.push_back(r.context);
      auto got = fast.PostOrMatch(r);
      auto want = naive.PostOrMatch(r);
      ASSERT_EQ(got.matched.has_value(), want.has_value()) << Describe(r);
      if (want) {
        ASSERT_EQ(got.matched->cookie, want->cookie) << Describe(r);
      }
    } else if (op < 60 + bias) {
      // A message arrives.
      UnexpectedMessage m{draw_tag(), draw_source(), next_cookie++};
      if (rng.Percent(10) && !used_contexts.empty()) {
        // Aim at an existing receive's tag now and then, so wildcards get
        // exercised.
        if (auto i = naive.FindReceiveByContext(
                used_contexts[rng.Below(used_contexts.size())])) {
          m.tag = naive.receive(*i).tag;
        }
      }
      auto got = fast.ArriveOrQueue(m);
      auto want = naive.ArriveOrQueue(m);
      ASSERT_EQ(got.matched.has_value(), want.has_value()) << "tag " << m.tag;
      if (want) {
        ASSERT_TRUE(Same(*got.matched, *want)) << Describe(*want);
      }
    } else if (op < 70 + bias) {
      // Cancel by context, or retire a multi-recv buffer (same removal path).
      if (used_contexts.empty()) continue;
      const uint64_t ctx = used_contexts[rng.Below(used_contexts.size())];
      auto got = fast.FindReceiveByContext(ctx);
      auto want = naive.FindReceiveByContext(ctx);
      ASSERT_EQ(got.has_value(), want.has_value()) << "ctx " << ctx;
      if (!want) continue;
      ASSERT_TRUE(Same(fast.receive(*got), naive.receive(*want)));
      fast.RemoveReceive(*got);
      naive.RemoveReceive(*want);
    } else if (op < 80 + bias) {
      // Peek, then maybe claim or discard what it found.
      const uint64_t tag = draw_tag(), ignore = draw_mask();
      const uint64_t source = rng.Percent(50) ? kAnySource : draw_source();
      auto got = fast.FindUnexpected(tag, ignore, source);
      auto want = naive.FindUnexpected(tag, ignore, source);
      ASSERT_EQ(got.has_value(), want.has_value());
      if (!want) continue;
      ASSERT_EQ(fast.message(*got).cookie, naive.message(*want).cookie);
      const uint64_t what = rng.Below(3);
      if (what == 1) {
        const uint64_t ctx = next_context++;
        fast.Claim(*got, ctx);
        naive.Claim(*want, ctx);
        claim_contexts.push_back(ctx);
      } else if (what == 2) {
        fast.RemoveUnexpected(*got);
        naive.RemoveUnexpected(*want);
      }
    } else if (op < 90 + bias) {
      // FI_CLAIM (take the data) or FI_CLAIM|FI_DISCARD: both remove the
      // claimed message.
      if (claim_contexts.empty()) continue;
      const size_t i = rng.Below(claim_contexts.size());
      const uint64_t ctx = claim_contexts[i];
      auto got = fast.FindClaimed(ctx);
      auto want = naive.FindClaimed(ctx);
      ASSERT_EQ(got.has_value(), want.has_value());
      if (!want) continue;
      ASSERT_EQ(fast.message(*got).cookie, naive.message(*want).cookie);
      fast.RemoveUnexpected(*got);
      naive.RemoveUnexpected(*want);
      claim_contexts[i] = claim_contexts.back();
      claim_contexts.pop_back();
    } else {
      // A probe that changes nothing: which receive would a message land in?
      const uint64_t tag = draw_tag(), source = draw_source();
      auto got = fast.FindReceive(tag, source);
      auto want = naive.FindReceive(tag, source);
      ASSERT_EQ(got.has_value(), want.has_value());
      if (want) {
        ASSERT_TRUE(Same(fast.receive(*got), naive.receive(*want)));
      }
    }
    ASSERT_EQ(fast.posted_count(), naive.posted_count());
    ASSERT_EQ(fast.unexpected_count(), naive.unexpected_count());
    if (used_contexts.size() > 4096)
      used_contexts.erase(used_contexts.begin(), used_contexts.begin() + 2048);
  }
}

int OpsPerSeed() {
  const char* env = std::getenv("SOFTFAB_MATCHER_OPS");
  return env ? std::atoi(env) : 100000;
}

// One case per seed. SOFTFAB_MATCHER_SEED replaces the seed of every case.
class MatcherDifferentialTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(MatcherDifferentialTest, AgreesWithNaiveModel) {
  const char* env = std::getenv("SOFTFAB_MATCHER_SEED");
  RunSeed(env ? std::strtoull(env, nullptr, 10) : GetParam(), OpsPerSeed());
}

INSTANTIATE_TEST_SUITE_P(TenSeeds, MatcherDifferentialTest,
                         ::testing::Range<uint64_t>(1, 11));

}  // namespace
}  // namespace softfab
