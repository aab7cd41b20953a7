// The fabric daemon's watch over processes started by a launcher other than
// itself (mpirun, orted), whose other threads may wait on something besides
// the fabric. Open MPI's ranks poll the fabric in a loop that also waits for
// the launcher's fence release, which another thread of theirs (PMIx's)
// takes from a Unix socket and turns into a flag; the loop sees the flag
// between polls. Here a poll of an empty CQ parks until time moves, so
// whether a rank sees its release before or after time moves would depend
// on wall-clock timing. Two rules make it a function of the run:
// - Time moves only while the outside is settled: every thread of these
//   processes but the one parked in the fabric, and every thread of their
//   launchers, waits in the kernel for something to happen (not on a timer:
//   outside_processes.h), seen twice with no thread having run in between.
//   A release on its way is always in some thread's hands: the launcher's
//   writing it, or the woken PMIx thread's.
// - A process parked by an empty poll whose other threads ran since it was
//   last looked at gets a look before time moves: its poll returns with
//   nothing and no time passes, so it acts on what they brought it (a
//   released fence) at the same virtual time in every run.
// Runs under `softfab run` (the daemon is the launcher) skip all of this:
// their processes are taken to use one thread for the fabric and the
// sockets rule (server.cc) for the rest, and each look costs /proc reads.
#ifndef SOFTFAB_BACKENDS_SIMD_INTERNAL_THREAD_WATCH_H_
#define SOFTFAB_BACKENDS_SIMD_INTERNAL_THREAD_WATCH_H_

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "backends/simd/internal/session.h"
#include "backends/simd/outside_processes.h"

namespace softfab::simd::internal {

class ThreadWatch {
 public:
  enum class Verdict {
    kBusy,     // some watched thread is at work: time must wait
    kLook,     // settled, but parked pollers need a look first (TakeLooks)
    kSettled,  // time may move
  };

  // `daemon_pid`: the daemon's own process (the launcher of `softfab run`).
  // `watchdog_ms`: after this long busy, time moves on anyway (said once on
  // `log`: such a run may not be reproducible).
  ThreadWatch(pid_t daemon_pid, uint64_t watchdog_ms, std::FILE* log)
      : daemon_pid_(daemon_pid), watchdog_ms_(watchdog_ms), log_(log) {}

  // Whether `s` is watched: a node's process started by another launcher
  // (not the daemon's own process either, whose daemon thread never rests).
  bool Watched(const Session& s) const {
    return s.node >= 0 && s.parent > 1 && s.parent != daemon_pid_ &&
           s.pid != daemon_pid_;
  }

  // Looks at the watched processes and their launchers (every session in
  // `sessions` that is parked or counts as parked). While busy, looks again
  // at most every kRecheckNs of wall time (`now_ns`, monotonic).
  Verdict Check(const std::vector<std::unique_ptr<Session>>& sessions,
                uint64_t now_ns);

  // The sessions the last Check found in need of a look; each is taken as
  // looked at.
  std::vector<Session*> TakeLooks();

  // Time is moving: what the last Check saw of each watched process is what
  // the next looks compare with.
  void Moved();

  // Whether the last Check found something busy (the daemon then looks
  // again soon instead of sleeping).
  bool busy() const { return busy_; }

  // The sessions that are gone (their pids) need no baseline.
  void Forget(pid_t pid) {
    seen_.erase(pid);
    reader_.Forget(pid);
  }

  static constexpr uint64_t kRecheckNs = 100'000;

 private:
  // One look at every watched thread; false when one is at work. `known`:
  // an earlier look at which they all waited (outside_processes.h).
  bool LookAtAll(const std::vector<std::unique_ptr<Session>>& sessions,
                 const std::map<pid_t, std::vector<ThreadLook>>& known,
                 std::map<pid_t, std::vector<ThreadLook>>* out);

  const pid_t daemon_pid_;
  const uint64_t watchdog_ms_;
  std::FILE* const log_;
  bool busy_ = false;
  uint64_t checked_ns_ = 0;
  uint64_t busy_since_ns_ = 0;  // 0: not busy
  bool named_ = false;          // the watchdog said so for this stall
  // By pid: the threads at the last look that counted (an advance or a
  // look round), and at the last Check.
  std::map<pid_t, std::vector<ThreadLook>> seen_, now_;
  std::vector<Session*> to_look_;
  ThreadReader reader_;
};

}  // namespace softfab::simd::internal

#endif  // SOFTFAB_BACKENDS_SIMD_INTERNAL_THREAD_WATCH_H_
