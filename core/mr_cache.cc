// The registration cache (see mr_cache.h).
#include "core/mr_cache.h"

#include <errno.h>

#include <vector>

namespace softfab::core {
namespace {

namespace tp = ::softfab::transport;

constexpr uint64_t kPage = 4096;

}  // namespace

MrCache::~MrCache() {
  for (auto& [mr, e] : by_mr_) {
    (void)e->mr->Destroy();
    delete e;
  }
}

StatusOr<tp::MemoryRegion*> MrCache::Acquire(const void* addr, uint64_t len,
                                             uint32_t access) {
  const uint64_t at = reinterpret_cast<uint64_t>(addr);
  if (!options_.enabled) {
    return pd_->RegMr(const_cast<void*>(addr), len, access);
  }
  ApplyUnmaps();
  // A live entry starting at or below `at` that covers the request: scan
  // down from `at` no further than the longest cached range reaches.
  for (auto it = by_start_.upper_bound(at); it != by_start_.begin();) {
    --it;
    Entry* e = it->second;
    if (at - e->start > longest_) break;
    if (e->end >= at + len && (e->access & access) == access) {
      if (e->users++ == 0) idle_.erase(e->lru);
      ++stats_.hits;
      return e->mr;
    }
  }
  const uint64_t start = at & ~(kPage - 1);
  const uint64_t end = (at + len + kPage - 1) & ~(kPage - 1);
  auto made = Register(start, end - start, access);
  if (!made.ok()) return made.status();
  ++stats_.misses;
  auto* e = new Entry;
  e->mr = *made;
  e->start = start;
  e->end = end;
  e->access = access;
  e->users = 1;
  by_mr_.emplace(e->mr, e);
  if (monitor_ != nullptr && !monitor_->Watch(start, end)) {
    // Nobody would tell us if these pages went: use it this once.
    ++stats_.unwatched;
    e->stale = true;
    return e->mr;
  }
  by_start_.emplace(start, e);
  bytes_ += end - start;
  if (end - start > longest_) longest_ = end - start;
  return e->mr;
}

void MrCache::Release(tp::MemoryRegion* mr) {
  if (!options_.enabled) {
    (void)mr->Destroy();
    return;
  }
  ApplyUnmaps();  // before Evict may unwatch anything
  auto found = by_mr_.find(mr);
  if (found == by_mr_.end()) return;
  Entry* e = found->second;
  if (--e->users > 0) return;
  if (e->stale) {
    by_mr_.erase(found);
    (void)e->mr->Destroy();
    delete e;
    return;
  }
  e->lru = idle_.insert(idle_.end(), e);
  Evict();
}

StatusOr<tp::MemoryRegion*> MrCache::Register(uint64_t start, uint64_t len,
                                              uint32_t access) {
  void* addr = reinterpret_cast<void*>(start);
  auto made = pd_->RegMr(addr, len, access);
  if (made.ok() || made.status().code() != ENOMEM || idle_.empty()) {
    return made;
  }
  // Over the locked-memory limit: what is kept idle is the first to give.
  ++stats_.enomem_retries;
  while (!idle_.empty()) {
    ++stats_.evictions;
    Drop(idle_.front());
  }
  return pd_->RegMr(addr, len, access);
}

template <typename Fn>
void MrCache::ForOverlapping(uint64_t start, uint64_t end, Fn fn) {
  auto it = by_start_.lower_bound(start > longest_ ? start - longest_ : 0);
  while (it != by_start_.end() && it->first < end) {
    Entry* e = it->second;
    ++it;  // fn may drop e
    if (e->end > start) fn(e);
  }
}

void MrCache::Invalidate(const void* addr, uint64_t len) {
  if (!options_.enabled || len == 0) return;
  ApplyUnmaps();  // before anything is unwatched
  const uint64_t at = reinterpret_cast<uint64_t>(addr);
  ForOverlapping(at, at + len, [this](Entry* e) {
    ++stats_.invalidations;
    Drop(e);
  });
}

void MrCache::ApplyUnmaps() {
  if (monitor_ == nullptr) return;
  UnmapMonitor::Changes changed;
  monitor_->TakeChanged(&changed);
  auto forget = [this](Entry* e) {
    ++stats_.invalidations;
    ++stats_.unmapped;
    Drop(e, /*memory_changed=*/true);
  };
  if (changed.overflowed) {  // too many to name: forget everything
    while (!by_start_.empty()) forget(by_start_.begin()->second);
    return;
  }
  for (size_t i = 0; i < changed.count; ++i) {
    ForOverlapping(changed.ranges[i].start, changed.ranges[i].end, forget);
  }
}

void MrCache::Evict() {
  while (!idle_.empty() && (by_start_.size() > options_.entries_max ||
                            bytes_ > options_.bytes_max)) {
    ++stats_.evictions;
    Drop(idle_.front());
  }
}

// Takes `e` out of the lookup; deregisters it now if idle, else on release.
void MrCache::Drop(Entry* e, bool memory_changed) {
  for (auto it = by_start_.lower_bound(e->start);
       it != by_start_.end() && it->first == e->start; ++it) {
    if (it->second == e) {
      by_start_.erase(it);
      break;
    }
  }
  bytes_ -= e->end - e->start;
  if (monitor_ != nullptr && !memory_changed) {
    // Unwatching drops the watch from pages other entries may share: those
    // are watched again, and one that cannot be is forgotten too. Memory
    // seen unmapped or moved is not unwatched: its watch went with it, and
    // the addresses may be another mapping now, watched by another monitor
    // (Linux 6.1 lets one userfaultfd unregister another's range).
    // Released pages (MADV_DONTNEED) stay watched: a later event there finds
    // no entry and costs nothing.
    monitor_->Unwatch(e->start, e->end);
    std::vector<Entry*> lost;
    ForOverlapping(e->start, e->end, [&](Entry* o) {
      if (!monitor_->Watch(o->start, o->end)) lost.push_back(o);
    });
    for (Entry* o : lost) Drop(o, /*memory_changed=*/true);  // not ours now
  }
  if (e->users > 0) {
    e->stale = true;
    return;
  }
  idle_.erase(e->lru);
  by_mr_.erase(e->mr);
  (void)e->mr->Destroy();
  delete e;
}

}  // namespace softfab::core
