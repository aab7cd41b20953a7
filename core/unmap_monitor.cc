// The unmap monitor over userfaultfd (see unmap_monitor.h).
#include "core/unmap_monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <future>

namespace softfab::core {
namespace {

constexpr uint64_t kEvents = UFFD_FEATURE_EVENT_UNMAP |
                             UFFD_FEATURE_EVENT_REMOVE |
                             UFFD_FEATURE_EVENT_REMAP;

// A userfaultfd with the three events on, or -1 with errno set. User-mode
// faults only (Linux 5.11+) is what an unprivileged process may ask for;
// no page is ever protected, so no fault of either kind is taken anyway.
int OpenUffd() {
  const int base = O_CLOEXEC | O_NONBLOCK;
  int fd =
      static_cast<int>(syscall(SYS_userfaultfd, base | UFFD_USER_MODE_ONLY));
  if (fd < 0 && errno == EINVAL) {  // a kernel before the flag
    fd = static_cast<int>(syscall(SYS_userfaultfd, base));
  }
  if (fd < 0) return -1;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kEvents;
  if (ioctl(fd, UFFDIO_API, &api) != 0 || (api.features & kEvents) != kEvents) {
    const int err = errno != 0 ? errno : ENOTSUP;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

}  // namespace

StatusOr<std::unique_ptr<UnmapMonitor>> UnmapMonitor::Open() {
  errno = 0;
  const int uffd = OpenUffd();
  if (uffd < 0) {
    return Status(errno != 0 ? errno : ENOTSUP,
                  "userfaultfd with unmap events is not available");
  }
  const int stop = eventfd(0, EFD_CLOEXEC);
  if (stop < 0) {
    const int err = errno;
    close(uffd);
    return Status(err, "eventfd failed");
  }
  std::unique_ptr<UnmapMonitor> m(new UnmapMonitor(uffd, stop));
  // Running before anything is watched: whatever the thread's start maps or
  // unmaps for itself (a sanitizer's per-thread memory, say) is done by then.
  // The reader must never unmap a watched range: only it could release that.
  std::promise<void> started;
  std::future<void> running = started.get_future();
  m->reader_ = std::thread([p = m.get(), &started] {
    started.set_value();
    p->Run();
  });
  running.wait();
  return m;
}

UnmapMonitor::UnmapMonitor(int uffd, int stop_fd)
    : uffd_(uffd), stop_fd_(stop_fd) {}

UnmapMonitor::~UnmapMonitor() {
  const uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof one);
  reader_.join();
  close(stop_fd_);
  close(uffd_);  // the kernel drops every watch with it
}

bool UnmapMonitor::Watch(uint64_t start, uint64_t end) {
  uffdio_register reg{};
  reg.range.start = start;
  reg.range.len = end - start;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  return ioctl(uffd_, UFFDIO_REGISTER, &reg) == 0;
}

void UnmapMonitor::Unwatch(uint64_t start, uint64_t end) {
  uffdio_range range{};
  range.start = start;
  range.len = end - start;
  (void)ioctl(uffd_, UFFDIO_UNREGISTER, &range);
}

void UnmapMonitor::TakeChanged(Changes* out) {
  // An unmap that has returned was read already (the kernel held it until
  // then), by Run under this lock: taking it is enough to see the range.
  std::lock_guard<std::mutex> lock(mu_);
  out->count = pending_.count;
  out->overflowed = pending_.overflowed;
  std::copy_n(pending_.ranges.begin(), pending_.count, out->ranges.begin());
  pending_.count = 0;
  pending_.overflowed = false;
}

void UnmapMonitor::Run() {
  pollfd fds[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    ReadLocked();
  }
}

void UnmapMonitor::ReadLocked() {
  uffd_msg msg;
  while (read(uffd_, &msg, sizeof msg) == static_cast<ssize_t>(sizeof msg)) {
    Range r;
    switch (msg.event) {
      case UFFD_EVENT_UNMAP:  // both name the range in arg.remove
      case UFFD_EVENT_REMOVE:
        r = {msg.arg.remove.start, msg.arg.remove.end};
        break;
      case UFFD_EVENT_REMAP:
        r = {msg.arg.remap.from, msg.arg.remap.from + msg.arg.remap.len};
        break;
      default:
        continue;  // no fault can come: no page is write-protected
    }
    if (pending_.count < kRangesMax) {
      pending_.ranges[pending_.count++] = r;
    } else {
      pending_.overflowed = true;
    }
  }
}

}  // namespace softfab::core
