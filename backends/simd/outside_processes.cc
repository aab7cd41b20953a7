// Reading processes' states and their TCP queues from /proc; see
// outside_processes.h.
#include "backends/simd/outside_processes.h"

#include <dirent.h>
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

bool TcpQuiet(const std::vector<pid_t>& pids,
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
  return true;
}

}  // namespace softfab::simd
