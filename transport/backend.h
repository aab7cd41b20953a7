// A backend as the layers above see it: a fabric of devices, one per node, with
// the clock that times them and the one way a caller waits on them.
//
// Every backend (backends/sim: a simulated fabric in this process;
// backends/verbs: real devices through libibverbs) implements this interface
// and exposes a factory returning it; the API owns one per fabric and never
// asks which backend it holds. What differs between backends is said here as
// behaviour (how Wait passes time, what the endpoints should be tuned to), not
// as identity.
//
// Waiting. A caller that finds nothing to read waits for "a completion on any
// of these CQs, an entry the core made itself, or this deadline":
// - a simulated backend passes virtual time: Wait runs the fabric's next event
//   (or moves the clock to the deadline), so a completion can only appear
//   while the caller is inside a call and needs no completion channel;
// - a real device's time runs by itself: Wait sleeps in poll(2) on the
//   completion channels and wake fds of the WaitSet, after letting the caller
//   arm its CQs (Sleeper), and wakes at least every few milliseconds so the
//   core's protocol timers run.
// Either way the caller loops: read; if nothing, Wait; until a result or the
// deadline. Threading: as the devices (one caller at a time).
#ifndef SOFTFAB_TRANSPORT_BACKEND_H_
#define SOFTFAB_TRANSPORT_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::transport {

// What wakes a waiter on a backend whose time runs by itself.
struct WaitSet {
  // Completion channels whose armed CQs raise an event on a completion.
  CompletionChannel* const* channels = nullptr;
  size_t channel_count = 0;
};

// How the caller takes part in a wait (Backend::Wait). Both calls are made,
// in this order, just before a backend with real time sleeps; a simulated one
// makes neither.
class Sleeper {
 public:
  // Arms every CQ whose next completion must wake the waiter (RequestNotify on
  // CQs bound to the WaitSet's channels), taking the events already pending
  // first. False if one could not be armed: the backend then sleeps in short
  // slices, since that CQ cannot wake it.
  virtual bool Arm() = 0;
  // Looks once more, after arming: what arrived before the arm raised no
  // event. True when the wait is over (the caller keeps what it found).
  virtual bool Ready() = 0;

 protected:
  ~Sleeper() = default;
};

enum class WaitResult : uint8_t {
  kWoken,  // Something may have changed (or the deadline came): look again.
  kIdle,   // Nothing can change any more: a simulated fabric with no event
           // pending and no deadline. Waiting longer would wait for ever.
  kInterrupted,  // A signal ended the sleep (real time only), as EINTR
                 // ends poll(2): the caller decides whether to go on.
};

// Settings the layers above should use on this backend, where the right value
// follows from the hardware's scale, not from the program.
struct BackendTuning {
  // Post sends that fit the QP's inline data inline (the device copies them
  // at post). On every backend today: on the simulators it is what lets a
  // small inject skip the tx table (core Endpoint::PostInject), and their
  // runs' digests did not change with it.
  bool inline_sends = false;
  // Put freed receive buffers back on the SRQ while waiting for the next
  // message (or in chains, under a stream), not between a message's arrival
  // and its completion (core Endpoint::Repost): where a post costs time on
  // the way to the application (a device: ibv_post_srq_recv) and nothing
  // replays when a post happened. Off on the simulators, whose runs' digests
  // record every post.
  bool defer_reposts = false;
  // Connection-request retry interval and tries; 0 keeps the core's
  // defaults (200 us x 50, a simulated round trip's scale).
  uint32_t cm_retry_ns = 0;
  uint32_t cm_retries_max = 0;
};

// A simulated fabric's own controls, for the calls that drive or inspect one
// on purpose (a fault study stepping time, a test reading the digest). Real
// devices have none (Backend::simulation() is null).
class Simulation {
 public:
  // Runs events until none is pending or `events_max` have run; how many ran.
  virtual uint64_t RunUntilIdle(uint64_t events_max) = 0;
  // Runs every event up to `t_ns`, then sets the clock there (if later).
  virtual uint64_t RunUntil(uint64_t t_ns) = 0;
  // A 64-bit fold of every event run so far.
  virtual uint64_t digest() const = 0;

 protected:
  ~Simulation() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // How many nodes OpenDevice accepts (a simulated fabric's nodes; the
  // contexts one real device may have open at once).
  virtual int32_t node_count() const = 0;
  // The device of `node`, owned by the backend until CloseDevice: a simulated
  // node's HCA, or a new context of the real device this backend was made
  // for. On failure `why` (may be null) says what was found and how to fix
  // it. EINVAL for a node out of range.
  [[nodiscard]] virtual StatusOr<Device*> OpenDevice(int32_t node,
                                                     std::string* why) = 0;
  // Gives back a device from OpenDevice; everything created through it must
  // have been destroyed (a real context is closed, a simulated node stays).
  virtual void CloseDevice(Device* device) = 0;

  // The clock of every device of this backend.
  virtual const Clock& clock() const = 0;
  virtual BackendTuning tuning() const = 0;

  // Waits once, as the header comment says, no later than `deadline_ns`
  // (clock time; UINT64_MAX: no deadline). `sleeper` may be null when the
  // caller has nothing to arm (a channel it armed itself).
  virtual WaitResult Wait(const WaitSet& set, uint64_t deadline_ns,
                          Sleeper* sleeper) = 0;
  // Polls of this backend's CQs run nothing later than `t_ns` (UINT64_MAX: no
  // limit) until set again; returns the previous limit, to be restored when
  // the wait that set it ends. A wait with a deadline sets it, so a read
  // inside the wait cannot carry virtual time past the deadline; real time
  // needs no limit (a no-op there).
  virtual uint64_t SetPollHorizon(uint64_t t_ns) = 0;
  // Work is pending that reading a CQ would move on (simulated events not yet
  // run): a wait fd stays readable while it is. Never on real devices, whose
  // work announces itself on the completion channels.
  virtual bool HasPendingWork() const = 0;

  // The caller looked and found nothing to read (a non-blocking read said
  // EAGAIN). A fabric whose time moves only when every process using it has
  // nothing to do (the simulator shared by several processes) blocks here
  // until time has moved and something concerns this process, and returns
  // true: the caller reads again at once, so the call that parked takes
  // what woke it, whatever the program would do next. The others return
  // false at once, as reading again will run the fabric (the simulator's
  // polls) or find what the device did.
  virtual bool NothingToRead() { return false; }
  // Whether NothingToRead may block (the caller then gets its work in order
  // first: core::ProgressSource::BeforeSleep). Asked once, when the fabric
  // opens: a non-blocking read that finds nothing asks NothingToRead and
  // health() only of a backend that parks (the others' answers are the
  // defaults, and a busy poll would pay for asking).
  virtual bool ParksIdleReads() const { return false; }

  // Why the fabric can no longer be used at all (the shared simulator's
  // daemon is gone); OK while it can. A read that finds nothing (on a
  // backend that parks idle reads) and a wait fail with it instead of
  // reporting "nothing yet" for ever.
  virtual Status health() const { return Status::Ok(); }

  // The simulation's controls, or null when the devices are real.
  virtual Simulation* simulation() = 0;
};

}  // namespace softfab::transport

#endif  // SOFTFAB_TRANSPORT_BACKEND_H_
