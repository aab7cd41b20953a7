#include "core/matcher.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace softfab {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};

PostedReceive Recv(uint64_t tag, uint64_t ignore, uint64_t source,
                   uint64_t context, bool multi = false) {
  return PostedReceive{tag, ignore, source, context, multi};
}

// Context of the receive a message (tag, source) lands in; 0 when it is queued.
uint64_t Arrive(TagMatcher& m, uint64_t tag, uint64_t source,
                uint64_t cookie = 1) {
  auto r = m.ArriveOrQueue({tag, source, cookie});
  return r.matched ? r.matched->context : 0;
}

TEST(TagMatcherTest, ExactTagMatchesOnlyThatTag) {
  TagMatcher m;
  m.AddReceive(Recv(0x10, 0, kAnySource, 1));
  EXPECT_EQ(Arrive(m, 0x11, 5), 0u);
  EXPECT_EQ(m.unexpected_count(), 1u);
  EXPECT_EQ(Arrive(m, 0x10, 5), 1u);
  EXPECT_EQ(m.posted_count(), 0u);
}

TEST(TagMatcherTest, IgnoreMaskFollowsTheManPageRule) {
  // send_tag & ~ignore == recv_tag & ~ignore
  TagMatcher m;
  m.AddReceive(Recv(0xAB00, 0x00FF, kAnySource, 7));
  EXPECT_EQ(Arrive(m, 0xAC42, 1), 0u);  // Differs in a bit that is not ignored.
  EXPECT_EQ(Arrive(m, 0xAB42, 1), 7u);
  // Bits set in the receive's tag under the mask do not matter either.
  m.AddReceive(Recv(0xABFF, 0x00FF, kAnySource, 8));
  EXPECT_EQ(Arrive(m, 0xAB00, 1), 8u);
}

TEST(TagMatcherTest, DirectedReceiveTakesOnlyItsSource) {
  TagMatcher m;
  m.AddReceive(Recv(1, 0, /*source=*/3, 30));
  EXPECT_EQ(Arrive(m, 1, 4), 0u);
  EXPECT_EQ(Arrive(m, 1, 3), 30u);
}

TEST(TagMatcherTest, FirstPostedWinsAcrossDirectedAndWildcard) {
  // Wildcard posted first wins over a later exact directed receive, and the
  // other way round.
  TagMatcher m;
  m.AddReceive(Recv(0, kAll, kAnySource, 1));  // Any tag, any source.
  m.AddReceive(Recv(5, 0, 2, 2));              // Exact tag, directed.
  m.AddReceive(Recv(5, 0, kAnySource, 3));     // Exact tag, any source.
  EXPECT_EQ(Arrive(m, 5, 2), 1u);
  EXPECT_EQ(Arrive(m, 5, 2), 2u);
  EXPECT_EQ(Arrive(m, 5, 2), 3u);

  m.AddReceive(Recv(5, 0, 2, 4));
  m.AddReceive(Recv(0, kAll, 2, 5));
  m.AddReceive(Recv(4, 1, kAnySource, 6));
  EXPECT_EQ(Arrive(m, 5, 2), 4u);
  EXPECT_EQ(Arrive(m, 5, 2), 5u);
  EXPECT_EQ(Arrive(m, 5, 2), 6u);
}

// A receive posted into an empty matcher is matched on its own (no lists);
// when more are posted it is linked first, so it keeps its place; once it
// is taken, the next one posted alone is matched on its own again.
TEST(TagMatcherTest, AReceivePostedAloneKeepsItsPlace) {
  TagMatcher m;
  m.AddReceive(Recv(0x1000, 0xFF, kAnySource, 1));  // alone: any low byte
  EXPECT_EQ(Arrive(m, 0x2000, 3), 0u);              // queued, not matched
  m.AddReceive(Recv(0x1011, 0, kAnySource, 2));     // exact, posted second
  m.AddReceive(Recv(0x1011, 0, 3, 3));              // directed, posted third
  EXPECT_EQ(Arrive(m, 0x1011, 3), 1u);  // all three match: the first wins
  EXPECT_EQ(Arrive(m, 0x1011, 3), 2u);
  EXPECT_EQ(Arrive(m, 0x1011, 3), 3u);
  EXPECT_EQ(m.posted_count(), 0u);
  m.AddReceive(Recv(0x30, 0, 4, 4));  // alone again, directed to 4
  EXPECT_EQ(Arrive(m, 0x30, 5), 0u);
  EXPECT_EQ(Arrive(m, 0x31, 4), 0u);
  EXPECT_EQ(Arrive(m, 0x30, 4), 4u);
  // Removed while alone (a cancel), then a new one alone.
  const ReceiveHandle h = m.AddReceive(Recv(0x40, 0, kAnySource, 5));
  m.RemoveReceive(h);
  EXPECT_EQ(m.posted_count(), 0u);
  EXPECT_EQ(Arrive(m, 0x40, 1), 0u);
  m.AddReceive(Recv(0x41, 0, kAnySource, 6));
  EXPECT_EQ(Arrive(m, 0x41, 1), 6u);
  EXPECT_EQ(m.unexpected_count(), 4u);
}

