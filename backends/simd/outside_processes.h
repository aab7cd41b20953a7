// What the fabric daemon can see of a process outside the fabric (between
// its calls), from /proc alone: whether every thread of it sleeps in the
// kernel, and whether the TCP connections of the run's processes are quiet
// (no byte unread by a receiver, none unacknowledged by a sender, no
// connection waiting to be accepted). A process that sleeps while its TCP
// connections are quiet cannot wake before another process of the run (or
// something outside it) acts; one that sleeps with bytes on their way to it
// is about to wake, even if the kernel has not yet delivered them (loopback
// traffic can wait in a softirq backlog under load). No ptrace, nothing read
// from the processes' memory.
#ifndef SOFTFAB_BACKENDS_SIMD_OUTSIDE_PROCESSES_H_
#define SOFTFAB_BACKENDS_SIMD_OUTSIDE_PROCESSES_H_

#include <sys/types.h>

#include <vector>

namespace softfab::simd {

// Every thread of `pid` is in state S (sleeping interruptibly in the kernel:
// a read, a poll, a futex...). A thread in R (running or woken) or D
// (uninterruptible: disk, a page fault) is not.
bool AllThreadsSleep(pid_t pid);

// No TCP bytes on their way to a sleeper: no socket (IPv4 or IPv6) of
// `pids` (every process of the run) has unacknowledged bytes in its send
// queue, and none of `sleepers` (the processes asleep outside the fabric)
// has unread bytes or a connection to accept. Bytes queued to a process
// parked in a fabric call do not count: it reads them once the fabric
// wakes it. False also when /proc cannot be read.
bool TcpQuiet(const std::vector<pid_t>& pids,
              const std::vector<pid_t>& sleepers);

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_OUTSIDE_PROCESSES_H_
