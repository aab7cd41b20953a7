// Whether a side of a mailbox that waits may look without sleeping first.
//
// Both sides spin for a while before they sleep (mailbox.h), yielding the
// core at each look: on a machine with a core to spare the other side is
// answered within microseconds and no sleep and wake-up is paid. On a machine
// with more runnable work than cores (a CI box running tests side by side) a
// yield hands the core to another program for a whole time slice, and every
// hand-off between the daemon and a process then waits that long:
// unmodified fi_pingpong over every size took 5 s alone on 2 cores and about
// 67 s beside two busy loops (bench/simd/loaded_fi_pingpong.sh; with this
// governor, 5 s and 25 s; the README has the runs).
//
// So a look whose yield kept the core away longer than kContendedGapNs turns
// spinning off for kSpinOffNs; then spinning is tried again. The governor
// changes only how long a wait takes by the wall clock, never what the fabric
// does: virtual time and every result stay the same.
#ifndef SOFTFAB_BACKENDS_SIMD_SPIN_GOVERNOR_H_
#define SOFTFAB_BACKENDS_SIMD_SPIN_GOVERNOR_H_

#include <time.h>

#include <cstdint>

namespace softfab::simd {

inline uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 +
         static_cast<uint64_t>(ts.tv_nsec);
}

class SpinGovernor {
 public:
  // A gap between two looks longer than this means a yield gave the core to
  // somebody else for a time slice (a few milliseconds; a yield to the other
  // side, whose reply takes microseconds, comes back far sooner).
  static constexpr uint64_t kContendedGapNs = 500'000;
  static constexpr uint64_t kSpinOffNs = 100'000'000;

  bool MaySpin(uint64_t now_ns) const { return now_ns >= spin_off_until_ns_; }

  // Two successive looks of a spin, at `before_ns` and `after_ns`.
  void Looked(uint64_t before_ns, uint64_t after_ns) {
    if (after_ns - before_ns > kContendedGapNs) {
      spin_off_until_ns_ = after_ns + kSpinOffNs;
    }
  }

 private:
  uint64_t spin_off_until_ns_ = 0;
};

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_SPIN_GOVERNOR_H_