TEST(TagMatcherTest, UnexpectedAreTakenOldestFirst) {
  TagMatcher m;
  for (uint64_t i = 1; i <= 4; ++i)
    Arrive(m, /*tag=*/i % 2, /*source=*/9, /*cookie=*/i);
  // Tags: 1,0,1,0 with cookies 1..4. A receive for tag 0 takes cookie 2,
  // then 4.
  auto r = m.PostOrMatch(Recv(0, 0, kAnySource, 100));
  ASSERT_TRUE(r.matched);
  EXPECT_EQ(r.matched->cookie, 2u);
  r = m.PostOrMatch(
      Recv(0, kAll, kAnySource, 101));  // Any tag: oldest overall.
  ASSERT_TRUE(r.matched);
  EXPECT_EQ(r.matched->cookie, 1u);
  r = m.PostOrMatch(Recv(0, 0, kAnySource, 102));
  ASSERT_TRUE(r.matched);
  EXPECT_EQ(r.matched->cookie, 4u);
  r = m.PostOrMatch(Recv(0, 0, kAnySource, 103));
  EXPECT_FALSE(r.matched);
  EXPECT_EQ(m.posted_count(), 1u);
  EXPECT_EQ(m.unexpected_count(), 1u);
}

TEST(TagMatcherTest, DirectedReceiveSkipsOtherSourcesInUnexpected) {
  TagMatcher m;
  Arrive(m, 7, 1, 11);
  Arrive(m, 7, 2, 12);
  auto r = m.PostOrMatch(Recv(7, 0, 2, 1));
  ASSERT_TRUE(r.matched);
  EXPECT_EQ(r.matched->cookie, 12u);
  EXPECT_EQ(r.matched->source, 2u);
}

TEST(TagMatcherTest, MultiRecvStaysPostedInItsPlace) {
  TagMatcher m;
  m.AddReceive(Recv(0, kAll, kAnySource, 1, /*multi=*/true));
  m.AddReceive(Recv(3, 0, kAnySource, 2));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Arrive(m, 3, 1), 1u);
  EXPECT_EQ(m.posted_count(), 2u);
  // The owner retires the buffer when it runs out of room; the next one
  // matches.
  m.RemoveReceive(*m.FindReceiveByContext(1));
  EXPECT_EQ(Arrive(m, 3, 1), 2u);
  // A multi-recv post that drains an unexpected message stays queued for more.
  Arrive(m, 4, 1, 44);
  auto r = m.PostOrMatch(Recv(0, kAll, kAnySource, 5, true));
  ASSERT_TRUE(r.matched);
  EXPECT_EQ(r.matched->cookie, 44u);
  EXPECT_EQ(m.posted_count(), 1u);
  EXPECT_EQ(Arrive(m, 9, 1), 5u);
}

TEST(TagMatcherTest, CancelByContextRemovesOldestWithThatContext) {
  TagMatcher m;
  m.AddReceive(Recv(1, 0, kAnySource, 50));
  m.AddReceive(Recv(2, 0, kAnySource, 60));
  m.AddReceive(Recv(3, 0, kAnySource, 50));
  auto h = m.FindReceiveByContext(50);
  ASSERT_TRUE(h);
  EXPECT_EQ(m.receive(*h).tag, 1u);
  m.RemoveReceive(*h);
  EXPECT_EQ(Arrive(m, 1, 1), 0u);  // Cancelled: now unexpected.
  EXPECT_EQ(Arrive(m, 2, 1), 60u);
  h = m.FindReceiveByContext(50);
  ASSERT_TRUE(h);
  EXPECT_EQ(m.receive(*h).tag, 3u);
  EXPECT_FALSE(m.FindReceiveByContext(99));
}

