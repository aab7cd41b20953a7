// Tests of the registration cache over the simulated HCA's protection domain.
#include "core/mr_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backends/sim/sim_fabric.h"

namespace softfab::core {
namespace {

namespace tp = ::softfab::transport;

class MrCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SimConfig config;
    config.nodes = 1;
    fabric_ = sim::CreateSimFabric(config);
    ASSERT_NE(fabric_, nullptr);
    auto pd = fabric_->device(0)->AllocPd();
    ASSERT_TRUE(pd.ok());
    pd_ = *pd;
    buf_.resize((1 << 20) + 4096);
    const uint64_t raw = reinterpret_cast<uint64_t>(buf_.data());
    base_ = buf_.data() + ((4096 - raw % 4096) % 4096);
  }
  MrCache::Options On(uint32_t entries = 256, uint64_t bytes = 1 << 30) {
    MrCache::Options o;
    o.enabled = true;
    o.entries_max = entries;
    o.bytes_max = bytes;
    return o;
  }
  // Offsets from a page-aligned base, so the page rounding is predictable.
  uint8_t* at(size_t off) { return base_ + off; }

  std::unique_ptr<sim::SimFabric> fabric_;
  tp::ProtectionDomain* pd_ = nullptr;
  std::vector<uint8_t> buf_;
  uint8_t* base_ = nullptr;
};

TEST_F(MrCacheTest, OffRegistersAndDeregistersEveryTime) {
  MrCache cache(pd_, MrCache::Options{});
  auto a = cache.Acquire(at(100), 5000, tp::kAccessRemoteRead);
  ASSERT_TRUE(a.ok());
  const uint32_t key = (*a)->lkey();
  EXPECT_EQ((*a)->addr(), reinterpret_cast<uint64_t>(at(100)));
  EXPECT_EQ((*a)->length(), 5000u);
  cache.Release(*a);
  auto b = cache.Acquire(at(100), 5000, tp::kAccessRemoteRead);
  ASSERT_TRUE(b.ok());
  EXPECT_NE((*b)->lkey(), key) << "a second registration was expected";
  cache.Release(*b);
  EXPECT_EQ(cache.entries(), 0u);
  // The PD is free again: every registration was deregistered.
  EXPECT_TRUE(pd_->Destroy().ok());
  pd_ = nullptr;
}

TEST_F(MrCacheTest, CoveringRegistrationIsReused) {
  MrCache cache(pd_, On());
  auto a = cache.Acquire(at(8192 + 10), 20000, tp::kAccessRemoteRead);
  ASSERT_TRUE(a.ok());
  // Page-aligned and covering the request.
  EXPECT_LE((*a)->addr(), reinterpret_cast<uint64_t>(at(8192 + 10)));
  EXPECT_GE((*a)->addr() + (*a)->length(),
            reinterpret_cast<uint64_t>(at(8192 + 10 + 20000)));
  cache.Release(*a);
  auto b = cache.Acquire(at(8192 + 500), 1000, tp::kAccessRemoteRead);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, *a);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  // Wider than the cached range, or other access: a new registration.
  auto c = cache.Acquire(at(0), 64 * 1024, tp::kAccessRemoteRead);
  auto d = cache.Acquire(at(8192 + 500), 1000, tp::kAccessLocalWrite);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_NE(*c, *a);
  EXPECT_NE(*d, *a);
  EXPECT_EQ(cache.stats().misses, 3u);
  for (auto* mr : {*b, *c, *d}) cache.Release(mr);
  EXPECT_EQ(cache.entries(), 3u);
}

TEST_F(MrCacheTest, IdleEntriesAreEvictedLeastRecentlyUsedFirst) {
  MrCache cache(pd_, On(/*entries=*/2));
  tp::MemoryRegion* mr[3];
  for (int i = 0; i < 3; ++i) {
    auto m = cache.Acquire(at(i * 65536), 4096, tp::kAccessRemoteRead);
    ASSERT_TRUE(m.ok());
    mr[i] = *m;
  }
  // All three are held: none can go yet.
  EXPECT_EQ(cache.entries(), 3u);
  cache.Release(mr[1]);  // idle, over the limit: evicted at once
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  cache.Release(mr[0]);
  cache.Release(mr[2]);
  EXPECT_EQ(cache.entries(), 2u);
  // mr[0] is the least recently used idle one: a new entry pushes it out.
  auto e = cache.Acquire(at(5 * 65536), 4096, tp::kAccessRemoteRead);
  ASSERT_TRUE(e.ok());
  cache.Release(*e);
  auto again2 = cache.Acquire(at(2 * 65536), 4096, tp::kAccessRemoteRead);
  ASSERT_TRUE(again2.ok());
  EXPECT_EQ(cache.stats().hits, 1u);
  cache.Release(*again2);
  auto again0 = cache.Acquire(at(0), 4096, tp::kAccessRemoteRead);
  ASSERT_TRUE(again0.ok());
  EXPECT_EQ(cache.stats().hits, 1u) << "mr[0] should have been evicted";
  cache.Release(*again0);
}

TEST_F(MrCacheTest, BytesLimitBoundsWhatStaysRegistered) {
  MrCache cache(pd_, On(/*entries=*/100, /*bytes=*/3 * 4096));
  for (int i = 0; i < 10; ++i) {
    auto m = cache.Acquire(at(i * 8192), 4096, tp::kAccessRemoteRead);
    ASSERT_TRUE(m.ok());
    cache.Release(*m);
    EXPECT_LE(cache.bytes_cached(), 3u * 4096);
  }
  EXPECT_EQ(cache.entries(), 3u);
}

TEST_F(MrCacheTest, InvalidateDropsIdleNowAndHeldOnRelease) {
  MrCache cache(pd_, On());
  auto held = cache.Acquire(at(0), 4096, tp::kAccessRemoteRead);
  auto idle = cache.Acquire(at(65536), 4096, tp::kAccessRemoteRead);
  auto other = cache.Acquire(at(512 * 1024), 4096, tp::kAccessRemoteRead);
  ASSERT_TRUE(held.ok() && idle.ok() && other.ok());
  cache.Release(*idle);
  cache.Release(*other);
  cache.Invalidate(at(100), 70000);  // overlaps `held` and `idle` only
  EXPECT_EQ(cache.stats().invalidations, 2u);
  EXPECT_EQ(cache.entries(), 1u);
  // The held registration still works until released...
  EXPECT_EQ((*held)->addr(), reinterpret_cast<uint64_t>(at(0)));
  cache.Release(*held);
  // ...and is not found afterwards: the range registers afresh.
  auto again = cache.Acquire(at(0), 4096, tp::kAccessRemoteRead);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache.stats().misses, 4u);
  cache.Release(*again);
  auto kept = cache.Acquire(at(512 * 1024), 100, tp::kAccessRemoteRead);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, *other);
  cache.Release(*kept);
}

TEST_F(MrCacheTest, RefusedRegistrationChangesNothing) {
  MrCache cache(pd_, On());
  auto bad = cache.Acquire(at(0), 4096, 1u << 20);  // unknown access bit
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), EINVAL);
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.bytes_cached(), 0u);
}

}  // namespace
}  // namespace softfab::core
