// Bounded waits for tests that run on the simulator and on a real device: a
// wait ends when its condition holds, after a number of rounds (on the
// simulator each round runs virtual time, so rounds make the bound) or after
// a real-time limit (on verbs nothing happens faster than the device, and
// Soft-RoCE under emulation takes tens of microseconds per operation). A wait
// that runs out reports false; it never hangs.
#ifndef SOFTFAB_TESTS_BOUNDED_WAIT_H_
#define SOFTFAB_TESTS_BOUNDED_WAIT_H_

#include <poll.h>

#include <chrono>
#include <cstdint>

namespace softfab::testing {

// Real time a test waits for something a device will do (a connection, a
// message, a retry) before calling it a failure.
inline constexpr int kDeviceWaitMs = 20000;

// A point in real time (steady clock) some milliseconds away.
class Deadline {
 public:
  explicit Deadline(int ms)
      : end_(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms)) {
  }
  bool passed() const { return std::chrono::steady_clock::now() >= end_; }
  // Milliseconds left, at least 0 (for poll(2)).
  int left_ms() const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end_ - std::chrono::steady_clock::now());
    return left.count() > 0 ? static_cast<int>(left.count()) : 0;
  }

 private:
  std::chrono::steady_clock::time_point end_;
};

// Runs `step` until `done()` holds, at most `rounds_max` times and for at most
// `ms_max` of real time. Returns the last answer of done(), which is asked
// once before each step and once after the last (so it may consume what it
// checks, e.g. read a completion).
template <typename Done, typename Step>
bool WaitUntil(Done done, Step step, int64_t rounds_max = 1000000,
               int ms_max = kDeviceWaitMs) {
  const Deadline deadline(ms_max);
  for (int64_t r = 0; r < rounds_max; ++r) {
    if (done()) return true;
    if ((r & 63) == 63 && deadline.passed()) return false;
    step();
  }
  return done();
}

// True when `fd` is readable now (poll(2) with no wait).
inline bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// True when `fd` becomes readable within `ms` of real time.
inline bool ReadableWithin(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_BOUNDED_WAIT_H_
