// Reading processes' states and their TCP queues from /proc; see
// outside_processes.h.
#include "backends/simd/outside_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace softfab::simd {
namespace {

// The socket inodes among `pid`'s open files (/proc/PID/fd/* links read
// "socket:[INODE]").
void SocketInodes(pid_t pid, std::vector<unsigned long>* out) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[64];
    const std::string link = dir + "/" + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::strncmp(target, "socket:[", 8) == 0) {
      out->push_back(std::strtoul(target + 8, nullptr, 10));
    }
  }
  closedir(d);
}

// Whether a socket of /proc/net/tcp-format file `path` has bytes on their
// way: unacknowledged bytes in the send queue of one whose inode is in
// `senders`, or unread bytes (or, listening, a connection to accept) in the
// receive queue of one in `sleepers` (both sorted). -1 when the file cannot
// be read.
int AnyQueued(const char* path, const std::vector<unsigned long>& senders,
              const std::vector<unsigned long>& sleepers) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char line[512];
  int found = 0;
  if (std::fgets(line, sizeof line, f) == nullptr) {  // the header
    std::fclose(f);
    return -1;
  }
  while (found == 0 && std::fgets(line, sizeof line, f) != nullptr) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    unsigned state = 0, tr = 0;
    unsigned long tx = 0, rx = 0, when = 0, retr = 0, uid = 0, timeout = 0,
                  inode = 0;
    char local[64], remote[64];
    if (std::sscanf(line, " %*d: %63s %63s %x %lx:%lx %x:%lx %lx %lu %lu %lu",
                    local, remote, &state, &tx, &rx, &tr, &when, &retr, &uid,
                    &timeout, &inode) != 11 ||
        inode == 0) {
      continue;
    }
    constexpr unsigned kListen = 0x0A;  // tx_queue is then the backlog size
    if (state != kListen && tx != 0 &&
        std::binary_search(senders.begin(), senders.end(), inode)) {
      found = 1;
    }
    if (rx != 0 &&
        std::binary_search(sleepers.begin(), sleepers.end(), inode)) {
      found = 1;
    }
  }
  std::fclose(f);
  return found;
}

// Whether a Unix socket whose inode is in the sorted `sleepers` has bytes
// (or, listening, connections) in its receive queue, asked of the kernel's
// socket diagnostics (NETLINK_SOCK_DIAG, UDIAG_SHOW_RQLEN): /proc/net/unix
// shows no queue lengths. A socket whose peer is in the sorted `ignored`
// (UDIAG_SHOW_PEER) does not count. -1 when the kernel cannot be asked.
int AnyUnixQueued(const std::vector<unsigned long>& sleepers,
                  const std::vector<unsigned long>& ignored) {
  const int fd =
      socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return -1;
  struct {
    nlmsghdr header;
    unix_diag_req request;
  } ask{};
  ask.header.nlmsg_len = sizeof ask;
  ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  ask.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  ask.request.sdiag_family = AF_UNIX;
  ask.request.udiag_states = ~0u;
  ask.request.udiag_show = UDIAG_SHOW_RQLEN | UDIAG_SHOW_PEER;
  if (send(fd, &ask, sizeof ask, 0) != static_cast<ssize_t>(sizeof ask)) {
    close(fd);
    return -1;
  }
  int found = 0;
  alignas(nlmsghdr) char buf[32768];
  for (bool done = false; !done;) {
    const ssize_t got = recv(fd, buf, sizeof buf, 0);
    if (got <= 0) {
      found = -1;
      break;
    }
    int n = static_cast<int>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, n);
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) {
        done = true;
        break;
      }
      if (h->nlmsg_type == NLMSG_ERROR) {
        found = -1;
        done = true;
        break;
      }
      const auto* msg = static_cast<const unix_diag_msg*>(NLMSG_DATA(h));
      if (!std::binary_search(sleepers.begin(), sleepers.end(),
                              static_cast<unsigned long>(msg->udiag_ino))) {
        continue;
      }
      int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *msg));
      bool queued = false, from_ignored = false;
      for (auto* a = reinterpret_cast<const rtattr*>(msg + 1); RTA_OK(a, len);
           a = RTA_NEXT(a, len)) {
        if (a->rta_type == UNIX_DIAG_RQLEN) {
          const auto* q = static_cast<const unix_diag_rqlen*>(RTA_DATA(a));
          queued |= q->udiag_rqueue != 0;
        } else if (a->rta_type == UNIX_DIAG_PEER) {
          const unsigned long peer = *static_cast<const uint32_t*>(RTA_DATA(a));
          from_ignored |=
              std::binary_search(ignored.begin(), ignored.end(), peer);
        }
      }
      if (queued && !from_ignored) found = 1;
    }
  }
  close(fd);
  return found;
}

// Reads a /proc file of a few hundred bytes into `buf`, NUL-terminated,
// through `*fd` (opened on first use and kept: a /proc file read again from
// its start shows the present). A kept file that no longer reads (its thread
// ended; the number may since name another) is opened again once.
bool ReadFile(int* fd, const char* path, char* buf, size_t size) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (*fd < 0) *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0) return false;
    const ssize_t n = pread(*fd, buf, size - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      return true;
    }
    close(*fd);
    *fd = -1;
  }
  return false;
}

