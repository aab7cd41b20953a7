// When the shared fabric's virtual time may move (the daemon's rule; the
// README's "Running your own program on the simulated fabric"): every node
// that will take part has connected, and every live one is parked in a
// call, asleep outside the fabric with nothing on its way to it, or (with
// --outside-ms) silent long enough; the thread watch (thread_watch.h) has
// the last word. Also why a process holds time, for the watchdog.
#ifndef SOFTFAB_BACKENDS_SIMD_INTERNAL_TIME_GATE_H_
#define SOFTFAB_BACKENDS_SIMD_INTERNAL_TIME_GATE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/simd/internal/session.h"
#include "backends/simd/internal/thread_watch.h"

namespace softfab::simd::internal {

class TimeGate {
 public:
  // Time moves when every node that will take part has connected and every
  // live one is parked (and at least one is).
  // An outside process (silent for outside_ms while the others wait) counts
  // as parked: the fabric moves on without it.
  // While a process is outside, time moves only as far as the events already
  // in the fabric take it: no parked process's deadline fires and no idle
  // fabric is declared, since the outside process may yet act (it is
  // probably waiting, outside, for a parked one). Only once it has been
  // silent for the watchdog's time do deadlines fire again, as on hardware a
  // wait with a timeout would end.
  // kLook: no time moves; parked pollers look first (internal/thread_watch.h).
  enum class Verdict {
    kNo,
    kEveryoneParked,
    kSomeoneOutside,
    kOutsideLong,
    kLook
  };

  // As ServerOptions's fields of the same names; `watch` outlives the gate.
  TimeGate(int32_t expected_nodes, uint64_t outside_ms, uint64_t watchdog_ms,
           ThreadWatch* watch)
      : expected_nodes_(expected_nodes),
        outside_ms_(outside_ms),
        watchdog_ms_(watchdog_ms),
        watch_(watch) {}

  // Whether (and how) time may move now. `nodes_connected`: how many nodes
  // have ever said hello; `now` (ms), `now_ns`: the monotonic clock.
  Verdict Check(const std::vector<std::unique_ptr<Session>>& sessions,
                size_t nodes_connected, uint64_t now, uint64_t now_ns);

  // Why `s`, neither parked nor gone, does not count as asleep outside the
  // fabric, for the watchdog's message.
  const char* WhyNotAsleep(
      const std::vector<std::unique_ptr<Session>>& sessions, Session* s) const;

 private:
  // A process between calls whose every thread sleeps in the kernel, having
  // read every reply, waits for something outside the fabric (another
  // process of the run, most often) and cannot act before that happens: it
  // counts as parked, as Shadow counts a process blocked in a system call.
  // Two looks at least a millisecond apart, so a passing sleep (a pipe
  // write, a lock) is not taken for one.
  // `fresh` forbids the answer of an earlier look in this millisecond: time
  // may move only on what the process is doing now (a process seen asleep a
  // moment ago may since have been woken by a TCP byte, answered, and be
  // running toward its next call: taking it for asleep let the fabric run
  // past the completions it was about to poll).
  static bool AsleepOutside(Session* s, uint64_t now, bool fresh);
  // Why `s` cannot be asleep outside the fabric as it stands (no hello yet,
  // a reply or request under way, a thread at work), or null.
  static const char* Awake(const Session* s);

  // With a process asleep outside the fabric, the launchers that started
  // the processes (mpirun, orted: each session's parent, unless it is this
  // daemon's own process, as under `softfab run`) count as processes of
  // the run: they must be asleep too (a launcher still writing a fence's
  // release to one rank after another would otherwise let time move before
  // the last rank has woken), and no bytes may be on their way to any
  // sleeper (outside_processes.h), other than our own doorbells. `asleep`
  // gets the launchers added.
  static bool LaunchersQuiet(
      const std::vector<std::unique_ptr<Session>>& sessions,
      std::vector<pid_t>* asleep);

  const int32_t expected_nodes_;
  const uint64_t outside_ms_;
  const uint64_t watchdog_ms_;
  ThreadWatch* const watch_;
};

}  // namespace softfab::simd::internal

#endif  // SOFTFAB_BACKENDS_SIMD_INTERNAL_TIME_GATE_H_
