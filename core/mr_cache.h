// A registration cache for user buffers that the protocol must register itself
// (rendezvous sources and READ targets given without a descriptor).
//
// Registering memory (ibv_reg_mr) pins pages and costs tens of microseconds on
// hardware; a stream of large sends from the same buffers should pay it once.
// The cache keeps registrations by page-aligned address range and access,
// reuses one that covers a request, and evicts the least recently used idle
// ones beyond `entries_max` or `bytes_max`.
//
// The hazard every MR cache has: a cached registration keeps the *pages* it
// pinned, so if the application unmaps a buffer and a later mapping reuses the
// same addresses, a hit would send the old pages. Given an UnmapMonitor, the
// cache watches every range it keeps and forgets a registration once its
// range is unmapped, released or moved (libfabric and UCX watch memory the
// same way, with userfaultfd or hooks); a range the monitor cannot watch is
// registered for that use only. Without a monitor the cache trusts the
// application not to unmap buffers it sent from or received into (or to call
// Invalidate for them: sf_mr_reg and closing an sf_mr invalidate their range).
// Off, Acquire registers and Release deregisters.
//
// A registration refused with ENOMEM (the locked-memory limit) is tried once
// more after every idle registration is given back.
//
// Not thread-safe (one per domain, used from its endpoints' progress).
#ifndef SOFTFAB_CORE_MR_CACHE_H_
#define SOFTFAB_CORE_MR_CACHE_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>

#include "core/unmap_monitor.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

class MrCache {
 public:
  struct Options {
    bool enabled = false;
    uint32_t entries_max = 256;
    uint64_t bytes_max = uint64_t{1} << 30;  // registered bytes kept idle
  };
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;  // registrations made
    uint64_t evictions = 0;
    uint64_t invalidations = 0;
    uint64_t unmapped = 0;   // of the invalidations, seen by the monitor
    uint64_t unwatched = 0;  // registrations not kept: range not watchable
    uint64_t enomem_retries = 0;
  };

  // `monitor` (may be null) watches the ranges kept; see above.
  MrCache(transport::ProtectionDomain* pd, Options options,
          std::unique_ptr<UnmapMonitor> monitor = nullptr)
      : pd_(pd), options_(options), monitor_(std::move(monitor)) {}
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;
  // Deregisters everything; no registration may still be acquired.
  ~MrCache();

  // A registration covering [addr, addr + len) with at least `access`, held
  // until Release. Fails as ProtectionDomain::RegMr does.
  [[nodiscard]] StatusOr<transport::MemoryRegion*> Acquire(const void* addr,
                                                           uint64_t len,
                                                           uint32_t access);
  // Gives back what Acquire returned. Off: deregisters it.
  void Release(transport::MemoryRegion* mr);
  // Forgets every registration overlapping [addr, addr + len): idle ones are
  // deregistered now, held ones when released.
  void Invalidate(const void* addr, uint64_t len);

  const Stats& stats() const { return stats_; }
  uint64_t bytes_cached() const { return bytes_; }
  size_t entries() const { return by_start_.size(); }
  bool enabled() const { return options_.enabled; }
  bool watching() const { return monitor_ != nullptr; }

 private:
  struct Entry {
    transport::MemoryRegion* mr = nullptr;
    uint64_t start = 0, end = 0;  // page-aligned range registered
    uint32_t access = 0;
    uint32_t users = 0;
    bool stale = false;  // invalidated while held: deregister on release
    std::list<Entry*>::iterator lru;  // valid while idle
  };

  // Forgets what the monitor saw unmapped since the last look.
  void ApplyUnmaps();
  void Evict();
  // `memory_changed`: the monitor saw its range unmapped, released or moved.
  void Drop(Entry* e, bool memory_changed = false);
  // Every live entry overlapping [start, end), unwatched or not.
  template <typename Fn>
  void ForOverlapping(uint64_t start, uint64_t end, Fn fn);
  StatusOr<transport::MemoryRegion*> Register(uint64_t start, uint64_t len,
                                              uint32_t access);

  transport::ProtectionDomain* pd_;
  Options options_;
  std::unique_ptr<UnmapMonitor> monitor_;
  Stats stats_;
  uint64_t bytes_ = 0;
  // Live entries by start address (several may share a start).
  std::multimap<uint64_t, Entry*> by_start_;
  // Entries by their MR, to find them on Release (stale ones too).
  std::map<const transport::MemoryRegion*, Entry*> by_mr_;
  std::list<Entry*> idle_;  // least recently used first
  uint64_t longest_ = 0;    // longest range cached: bounds the lookup scan
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_MR_CACHE_H_
