// Cost per match against queue depth, TagMatcher beside the naive list it must
// beat. Two protocols:
//
//   bazel run -c opt //core:matcher_benchmark -- --benchmark_repetitions=5
//       --benchmark_format=json > m.json
//   python3 bench/matcher_bars.py m.json   # the scaling bars of issue 2
//
// 1. Drain* (UCX's protocol, from openucx/ucx test/gtest/ucp/
//    test_ucp_tag_perf.cc: check_perf and check_scalability). Depth d is the
//    length of the queue when a round starts. Posted side (UCX "multi_exp"):
//    post d receives with distinct tags 0..d-1, then d messages arrive in
//    reverse posting order (tag d-1 first), each landing in its receive, until
//    the queue is empty. Unexpected side (UCX "multi_unexp"): d messages arrive
//    in reverse tag order, then d receives are posted in tag order 0..d-1, each
//    taking its message. UCX times only the matching half of a round; we time
//    the whole round (a round at depth 1 is too short to time by itself
//    without the clock reads dominating it), so the figure is the cost of one
//    message's trip through the matcher: one post or arrival that queues and
//    one that matches. Both halves are queue operations that must not scan; at
//    depth both pay the same table and entry misses. Every Google Benchmark
//    iteration is one round; items processed count messages, so ns per item is
//    ns per message. UCX repeats each depth 10 * max(1, 8192 / d) times and
//    takes the mean; Google Benchmark repeats rounds for --benchmark_min_time
//    and we take the median of --benchmark_repetitions (matcher_bars.py).
//    UCX's own bar is the mean growth per doubling of depth (16..8192) below
//    1.5, with exact tags only; issue 2 sets stricter bars on top (see
//    matcher_bars.py) and adds 10% wildcard receives ("Mixed").
//
// 2. Steady state at constant depth, random targets (PostedExact, ...), a
//    harsher test than UCX's: each iteration is one match at constant depth:
//    a message lands in a posted receive (or a receive takes an unexpected
//    message) and an equivalent entry is queued again at the back, so the
//    queue keeps its depth and its mix. Targets are drawn uniformly over the
//    queue from a fixed sequence, the same for both implementations, so at
//    depth every match touches cold lines (UCX's reverse order walks the
//    entries in sequence).
//
// Cases: Exact (every receive has an exact tag; on the unexpected side each
// slot's message keeps its tag, as each posted receive does, and ExactChurn
// gives every message fresh low tag bits) and Mixed (each receive, as it
// is posted, is a wildcard with probability 10%, using one of four ignore
// masks), on the posted side (messages arriving) and the unexpected side
// (receives posted against a backlog). Every queue slot owns a tag range (bits
// 24 and up), so a message can land only in its slot.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/matcher.h"
#include "core/naive_matcher.h"

