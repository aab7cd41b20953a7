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

#include <vector>

namespace softfab::simd {

// Every thread of `pid` is in state S (sleeping interruptibly in the kernel:
// a read, a poll, a futex...). A thread in R (running or woken) or D
// (uninterruptible: disk, a page fault) is not.
bool AllThreadsSleep(pid_t pid);

// No bytes on their way to a sleeper: no TCP socket (IPv4 or IPv6) of
// `pids` (every process of the run) has unacknowledged bytes in its send
// queue, and no TCP or Unix socket of `sleepers` (the processes asleep
// outside the fabric) has unread bytes or a connection to accept (Unix
// sockets through the kernel's socket diagnostics, NETLINK_SOCK_DIAG).
// Bytes queued to a process parked in a fabric call do not count: it reads
// them once the fabric wakes it. False also when the kernel cannot be asked.
bool SocketsQuiet(const std::vector<pid_t>& pids,
                  const std::vector<pid_t>& sleepers);

// The parent of `pid` (from /proc/PID/stat), or 0.
pid_t ParentOf(pid_t pid);

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_OUTSIDE_PROCESSES_H_
