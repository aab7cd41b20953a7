// Tells the registration cache when memory it holds registrations for is
// unmapped, released (madvise DONTNEED/REMOVE) or moved (mremap), so a cached
// registration is never used for pages that are no longer the ones at its
// addresses.
//
// It uses Linux's userfaultfd: each watched range is registered in
// write-protect mode without protecting any page, so no access ever faults;
// the kernel only reports the unmap, remove and remap events of those ranges.
// The process that unmaps waits in the kernel until the event is read, so a
// thread reads them as they come, and records them under a lock that
// TakeChanged also takes, so once munmap has returned, the next TakeChanged
// reports its range. Nothing is freed under that lock: freeing may itself
// unmap a watched range (a heap trim), whose event only a reader can release.
//
// Unavailable when the kernel has no userfaultfd, refuses it (a seccomp
// filter, vm.unprivileged_userfaultfd before Linux 5.11) or cannot watch a
// range (file-backed mappings other than shmem, device memory, or a range
// another userfaultfd already watches): Open fails, or Watch returns false,
// and the caller must not cache that memory.
#ifndef SOFTFAB_CORE_UNMAP_MONITOR_H_
#define SOFTFAB_CORE_UNMAP_MONITOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "transport/status.h"

namespace softfab::core {

class UnmapMonitor {
 public:
  struct Range {
    uint64_t start = 0, end = 0;
  };
  // Ranges kept between two TakeChanged calls; more sets `overflowed`, which
  // means "assume everything changed".
  static constexpr size_t kRangesMax = 64;
  struct Changes {
    size_t count = 0;
    bool overflowed = false;
    std::array<Range, kRangesMax> ranges{};
  };

  // A monitor with its reading thread, or why there cannot be one.
  static StatusOr<std::unique_ptr<UnmapMonitor>> Open();
  ~UnmapMonitor();
  UnmapMonitor(const UnmapMonitor&) = delete;
  UnmapMonitor& operator=(const UnmapMonitor&) = delete;

  // Starts reporting [start, end) (page-aligned). False if it cannot be
  // watched; the range is then not watched at all.
  [[nodiscard]] bool Watch(uint64_t start, uint64_t end);
  // Stops reporting [start, end); ranges already gone are fine.
  void Unwatch(uint64_t start, uint64_t end);
  // Every range unmapped, removed or moved away since the last call.
  void TakeChanged(Changes* out);

 private:
  UnmapMonitor(int uffd, int stop_fd);
  void Run();
  // Reads every pending event into pending_; mu_ must be held.
  void ReadLocked();

  const int uffd_;
  const int stop_fd_;  // an eventfd: written once to end Run
  std::mutex mu_;
  Changes pending_;  // guarded by mu_
  std::thread reader_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_UNMAP_MONITOR_H_