namespace softfab {
namespace {

// Every mask ignores the low four bits, where messages vary within their slot.
constexpr uint64_t kMasks[4] = {0xFF, 0xF0F, 0xFF00FF, 0x3C3F};

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Draw number k decides one receive: its ignore mask (0 for exact) and the low
// bits of the message aimed at it.
struct Draw {
  uint64_t ignore;
  uint64_t low_bits;
};

Draw DrawReceive(uint64_t k, bool mixed) {
  const uint64_t r = Mix(k);
  const bool wild = mixed && r % 10 == 0;
  return {wild ? kMasks[(r >> 8) % 4] : 0, wild ? (r >> 16) & 0xF : 0};
}

uint64_t SlotBase(uint64_t slot) { return (slot + 1) << 24; }

std::vector<uint32_t> Targets(int64_t depth) {
  std::vector<uint32_t> t(1 << 16);
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<uint32_t>(Mix(i) % static_cast<uint64_t>(depth));
  }
  return t;
}

template <typename Matcher>
void PostedSide(benchmark::State& state, bool mixed) {
  const int64_t depth = state.range(0);
  Matcher m;
  std::vector<Draw> slots(depth);
  uint64_t draws = 0;
  for (int64_t i = 0; i < depth; ++i) {
    slots[i] = DrawReceive(draws++, mixed);
    m.AddReceive({SlotBase(i), slots[i].ignore, kAnySource,
                  static_cast<uint64_t>(i), false});
  }
  const std::vector<uint32_t> targets = Targets(depth);
  size_t k = 0;
  for (auto _ : state) {
    const uint32_t i = targets[k++ & (targets.size() - 1)];
    auto result = m.ArriveOrQueue({SlotBase(i) | slots[i].low_bits, 1, i});
    benchmark::DoNotOptimize(result);
    slots[i] = DrawReceive(draws++, mixed);
    m.AddReceive({SlotBase(i), slots[i].ignore, kAnySource, i, false});
  }
  if (m.unexpected_count() != 0)
    state.SkipWithError("a message missed its receive");
  state.SetItemsProcessed(state.iterations());
}

// `churn`: every message gets fresh low tag bits (a new exact key each time);
// otherwise a slot's message keeps its tag, like the posted side's receives.
template <typename Matcher>
void UnexpectedSide(benchmark::State& state, bool mixed, bool churn = true) {
  const int64_t depth = state.range(0);
  Matcher m;
  // The backlog: slot i holds one message, tag SlotBase(i) | low bits.
  std::vector<uint64_t> tags(depth);
  for (int64_t i = 0; i < depth; ++i) {
    tags[i] = SlotBase(i) | (Mix(~static_cast<uint64_t>(i)) & 0xF);
    m.AddUnexpected({tags[i], 1, static_cast<uint64_t>(i)});
  }
  const std::vector<uint32_t> targets = Targets(depth);
  size_t k = 0;
  uint64_t draws = 0;
  for (auto _ : state) {
    const uint32_t i = targets[k++ & (targets.size() - 1)];
    const Draw d = DrawReceive(draws++, mixed);
    // A wildcard receive names the slot's base; an exact one the message's full
    // tag.
    const uint64_t recv_tag = d.ignore ? SlotBase(i) : tags[i];
    auto result = m.PostOrMatch({recv_tag, d.ignore, kAnySource, i, false});
    benchmark::DoNotOptimize(result);
    if (churn) tags[i] = SlotBase(i) | (Mix(draws) & 0xF);
    m.AddUnexpected({tags[i], 1, i});
  }
  if (m.posted_count() != 0)
    state.SkipWithError("a receive missed its message");
  state.SetItemsProcessed(state.iterations());
}

// UCX's multi_exp protocol (see the top of the file): one round per
// iteration.
template <typename Matcher>
void PostedDrain(benchmark::State& state, bool mixed) {
  const int64_t depth = state.range(0);
  Matcher m;
  std::vector<Draw> slots(depth);
  uint64_t draws = 0;
  for (auto _ : state) {
    for (int64_t i = 0; i < depth; ++i) {
      slots[i] = DrawReceive(draws++, mixed);
      m.AddReceive({SlotBase(i), slots[i].ignore, kAnySource,
                    static_cast<uint64_t>(i), false});
    }
    for (int64_t i = depth - 1; i >= 0; --i) {
      auto result = m.ArriveOrQueue(
          {SlotBase(i) | slots[i].low_bits, 1, static_cast<uint64_t>(i)});
      benchmark::DoNotOptimize(result);
    }
  }
  if (m.unexpected_count() != 0 || m.posted_count() != 0)
    state.SkipWithError("a message missed its receive");
  state.SetItemsProcessed(state.iterations() * depth);
}

// UCX's multi_unexp protocol: one round per iteration. Every round gives the
// messages fresh low tag bits.
template <typename Matcher>
void UnexpectedDrain(benchmark::State& state, bool mixed) {
  const int64_t depth = state.range(0);
  Matcher m;
  std::vector<uint64_t> tags(depth);
  uint64_t draws = 0;
  for (auto _ : state) {
    for (int64_t i = depth - 1; i >= 0; --i) {
      tags[i] = SlotBase(i) | (Mix(~draws++) & 0xF);
      auto result = m.ArriveOrQueue({tags[i], 1, static_cast<uint64_t>(i)});
      benchmark::DoNotOptimize(result);
    }
    for (int64_t i = 0; i < depth; ++i) {
      const Draw d = DrawReceive(draws++, mixed);
      const uint64_t recv_tag = d.ignore ? SlotBase(i) : tags[i];
      auto result = m.PostOrMatch(
          {recv_tag, d.ignore, kAnySource, static_cast<uint64_t>(i), false});
      benchmark::DoNotOptimize(result);
    }
  }
  if (m.posted_count() != 0 || m.unexpected_count() != 0)
    state.SkipWithError("a receive missed its message");
  state.SetItemsProcessed(state.iterations() * depth);
}

void BM_DrainPostedExact(benchmark::State& s) {
  PostedDrain<TagMatcher>(s, false);
}
void BM_DrainPostedMixed(benchmark::State& s) {
  PostedDrain<TagMatcher>(s, true);
}
void BM_DrainUnexpectedExact(benchmark::State& s) {
  UnexpectedDrain<TagMatcher>(s, false);
}
void BM_DrainUnexpectedMixed(benchmark::State& s) {
  UnexpectedDrain<TagMatcher>(s, true);
}
void BM_NaiveDrainPostedExact(benchmark::State& s) {
  PostedDrain<NaiveMatcher>(s, false);
}
void BM_NaiveDrainUnexpectedExact(benchmark::State& s) {
  UnexpectedDrain<NaiveMatcher>(s, false);
}

void BM_PostedExact(benchmark::State& s) { PostedSide<TagMatcher>(s, false); }
void BM_PostedMixed(benchmark::State& s) { PostedSide<TagMatcher>(s, true); }
void BM_UnexpectedExact(benchmark::State& s) {
  UnexpectedSide<TagMatcher>(s, false, /*churn=*/false);
}
void BM_UnexpectedExactChurn(benchmark::State& s) {
  UnexpectedSide<TagMatcher>(s, false, /*churn=*/true);
}
void BM_UnexpectedMixed(benchmark::State& s) {
  UnexpectedSide<TagMatcher>(s, true);
}
void BM_NaivePostedExact(benchmark::State& s) {
  PostedSide<NaiveMatcher>(s, false);
}
void BM_NaivePostedMixed(benchmark::State& s) {
  PostedSide<NaiveMatcher>(s, true);
}
void BM_NaiveUnexpectedExact(benchmark::State& s) {
  UnexpectedSide<NaiveMatcher>(s, false, /*churn=*/false);
}
void BM_NaiveUnexpectedMixed(benchmark::State& s) {
  UnexpectedSide<NaiveMatcher>(s, true);
}

BENCHMARK(BM_DrainPostedExact)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_DrainPostedMixed)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_DrainUnexpectedExact)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_DrainUnexpectedMixed)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_NaiveDrainPostedExact)->RangeMultiplier(4)->Range(1, 4096);
BENCHMARK(BM_NaiveDrainUnexpectedExact)->RangeMultiplier(4)->Range(1, 4096);
BENCHMARK(BM_PostedExact)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_PostedMixed)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_UnexpectedExact)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_UnexpectedExactChurn)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_UnexpectedMixed)->RangeMultiplier(2)->Range(1, 16384);
BENCHMARK(BM_NaivePostedExact)->RangeMultiplier(4)->Range(1, 16384);
BENCHMARK(BM_NaivePostedMixed)->RangeMultiplier(4)->Range(1, 16384);
BENCHMARK(BM_NaiveUnexpectedExact)->RangeMultiplier(4)->Range(1, 16384);
BENCHMARK(BM_NaiveUnexpectedMixed)->RangeMultiplier(4)->Range(1, 16384);

}  // namespace
}  // namespace softfab