// A system call that sleeps until a time: the thread wakes by itself.
bool IsTimerSleep(long nr) {
#ifdef SYS_nanosleep
  if (nr == SYS_nanosleep) return true;
#endif
  return nr == SYS_clock_nanosleep;
}

// How many times the thread at /proc/PID/task/TID has been given a CPU:
// schedstat's third figure (read through `*fd`), else the context switches
// in its status.
uint64_t RunCount(int* fd, const std::string& task) {
  char buf[4096];
  unsigned long long run_ns = 0, wait_ns = 0, slices = 0;
  if (ReadFile(fd, (task + "/schedstat").c_str(), buf, sizeof buf) &&
      std::sscanf(buf, "%llu %llu %llu", &run_ns, &wait_ns, &slices) == 3) {
    return slices;
  }
  int status = -1;
  const bool read =
      ReadFile(&status, (task + "/status").c_str(), buf, sizeof buf);
  if (status >= 0) close(status);
  if (!read) return 0;
  uint64_t runs = 0;
  for (const char* key :
       {"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"}) {
    if (const char* at = std::strstr(buf, key)) {
      runs += std::strtoull(at + std::strlen(key), nullptr, 10);
    }
  }
  return runs;
}

bool ByTidThenRuns(const ThreadLook& a, const ThreadLook& b) {
  return a.tid != b.tid ? a.tid < b.tid : a.runs < b.runs;
}

}  // namespace

bool ThreadsWaiting(pid_t pid, pid_t except_tid,
                    std::vector<ThreadLook>* looks) {
  ThreadReader reader;
  return reader.Waiting(pid, except_tid, looks, nullptr);
}

void ThreadReader::CloseFiles(Files& f) {
  for (int fd : {f.stat, f.schedstat, f.syscall}) {
    if (fd >= 0) close(fd);
  }
}

ThreadReader::~ThreadReader() {
  for (auto& [key, f] : files_) CloseFiles(f);
}

void ThreadReader::Forget(pid_t pid) {
  auto it = files_.lower_bound({pid, 0});
  while (it != files_.end() && it->first.first == pid) {
    CloseFiles(it->second);
    it = files_.erase(it);
  }
}

bool ThreadReader::Waiting(pid_t pid, pid_t except_tid,
                           std::vector<ThreadLook>* looks,
                           const std::vector<ThreadLook>* known) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    Forget(pid);
    return false;
  }
  std::vector<pid_t> tids;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') tids.push_back(std::atoi(e->d_name));
  }
  closedir(d);
  std::sort(tids.begin(), tids.end());
  for (auto it = files_.lower_bound({pid, 0});
       it != files_.end() && it->first.first == pid; ++it) {
    it->second.listed = false;
  }
  bool all = true, any = false;
  char buf[512];
  for (pid_t tid : tids) {
    if (tid == except_tid) {
      any = true;
      continue;
    }
    Files& f = files_[{pid, tid}];
    f.listed = true;
    const std::string task = dir + "/" + std::to_string(tid);
    // "tid (comm) S ...": the state follows the last ')'.
    if (!ReadFile(&f.stat, (task + "/stat").c_str(), buf, sizeof buf)) {
      continue;  // gone since the listing
    }
    const char* close_paren = std::strrchr(buf, ')');
    if (close_paren == nullptr || close_paren[1] != ' ') continue;
    any = true;
    ThreadLook look;
    look.tid = tid;
    look.runs = RunCount(&f.schedstat, task);
    const bool waited_so =
        known != nullptr &&
        std::binary_search(known->begin(), known->end(), look, ByTidThenRuns);
    if (close_paren[2] != 'S') {
      all = false;
    } else if (!waited_so &&
               ReadFile(&f.syscall, (task + "/syscall").c_str(), buf,
                        sizeof buf) &&
               IsTimerSleep(std::atol(buf))) {
      // "NR arg1 ...": asleep on a timer.
      all = false;
    }
    if (looks != nullptr) looks->push_back(look);
    if (!all && looks == nullptr) break;
  }
  // Threads gone since the last look: their files go too.
  for (auto it = files_.lower_bound({pid, 0});
       it != files_.end() && it->first.first == pid;) {
    if (it->second.listed) {
      ++it;
      continue;
    }
    CloseFiles(it->second);
    it = files_.erase(it);
  }
  return any && all;
}

bool SocketsQuiet(const std::vector<pid_t>& pids,
                  const std::vector<pid_t>& sleepers,
                  std::vector<unsigned long> daemon_ends) {
  std::vector<unsigned long> senders, asleep;
  for (pid_t pid : pids) SocketInodes(pid, &senders);
  for (pid_t pid : sleepers) SocketInodes(pid, &asleep);
  if (senders.empty() && asleep.empty()) return true;
  std::sort(senders.begin(), senders.end());
  std::sort(asleep.begin(), asleep.end());
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    // Queued, or unreadable: not known to be quiet.
    if (AnyQueued(path, senders, asleep) != 0) return false;
  }
  std::sort(daemon_ends.begin(), daemon_ends.end());
  return asleep.empty() || AnyUnixQueued(asleep, daemon_ends) == 0;
}

pid_t ParentOf(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return 0;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) S PPID ...": the parent follows the state.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return 0;
  char state = 0;
  int ppid = 0;
  if (std::sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2) return 0;
  return static_cast<pid_t>(ppid);
}

}  // namespace softfab::simd
