#include "core/internal/keyed_lists.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

namespace softfab::internal {
namespace {

struct Node {
  ListLink links[2];
};
// Links kept inside the entries.
struct Nodes {
  explicit Nodes(size_t n) : v(n) {}
  ListLink& link(uint32_t e, int slot) { return v[e].links[slot]; }
  const ListLink& link(uint32_t e, int slot) const { return v[e].links[slot]; }
  std::vector<Node> v;
};

TEST(KeyedListsTest, FifoPerKeyAndPerSlot) {
  Nodes nodes(3);
  KeyedLists<Nodes> lists(&nodes);
  lists.PushBack(0, 0, {1, 10, 0});
  lists.PushBack(1, 0, {1, 10, 0});
  lists.PushBack(2, 0, {1, 11, 0});
  lists.PushBack(0, 1, {2, 10, 0});  // Same entry, other slot, other list.
  EXPECT_EQ(lists.Head({1, 10, 0}), 0u);
  EXPECT_EQ(lists.Next(0, 0), 1u);
  EXPECT_EQ(lists.Next(1, 0), kNil);
  EXPECT_EQ(lists.Head({1, 11, 0}), 2u);
  EXPECT_EQ(lists.Head({2, 10, 0}), 0u);
  EXPECT_EQ(lists.Head({1, 12, 0}), kNil);
  EXPECT_EQ(lists.list_count(), 3u);

  lists.Unlink(0, 0);
  EXPECT_FALSE(lists.Linked(0, 0));
  EXPECT_TRUE(lists.Linked(0, 1));
  EXPECT_EQ(lists.Head({1, 10, 0}), 1u);
  lists.Unlink(1, 0);
  EXPECT_EQ(lists.Head({1, 10, 0}), kNil);  // Emptied list is gone.
  EXPECT_EQ(lists.list_count(), 2u);
  lists.Unlink(1, 0);  // Unlinking twice is a no-op.
  EXPECT_EQ(lists.list_count(), 2u);
}

// Random pushes and unlinks over many keys (forcing growth, collisions and
// backward-shift deletions) checked against std::map of deques after every
// step.
TEST(KeyedListsTest, AgreesWithAMapOfDeques) {
  using Key = std::tuple<uint32_t, uint64_t, uint64_t>;
  for (uint64_t seed : {1u, 2u, 3u}) {
    Nodes nodes(4096);
    KeyedLists<Nodes> lists(&nodes);
    std::map<Key, std::deque<uint32_t>> model;
    std::vector<Key> where(4096);
    std::vector<bool> linked(4096, false);
    uint64_t state = seed;
    auto next = [&] {
      state += 0x9e3779b97f4a7c15ULL;
      uint64_t z = state;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      return z ^ (z >> 31);
    };
    for (int step = 0; step < 60000; ++step) {
      const uint32_t e = static_cast<uint32_t>(next() % where.size());
      if (!linked[e]) {
        // Few kinds and a key space that makes many lists, some long.
        Key k{static_cast<uint32_t>(next() % 3), next() % 700, next() % 2};
        lists.PushBack(e, 0, {std::get<0>(k), std::get<1>(k), std::get<2>(k)});
        model[k].push_back(e);
        where[e] = k;
        linked[e] = true;
      } else {
        lists.Unlink(e, 0);
        auto& q = model[where[e]];
        for (auto it = q.begin(); it != q.end(); ++it) {
          if (*it == e) {
            q.erase(it);
            break;
          }
        }
        if (q.empty()) model.erase(where[e]);
        linked[e] = false;
      }
      if (step % 997 == 0 || step > 59900) {
        ASSERT_EQ(lists.list_count(), model.size()) << "seed " << seed;
        for (const auto& [k, q] : model) {
          uint32_t got =
              lists.Head({std::get<0>(k), std::get<1>(k), std::get<2>(k)});
          for (uint32_t want : q) {
            ASSERT_EQ(got, want) << "seed " << seed << " step " << step;
            got = lists.Next(got, 0);
          }
          ASSERT_EQ(got, kNil);
        }
      }
    }
  }
}

// Lists that empty stay indexed for reuse, but a stream of ever-new keys must
// not grow the table: it is swept when it would otherwise grow.
TEST(KeyedListsTest, ChurnOfNewKeysKeepsTheTableBounded) {
  Nodes nodes(3);
  KeyedLists<Nodes> lists(&nodes);
  for (uint64_t k = 0; k < 100000; ++k) {
    lists.PushBack(0, 0, {0, k, 0});
    lists.PushBack(1, 0, {0, k + 1000000, 0});
    lists.Unlink(0, 0);
    lists.Unlink(1, 0);
    ASSERT_LE(lists.table_lists(), 8u) << "after key " << k;
  }
  EXPECT_EQ(lists.list_count(), 0u);
  // A list that empties and is refilled keeps working.
  lists.PushBack(2, 0, {0, 99999, 0});
  EXPECT_EQ(lists.Head({0, 99999, 0}), 2u);
}

}  // namespace
}  // namespace softfab::internal
