// Tests of the registration cache over the simulated HCA's protection domain.
#include "core/mr_cache.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
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

// The locked-memory limit as a device applies it: registrations beyond
// `limit` bytes fail with ENOMEM until some are deregistered.
class LimitedPd : public tp::ProtectionDomain {
 public:
  LimitedPd(tp::ProtectionDomain* inner, uint64_t limit)
      : inner_(inner), limit_(limit) {}
  StatusOr<tp::MemoryRegion*> RegMr(void* addr, uint64_t length,
                                    uint32_t access) override {
    if (locked_ + length > limit_) return Status(ENOMEM, "memlock");
    auto mr = inner_->RegMr(addr, length, access);
    if (!mr.ok()) return mr.status();
    locked_ += length;
    return new Mr(*mr, this);
  }
  StatusOr<tp::SharedReceiveQueue*> CreateSrq(const tp::SrqAttr& a) override {
    return inner_->CreateSrq(a);
  }
  StatusOr<tp::QueuePair*> CreateQp(const tp::QpInitAttr& a) override {
    return inner_->CreateQp(a);
  }
  StatusOr<tp::AddressHandle*> CreateAh(const tp::AhAttr& a) override {
    return inner_->CreateAh(a);
  }
  Status Destroy() override { return inner_->Destroy(); }
  uint64_t locked() const { return locked_; }

 private:
  class Mr : public tp::MemoryRegion {
   public:
    Mr(tp::MemoryRegion* inner, LimitedPd* pd) : inner_(inner), pd_(pd) {}
    uint64_t addr() const override { return inner_->addr(); }
    uint64_t length() const override { return inner_->length(); }
    uint32_t lkey() const override { return inner_->lkey(); }
    uint32_t rkey() const override { return inner_->rkey(); }
    uint32_t access() const override { return inner_->access(); }
    Status Destroy() override {
      pd_->locked_ -= inner_->length();
      const Status s = inner_->Destroy();
      delete this;
      return s;
    }

   private:
    tp::MemoryRegion* inner_;
    LimitedPd* pd_;
  };
  tp::ProtectionDomain* inner_;
  uint64_t limit_;
  uint64_t locked_ = 0;
};

TEST_F(MrCacheTest, RegistrationOverTheLimitGivesBackIdleOnesAndRetries) {
  LimitedPd limited(pd_, 3 * 4096);
  MrCache cache(&limited, On());
  auto a = cache.Acquire(at(0), 2 * 4096, tp::kAccessRemoteRead);
  ASSERT_TRUE(a.ok());
  // Held: nothing can be given back, so the limit's ENOMEM is the answer,
  // and nothing changes.
  auto refused = cache.Acquire(at(65536), 2 * 4096, tp::kAccessRemoteRead);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ENOMEM);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(cache.stats().enomem_retries, 0u);
  // Idle: it is deregistered and the registration tried again.
  cache.Release(*a);
  auto b = cache.Acquire(at(65536), 2 * 4096, tp::kAccessRemoteRead);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(cache.stats().enomem_retries, 1u);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(limited.locked(), 2u * 4096);
  cache.Release(*b);
}

// Anonymous memory of its own, so the tests can unmap and remap it.
class WatchedMrCacheTest : public MrCacheTest {
 protected:
  static constexpr size_t kLen = 16 * 4096;
  void SetUp() override {
    MrCacheTest::SetUp();
    auto monitor = UnmapMonitor::Open();
    if (!monitor.ok()) {
      GTEST_SKIP() << "no userfaultfd here: " << monitor.status().message();
    }
    cache_ = std::make_unique<MrCache>(pd_, On(), std::move(*monitor));
    map_ = static_cast<uint8_t*>(Map(nullptr, 0));
    ASSERT_NE(map_, nullptr);
  }
  void TearDown() override {
    cache_.reset();
    if (map_ != nullptr) munmap(map_, kLen);
  }
  // kLen bytes of `fill`, at `where` if given. `over`: replacing what is
  // mapped there (MAP_FIXED); else where nothing is, since a munmap (another
  // thread may have mapped the hole since: then it fails).
  static void* Map(void* where, uint8_t fill, bool over = false) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (where != nullptr) flags |= over ? MAP_FIXED : MAP_FIXED_NOREPLACE;
    void* p = mmap(where, kLen, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    memset(p, fill, kLen);
    return p;
  }
  // Acquires and releases [off, off + len) of the mapping; true on a hit.
  bool Use(size_t off, size_t len) {
    const uint64_t hits = cache_->stats().hits;
    auto mr = cache_->Acquire(map_ + off, len, tp::kAccessRemoteRead);
    EXPECT_TRUE(mr.ok());
    if (!mr.ok()) return false;
    cache_->Release(*mr);
    return cache_->stats().hits > hits;
  }

  std::unique_ptr<MrCache> cache_;
  uint8_t* map_ = nullptr;
};

TEST_F(WatchedMrCacheTest, AnUnmappedAndRemappedBufferIsRegisteredAgain) {
  EXPECT_FALSE(Use(0, kLen));
  EXPECT_TRUE(Use(0, kLen));
  // New memory at the same addresses: the old registration's pages are not
  // these, so it must not be found.
  ASSERT_EQ(munmap(map_, kLen), 0);
  ASSERT_EQ(Map(map_, 7), map_);
  EXPECT_FALSE(Use(0, kLen));
  EXPECT_EQ(cache_->stats().unmapped, 1u);
  EXPECT_EQ(cache_->entries(), 1u);
  EXPECT_TRUE(Use(0, kLen));
}

