// What the fabric daemon can see of a process outside the fabric (between
// its calls), from /proc and the kernel's socket diagnostics: whether every
// thread of it sleeps in the kernel, and whether the sockets of the run's
// processes are quiet (no byte unread by a sleeping receiver, none
// unacknowledged by a TCP sender, no connection waiting to be accepted). A
// process that sleeps while its TCP connections are quiet cannot wake before
// another process of the run (or something outside it) acts; one that sleeps
// with bytes on their way to it is about to wake, even if the kernel has not
// yet delivered them (loopback traffic can wait in a softirq backlog under
// load). No ptrace, nothing read from the processes' memory.
#ifndef SOFTFAB_BACKENDS_SIMD_OUTSIDE_PROCESSES_H_
#define SOFTFAB_BACKENDS_SIMD_OUTSIDE_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace softfab::simd {

// One thread as a look saw it (ThreadsWaiting): two looks that saw the same
// threads with the same counts saw threads that did not run in between.
struct ThreadLook {
  pid_t tid = 0;
  uint64_t runs = 0;  // how many times it has been given a CPU
  bool operator==(const ThreadLook&) const = default;
};

// Every thread of `pid` but `except_tid` (0: none) waits in the kernel for
// something to happen: state S (a read, a poll, a futex...), and not asleep
// on a timer (nanosleep, clock_nanosleep, as usleep() and sleep() are):
// such a thread wakes by itself in a moment and acts, as Open MPI's wait
// loops do between their polls. A thread in R (running or woken) or D
// (uninterruptible: disk, a page fault) does not wait. Each thread looked at
// is appended to `looks` (when not null), in tid order. False when the
// process cannot be read. (A thread's system call is read from
// /proc/TID/syscall, which needs the right to trace it; where that is
// refused, a sleeping thread counts as waiting.)
bool ThreadsWaiting(pid_t pid, pid_t except_tid,
                    std::vector<ThreadLook>* looks);
inline bool AllThreadsSleep(pid_t pid) {
  return ThreadsWaiting(pid, 0, nullptr);
}

// ThreadsWaiting for a caller that looks often at the same processes: each
// thread's /proc files stay open between looks (a look is then one read
// per file), and a thread whose count of runs is what `known` (an earlier
// look's, in tid order) says has not run since: it still waits where it
// waited then, so its system call is not read again.
class ThreadReader {
 public:
  ThreadReader() = default;
  ThreadReader(const ThreadReader&) = delete;
  ThreadReader& operator=(const ThreadReader&) = delete;
  ~ThreadReader();

  bool Waiting(pid_t pid, pid_t except_tid, std::vector<ThreadLook>* looks,
               const std::vector<ThreadLook>* known);
  // Closes the files of `pid`'s threads.
  void Forget(pid_t pid);

 private:
  struct Files {
    int stat = -1;
    int schedstat = -1;
    int syscall = -1;
    bool listed = false;  // seen in the last listing of its process
  };
  static void CloseFiles(Files& f);
  std::map<std::pair<pid_t, pid_t>, Files> files_;  // by (pid, tid)
};

// No bytes on their way to a sleeper: no TCP socket (IPv4 or IPv6) of
// `pids` (every process of the run) has unacknowledged bytes in its send
// queue, and no TCP or Unix socket of `sleepers` (the processes asleep
// outside the fabric) has unread bytes or a connection to accept (Unix
// sockets through the kernel's socket diagnostics, NETLINK_SOCK_DIAG).
// Bytes queued to a process parked in a fabric call do not count: it reads
// them once the fabric wakes it. Nor do bytes queued to a sleeper by one of
// `daemon_ends` (the inodes of the daemon's own ends of its sessions):
// those are doorbells, read only inside a fabric call, and one can be left
// over (rung just as its reply was seen without sleeping), never a reason
// the sleeper would wake. False also when the kernel cannot be asked.
bool SocketsQuiet(const std::vector<pid_t>& pids,
                  const std::vector<pid_t>& sleepers,
                  std::vector<unsigned long> daemon_ends = {});

// The parent of `pid` (from /proc/PID/stat), or 0.
pid_t ParentOf(pid_t pid);

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_OUTSIDE_PROCESSES_H_
