// Reading processes' states and their TCP queues from /proc; see
// outside_processes.h.
#include "backends/simd/outside_processes.h"

#include <dirent.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
// shows no queue lengths. -1 when the kernel cannot be asked.
int AnyUnixQueued(const std::vector<unsigned long>& sleepers) {
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
  ask.request.udiag_show = UDIAG_SHOW_RQLEN;
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
      for (auto* a = reinterpret_cast<const rtattr*>(msg + 1); RTA_OK(a, len);
           a = RTA_NEXT(a, len)) {
        if (a->rta_type != UNIX_DIAG_RQLEN) continue;
        const auto* q = static_cast<const unix_diag_rqlen*>(RTA_DATA(a));
        if (q->udiag_rqueue != 0) found = 1;
      }
    }
  }
  close(fd);
  return found;
}

}  // namespace

bool AllThreadsSleep(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  bool all = true, any = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string path = dir + "/" + e->d_name + "/stat";
    FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    char buf[512];
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // "pid (comm) S ...": the state follows the last ')'.
    const char* close_paren = std::strrchr(buf, ')');
    if (close_paren == nullptr || close_paren[1] != ' ') continue;
    any = true;
    if (close_paren[2] != 'S') all = false;
  }
  closedir(d);
  return any && all;
}

bool SocketsQuiet(const std::vector<pid_t>& pids,
                  const std::vector<pid_t>& sleepers) {
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
  return asleep.empty() || AnyUnixQueued(asleep) == 0;
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
