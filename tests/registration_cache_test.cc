// The registration cache against unmapped and remapped buffers, per backend
// (fabric.h, SF_VERBS_MR_CACHE): buffers softfab registers itself (a
// rendezvous send's source, the receive buffer its READ lands in) are
// unmapped after each transfer and new memory is mapped at the same addresses
// (MAP_FIXED_NOREPLACE) with new bytes; every transfer must read and write the
// new pages. A registration kept for the old pages with nobody watching unmaps
// would have the device send the old bytes and land the received ones in the
// old pages, where the new mapping never shows them. The simulator reads live
// memory, so only the verbs instance can show stale pages; the simulator's
// instances hold the protocol to the same steps.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

constexpr size_t kSize = 1 << 20;  // far above the eager size: rendezvous

// kSize bytes of `fill` mapped at `where`, or anywhere. At `where` only if
// nothing is mapped there (another thread may have taken the addresses since
// they were unmapped: then this fails rather than replacing its memory).
uint8_t* Map(void* where, uint8_t fill) {
  void* p = mmap(
      where, kSize, PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS | (where ? MAP_FIXED_NOREPLACE : 0), -1, 0);
  if (p == MAP_FAILED) return nullptr;
  std::memset(p, fill, kSize);
  return static_cast<uint8_t*>(p);
}

// The registration cache's settings a case runs under.
struct Mode {
  const char* name;
  uint32_t verbs_flags;
};

class RegistrationCacheTest : public ::softfab::testing::PerBackendTest {
 protected:
  // Rounds of one rendezvous message from `src` into `dst`; after each of
  // the first kRemapped, both buffers are unmapped and mapped afresh at the
  // same addresses. The caches' counters of both ends go to `stats`.
  static constexpr int kRounds = 6, kRemapped = 4;
  void RemapBetweenSends(uint32_t verbs_flags, sf_mr_cache_stats stats[2]) {
    Fixture f;
    f.adjust_fabric = [&](sf_fabric_attr* fa) {
      fa->verbs_flags |= verbs_flags;
    };
    ASSERT_TRUE(f.Open(backend(), 2));
    uint8_t* src = Map(nullptr, 0);
    uint8_t* dst = Map(nullptr, 0xEE);
    ASSERT_TRUE(src != nullptr && dst != nullptr);
    for (int round = 0; round < kRounds; ++round) {
      const std::vector<uint8_t> want = Pattern(kSize, 100 + round);
      std::memcpy(src, want.data(), kSize);
      ASSERT_EQ(sf_trecv(f.peers[1].ep, dst, kSize, nullptr, SF_ADDR_UNSPEC,
                         round, 0, nullptr),
                0)
          << sf_last_error();
      ASSERT_EQ(sf_tsend(f.peers[0].ep, src, kSize, nullptr, f.peers[0].addr[1],
                         round, nullptr),
                0)
          << sf_last_error();
      std::vector<sf_cq_tagged_entry> ok;
      std::vector<sf_cq_err_entry> err;
      f.Collect(1, 1, &ok, &err);
      f.Collect(0, 1, &ok, &err);
      ASSERT_TRUE(err.empty()) << sf_strerror(err[0].err);
      size_t wrong = 0;
      for (size_t i = 0; i < kSize; ++i) wrong += dst[i] != want[i];
      EXPECT_EQ(wrong, 0u) << "round " << round << ": bytes not as sent";
      if (round >= kRemapped) continue;
      // New memory at the same addresses: the receive side starts as 0xEE
      // again, the send side is written next round.
      ASSERT_EQ(munmap(src, kSize), 0);
      ASSERT_EQ(munmap(dst, kSize), 0);
      ASSERT_EQ(Map(src, 0), src);
      ASSERT_EQ(Map(dst, 0xEE), dst);
    }
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(sf_mr_cache_query(f.peers[i].domain, &stats[i]), 0);
    }
    munmap(src, kSize);
    munmap(dst, kSize);
  }
  // What a cache that watches unmaps counts at each end: a registration per
  // remapped round and one more, then a hit; each remap seen.
  static void ExpectWatched(const sf_mr_cache_stats stats[2]) {
    for (int i = 0; i < 2; ++i) {
      SCOPED_TRACE(i == 0 ? "sender" : "receiver");
      EXPECT_TRUE(stats[i].enabled);
      EXPECT_EQ(stats[i].misses, uint64_t{kRemapped + 1});
      EXPECT_EQ(stats[i].hits, uint64_t{kRounds - kRemapped - 1});
      EXPECT_EQ(stats[i].unmapped, uint64_t{kRemapped});
      EXPECT_EQ(stats[i].entries, 1u);
    }
  }
  bool OnVerbs() const { return backend().backend == SF_BACKEND_VERBS; }
};