TEST_F(WatchedMrCacheTest, MappingOverAWatchedRangeIsSeen) {
  EXPECT_FALSE(Use(0, kLen));
  // MAP_FIXED over live memory unmaps it first, without a munmap call.
  ASSERT_EQ(Map(map_, 9, /*over=*/true), map_);
  EXPECT_FALSE(Use(0, kLen));
  EXPECT_EQ(cache_->stats().unmapped, 1u);
}

TEST_F(WatchedMrCacheTest, ReleasedPagesAreSeen) {
  EXPECT_FALSE(Use(0, 4 * 4096));
  EXPECT_FALSE(Use(8 * 4096, 4 * 4096));
  // MADV_DONTNEED gives the pages back: the next touch maps fresh zeroes.
  ASSERT_EQ(madvise(map_ + 8 * 4096, 4096, MADV_DONTNEED), 0);
  EXPECT_TRUE(Use(0, 4 * 4096));
  EXPECT_FALSE(Use(8 * 4096, 4 * 4096));
  EXPECT_EQ(cache_->stats().unmapped, 1u);
}

TEST_F(WatchedMrCacheTest, MovedMemoryIsSeen) {
  EXPECT_FALSE(Use(0, kLen));
  void* moved = mremap(map_, kLen, 2 * kLen, MREMAP_MAYMOVE);
  ASSERT_NE(moved, MAP_FAILED);
  if (moved == map_) {
    munmap(moved, 2 * kLen);
    map_ = nullptr;
    GTEST_SKIP() << "mremap grew in place; nothing moved";
  }
  map_ = static_cast<uint8_t*>(Map(map_, 3));  // the old addresses again
  ASSERT_NE(map_, nullptr);
  EXPECT_FALSE(Use(0, kLen));
  EXPECT_EQ(cache_->stats().unmapped, 1u);
  munmap(moved, 2 * kLen);
}

TEST_F(WatchedMrCacheTest, AnEntryDroppedBesideAnotherKeepsTheOtherWatched) {
  // Two entries sharing pages 4..7: dropping the first unwatches them, and
  // the second must be watched there again.
  EXPECT_FALSE(Use(0, 8 * 4096));
  EXPECT_FALSE(Use(4 * 4096, 8 * 4096));
  cache_->Invalidate(map_, 100);  // only the first starts there
  EXPECT_EQ(cache_->entries(), 1u);
  ASSERT_EQ(madvise(map_ + 5 * 4096, 4096, MADV_DONTNEED), 0);
  EXPECT_FALSE(Use(4 * 4096, 8 * 4096));
  EXPECT_EQ(cache_->stats().unmapped, 1u);
}

TEST_F(WatchedMrCacheTest, ForgettingUnmappedMemoryLeavesItsNewOwnerWatched) {
  // Two domains, as two endpoints of one process have: this cache held the
  // old mapping, the other caches the new one at the same addresses. This
  // cache forgetting its entry must not unwatch the other's memory.
  auto other_monitor = UnmapMonitor::Open();
  ASSERT_TRUE(other_monitor.ok());
  MrCache other(pd_, On(), std::move(*other_monitor));
  auto use_other = [&] {
    const uint64_t hits = other.stats().hits;
    auto mr = other.Acquire(map_, kLen, tp::kAccessRemoteRead);
    EXPECT_TRUE(mr.ok());
    if (mr.ok()) other.Release(*mr);
    return other.stats().hits > hits;
  };
  EXPECT_FALSE(Use(0, kLen));
  ASSERT_EQ(munmap(map_, kLen), 0);
  ASSERT_EQ(Map(map_, 5), map_);
  EXPECT_FALSE(use_other());
  EXPECT_FALSE(Use(0, kLen));  // this cache forgets the old mapping
  EXPECT_EQ(cache_->stats().unmapped, 1u);
  ASSERT_EQ(munmap(map_, kLen), 0);
  ASSERT_EQ(Map(map_, 6), map_);
  EXPECT_FALSE(use_other()) << "the other cache missed the unmap";
  EXPECT_EQ(other.stats().unmapped, 1u);
}

TEST_F(WatchedMrCacheTest, ARangeThatCannotBeWatchedIsUsedOnce) {
  // Another monitor watches the mapping already: this cache cannot, so it
  // keeps nothing there.
  auto other_monitor = UnmapMonitor::Open();
  ASSERT_TRUE(other_monitor.ok());
  MrCache other(pd_, On(), std::move(*other_monitor));
  EXPECT_FALSE(Use(0, kLen));
  auto mr = other.Acquire(map_, kLen, tp::kAccessRemoteRead);
  ASSERT_TRUE(mr.ok());
  other.Release(*mr);
  EXPECT_EQ(other.stats().unwatched, 1u);
  EXPECT_EQ(other.entries(), 0u);
  EXPECT_EQ(other.bytes_cached(), 0u);
}

TEST_F(WatchedMrCacheTest, MoreChangesThanRecordedForgetEverything) {
  // 65 watched mappings unmapped between two looks: more than the monitor
  // names, so every entry goes, the untouched one too.
  std::vector<void*> maps;
  for (size_t i = 0; i <= UnmapMonitor::kRangesMax; ++i) {
    void* p = Map(nullptr, 1);
    ASSERT_NE(p, nullptr);
    auto mr = cache_->Acquire(p, 4096, tp::kAccessRemoteRead);
    ASSERT_TRUE(mr.ok());
    cache_->Release(*mr);
    maps.push_back(p);
  }
  EXPECT_FALSE(Use(0, 4096));
  EXPECT_EQ(cache_->entries(), UnmapMonitor::kRangesMax + 2);
  for (void* p : maps) munmap(p, kLen);
  EXPECT_FALSE(Use(0, 4096));
  EXPECT_EQ(cache_->stats().unmapped, UnmapMonitor::kRangesMax + 2);
}

}  // namespace
}  // namespace softfab::core
