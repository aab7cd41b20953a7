// The registration cache (see mr_cache.h).
#include "core/mr_cache.h"

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
  auto made = pd_->RegMr(reinterpret_cast<void*>(start), end - start, access);
  if (!made.ok()) return made.status();
  ++stats_.misses;
  auto* e = new Entry;
  e->mr = *made;
  e->start = start;
  e->end = end;
  e->access = access;
  e->users = 1;
  by_start_.emplace(start, e);
  by_mr_.emplace(e->mr, e);
  bytes_ += end - start;
  if (end - start > longest_) longest_ = end - start;
  return e->mr;
}

void MrCache::Release(tp::MemoryRegion* mr) {
  if (!options_.enabled) {
    (void)mr->Destroy();
    return;
  }
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

void MrCache::Invalidate(const void* addr, uint64_t len) {
  if (!options_.enabled || len == 0) return;
  const uint64_t at = reinterpret_cast<uint64_t>(addr);
  const uint64_t end = at + len;
  auto it = by_start_.lower_bound(at > longest_ ? at - longest_ : 0);
  while (it != by_start_.end() && it->first < end) {
    Entry* e = it->second;
    ++it;
    if (e->end <= at) continue;
    ++stats_.invalidations;
    Drop(e);
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
void MrCache::Drop(Entry* e) {
  for (auto it = by_start_.lower_bound(e->start);
       it != by_start_.end() && it->first == e->start; ++it) {
    if (it->second == e) {
      by_start_.erase(it);
      break;
    }
  }
  bytes_ -= e->end - e->start;
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