// The default on a device: the cache on, watching unmaps. The simulator
// keeps nothing (it reads live memory and registering costs it nothing).
TEST_P(RegistrationCacheTest, ByDefaultARemappedBufferCarriesItsNewBytes) {
  sf_mr_cache_stats stats[2];
  RemapBetweenSends(0, stats);
  if (HasFatalFailure()) return;
  if (!OnVerbs()) {
    EXPECT_FALSE(stats[0].enabled || stats[1].enabled);
    return;
  }
  if (!stats[0].watching) {
    EXPECT_FALSE(stats[0].enabled);
    GTEST_SKIP() << "no userfaultfd here: the cache is off by default";
  }
  ExpectWatched(stats);
}

// The application's promise asked for: where unmaps can be watched they still
// are, so the same holds.
TEST_P(RegistrationCacheTest, WithTheCacheAskedForARemappedBufferIsSeen) {
  sf_mr_cache_stats stats[2];
  RemapBetweenSends(SF_VERBS_MR_CACHE, stats);
  if (HasFatalFailure() || !OnVerbs()) return;
  if (!stats[0].watching) {
    GTEST_SKIP() << "no userfaultfd here: the promise alone is trusted";
  }
  ExpectWatched(stats);
}

TEST_P(RegistrationCacheTest, WithoutTheCacheEveryTransferRegistersAfresh) {
  sf_mr_cache_stats stats[2];
  RemapBetweenSends(SF_VERBS_NO_MR_CACHE, stats);
  if (HasFatalFailure()) return;
  for (const auto& s : stats) {
    EXPECT_FALSE(s.enabled);
    EXPECT_FALSE(s.watching);
    EXPECT_EQ(s.hits + s.misses, 0u);
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(RegistrationCacheTest);

// Contradictory settings are refused before any device is looked for.
TEST(RegistrationCacheSettings, BothFlagsAreRefused) {
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_VERBS;
  fa.verbs_flags = SF_VERBS_MR_CACHE | SF_VERBS_NO_MR_CACHE;
  sf_fabric* f = nullptr;
  EXPECT_EQ(sf_fabric_open(&fa, &f, nullptr), -SF_EINVAL);
  EXPECT_EQ(f, nullptr);
  EXPECT_NE(std::strstr(sf_last_error(), "SF_VERBS_NO_MR_CACHE"), nullptr)
      << sf_last_error();
}

TEST(RegistrationCacheSettings, AnUnknownEnvironmentValueIsRefused) {
  ASSERT_EQ(setenv("SOFTFAB_MR_CACHE", "yes", 1), 0);
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_VERBS;
  sf_fabric* f = nullptr;
  const int rc = sf_fabric_open(&fa, &f, nullptr);
  unsetenv("SOFTFAB_MR_CACHE");
  EXPECT_EQ(rc, -SF_EINVAL);
  EXPECT_NE(std::strstr(sf_last_error(), "SOFTFAB_MR_CACHE"), nullptr)
      << sf_last_error();
}

}  // namespace
