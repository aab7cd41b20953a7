#include "backends/sim/internal/event_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "backends/sim/internal/rng.h"

namespace softfab::sim::internal {
namespace {

struct Payload {
  uint32_t id;
};

using Queue = EventQueue<Payload>;
using Reference = std::set<std::pair<uint64_t, uint64_t>>;  // (time, seq)

// Pops `q`'s earliest entry into `out`, which must be the least (time, seq)
// of `ref`; removes it from `ref`.
void PopLeast(Queue& q, Reference& ref, Queue::Entry* out) {
  ASSERT_FALSE(ref.empty());
  *out = q.Pop();
  ASSERT_EQ(std::make_pair(out->time_ns, out->seq), *ref.begin());
  ref.erase(ref.begin());
}

TEST(EventQueueTest, OrdersByTimeThenSchedulingOrder) {
  EventQueue<Payload> q;
  q.Push(50, {1});
  q.Push(10, {2});
  q.Push(50, {3});
  q.Push(10, {4});
  q.Push(0, {5});
  std::vector<uint32_t> order;
  while (!q.empty()) order.push_back(q.Pop().payload.id);
  EXPECT_EQ(order, (std::vector<uint32_t>{5, 2, 4, 1, 3}));
  EXPECT_EQ(q.size_max(), 5u);
  EXPECT_EQ(q.next_seq(), 5u);
}

TEST(EventQueueTest, MatchesASortedReferenceUnderRandomLoad) {
  // Mixed monotone streams (lanes) and scattered times (heap): every pop must
  // be the least (time, seq) present, checked against an ordered reference.
  Queue q;
  Reference ref;
  Rng r(3);
  uint64_t now = 0;
  size_t popped = 0;
  for (int round = 0; round < 50000; ++round) {
    const uint64_t kind = r.Below(4);
    if (kind != 0 || q.empty()) {
      const uint64_t t = kind == 1   ? now + 1000  // a fixed-latency stream
                         : kind == 2 ? now + 5000  // another
                                     : now + r.Below(20000);  // scattered
      const uint64_t seq = q.Push(t, {static_cast<uint32_t>(round)});
      ref.insert({t, seq});
    } else {
      Queue::Entry e;
      ASSERT_NO_FATAL_FAILURE(PopLeast(q, ref, &e));
      now = e.time_ns;
      ++popped;
    }
    ASSERT_EQ(q.size(), ref.size());
  }
  while (!q.empty()) {
    Queue::Entry e;
    ASSERT_NO_FATAL_FAILURE(PopLeast(q, ref, &e));
  }
  EXPECT_GT(popped, 5000u);
}

TEST(EventQueueTest, StreamsChangeWhereKeysWaitNotTheOrder) {
  // The same pushes, once with streams named (some streams not monotone, so
  // that their pushes fall back to the shared lanes and the heap) and once
  // without: every pop is the least (time, seq) present, and both queues give
  // the same sequence.
  using Q = Queue;
  Q named, plain;
  Reference ref;
  std::map<uint64_t, uint32_t> id_of;  // seq -> payload
  Rng r(11);
  uint64_t now = 0;
  size_t popped = 0;
  for (int round = 0; round < 50000; ++round) {
    const uint64_t kind = r.Below(6);
    if (kind != 0 || named.empty()) {
      int stream = Q::kNoStream;
      uint64_t t;
      switch (kind) {
        case 1:  // monotone: a fixed latency
          stream = 0;
          t = now + 1000;
          break;
        case 2:  // monotone: a timeout
          stream = 1;
          t = now + 70000;
          break;
        case 3:  // named, but jittered: often out of order in its lane
          stream = 2;
          t = now + 500 + r.Below(3000);
          break;
        case 4:  // named, at once
          stream = 3;
          t = now;
          break;
        default:  // scattered, unnamed
          t = now + r.Below(20000);
      }
      const uint32_t id = static_cast<uint32_t>(round);
      const bool look = !named.empty() && r.Below(3) == 0;
      if (look) {
        ASSERT_EQ(named.TopTime(), ref.begin()->first);  // now cached
      }
      const uint64_t seq = named.Push(t, {id}, stream);
      ASSERT_EQ(plain.Push(t, {id}), seq);
      ref.insert({t, seq});
      id_of[seq] = id;
      if (look) {  // the push may have made a new earliest entry
        ASSERT_EQ(named.TopTime(), ref.begin()->first);
        ASSERT_EQ(named.TopPayload().id, id_of[ref.begin()->second]);
      }
    } else {
      ASSERT_EQ(named.TopTime(), ref.begin()->first);
      Queue::Entry e;
      ASSERT_NO_FATAL_FAILURE(PopLeast(named, ref, &e));
      const Queue::Entry p = plain.Pop();
      ASSERT_EQ(std::make_pair(p.time_ns, p.seq),
                std::make_pair(e.time_ns, e.seq));
      ASSERT_EQ(e.payload.id, p.payload.id);
      now = e.time_ns;
      ++popped;
    }
    ASSERT_EQ(named.size(), ref.size());
  }
  while (!named.empty()) {
    Queue::Entry e;
    ASSERT_NO_FATAL_FAILURE(PopLeast(named, ref, &e));
    ASSERT_EQ(plain.Pop().payload.id, e.payload.id);
  }
  EXPECT_TRUE(plain.empty());
  EXPECT_GT(popped, 5000u);
}

TEST(EventQueueTest, AFullStreamLaneSpillsOverInOrder) {
  // More keys of one stream than a lane holds (kLaneMax): the rest wait in
  // the shared lanes, and all come out in order.
  EventQueue<Payload> q;
  constexpr uint32_t kKeys = (1u << 16) + 5000;
  for (uint32_t i = 0; i < kKeys; ++i) q.Push(i / 2, {i}, 0);
  q.Push(0, {kKeys}, 0);  // earlier than the lane's tail: elsewhere
  EXPECT_EQ(q.Pop().payload.id, 0u);
  EXPECT_EQ(q.Pop().payload.id, 1u);
  EXPECT_EQ(q.Pop().payload.id, kKeys);  // time 0, scheduled last
  for (uint32_t i = 2; i < kKeys; ++i) ASSERT_EQ(q.Pop().payload.id, i);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueueTest, CountersArePerInstance) {
  EventQueue<Payload> a, b;
  a.Push(1, {1});
  a.Push(1, {2});
  EXPECT_EQ(b.Push(1, {3}), 0u);  // b's sequence starts at 0 regardless of a
  EXPECT_EQ(a.next_seq(), 2u);
}

}  // namespace
}  // namespace softfab::sim::internal