TEST(TagMatcherTest, PeekClaimDiscard) {
  TagMatcher m;
  Arrive(m, 1, 1, 10);
  Arrive(m, 2, 1, 20);
  Arrive(m, 1, 1, 30);
  // Peek does not remove.
  auto p = m.FindUnexpected(1, 0, kAnySource);
  ASSERT_TRUE(p);
  EXPECT_EQ(m.message(*p).cookie, 10u);
  EXPECT_EQ(m.message(*m.FindUnexpected(1, 0, kAnySource)).cookie, 10u);
  // Claim takes it out of matching; the next peek finds the next one.
  m.Claim(*p, /*context=*/777);
  EXPECT_TRUE(m.claimed(*p));
  EXPECT_EQ(m.message(*m.FindUnexpected(1, 0, kAnySource)).cookie, 30u);
  EXPECT_FALSE(m.FindClaimed(778));
  auto c = m.FindClaimed(777);
  ASSERT_TRUE(c);
  EXPECT_EQ(m.message(*c).cookie, 10u);
  m.RemoveUnexpected(*c);
  EXPECT_FALSE(m.FindClaimed(777));
  // Discard (peek then remove).
  auto d = m.FindUnexpected(2, 0, kAnySource);
  ASSERT_TRUE(d);
  m.RemoveUnexpected(*d);
  EXPECT_FALSE(m.FindUnexpected(2, 0, kAnySource));
  // A claimed message is not matched by arriving receives either.
  auto q = m.FindUnexpected(1, 0, kAnySource);
  m.Claim(*q, 5);
  EXPECT_FALSE(m.PostOrMatch(Recv(1, 0, kAnySource, 1)).matched);
  EXPECT_EQ(m.unexpected_count(), 1u);
}

TEST(TagMatcherTest, ManyMasksBeyondTheIndexedClassesStayCorrect) {
  TagMatcher m;
  constexpr int kMasks = TagMatcher::kDynamicMaskClasses + 6;
  for (int i = 0; i < 64; ++i) Arrive(m, static_cast<uint64_t>(i), 1, 1000 + i);
  // Every receive uses its own mask (a distinct high bit, never set in a tag)
  // and ignores bits 1..5, so it matches exactly the even tags. More masks than
  // the unexpected side indexes, so the later ones take the scanning fallback.
  std::vector<uint64_t> got;
  for (int k = 0; k < kMasks; ++k) {
    const uint64_t ignore = 0x3E | (uint64_t{1} << (20 + k));
    auto r = m.PostOrMatch(Recv(0, ignore, kAnySource, 1));
    ASSERT_TRUE(r.matched);
    got.push_back(r.matched->cookie);
  }
  // Each takes the oldest remaining even tag: 0, 2, 4, ...
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 1000 + 2 * i);
  EXPECT_EQ(m.unexpected_count(), 64u - kMasks);
}

TEST(TagMatcherTest, HandlesAreReusedAndCountsTrack) {
  TagMatcher m;
  ReceiveHandle a = m.AddReceive(Recv(1, 0, kAnySource, 1));
  m.RemoveReceive(a);
  ReceiveHandle b = m.AddReceive(Recv(2, 0, kAnySource, 2));
  EXPECT_EQ(a, b);
  EXPECT_EQ(m.receive(b).tag, 2u);
  EXPECT_EQ(m.posted_count(), 1u);
  // The stale tag no longer matches anything.
  EXPECT_EQ(Arrive(m, 1, 1), 0u);
  EXPECT_EQ(Arrive(m, 2, 1), 2u);
}

TEST(TagMatcherTest, TwoMatchersAreIndependent) {
  TagMatcher a, b;
  a.AddReceive(Recv(1, 0, kAnySource, 1));
  EXPECT_EQ(Arrive(b, 1, 1), 0u);
  EXPECT_EQ(b.unexpected_count(), 1u);
  EXPECT_EQ(a.unexpected_count(), 0u);
  EXPECT_EQ(Arrive(a, 1, 1), 1u);
}

}  // namespace
}  // namespace softfab
