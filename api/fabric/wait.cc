// Waiting, for every backend alike: the blocking reads' loop (WaitFor), the
// CQ wait fds kept readable while reading would find work (SyncWaitFds),
// sf_control(SF_GETWAIT) and sf_trywait. How time passes while waiting is the
// backend's (transport::Backend::Wait): a simulated fabric runs its events, a
// real device is slept on through the domains' completion channels.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <vector>

#include "api/fabric/internal/backends.h"
#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "core/completion_queue.h"

namespace softfab::fabric_internal {
namespace {

// Takes every event pending on the domain's channel and acks it: the
// channel's fd is then quiet until an armed CQ gets a completion.
void DrainChannel(Domain* d) {
  tp::CompletionQueue* cq = nullptr;
  while (d->channel->GetEvent(&cq).ok()) cq->AckEvents(1);
}

// Arms every endpoint of the given domains, after taking their channels'
// pending events (other domains' channels keep theirs: another waiter may be
// sleeping on them). False if one refused (it then cannot wake a sleeper).
bool ArmAll(const std::vector<Domain*>& domains) {
  bool ok = true;
  for (Domain* d : domains) {
    DrainChannel(d);
    for (core::Endpoint* ep : d->endpoints) ok &= ep->ArmCompletions().ok();
  }
  return ok;
}

// A blocking read's part in a backend's wait: arming, then one more read,
// whose result (anything but -EAGAIN) ends the wait.
class ReadSleeper final : public tp::Sleeper {
 public:
  ReadSleeper(const std::vector<Domain*>& domains,
              const std::function<ssize_t()>& try_read)
      : domains_(domains), try_read_(try_read) {}
  bool Arm() override { return ArmAll(domains_); }
  bool Ready() override {
    result_ = try_read_();
    return result_ != -EAGAIN;
  }
  ssize_t result() const { return result_; }

 private:
  const std::vector<Domain*>& domains_;
  const std::function<ssize_t()>& try_read_;
  ssize_t result_ = -EAGAIN;
};

}  // namespace

void SyncWaitFdsOf(Fabric* f) {
  // Channel events say only "look again"; what the fd promises is decided
  // below, so taking them keeps it from staying readable over nothing.
  for (Cq* c : f->waitable) DrainChannel(c->domain);
  bool busy = f->backend->HasPendingWork();
  if (!busy) {
    // Completions can wait in an endpoint's transport CQs, which only
    // progress moves into the CQ: a fd that looked only at the CQ would stay
    // quiet over them. That holds for a signalled fd too, which is turned
    // off below when its CQ is empty: a message that arrived as the
    // simulator's last event waited for ever in a transport CQ behind a
    // quiet fd (tests/wait_fd_test LibuvLoopDrivesAPingPong/sim_faults, once
    // a disarmed ACK timer no longer kept the simulator busy). With no
    // backend work pending, progress passes no simulated time.
    for (Cq* c : f->waitable) {
      if (c->cq->pending() == 0 && !c->cq->has_error()) c->cq->Progress();
    }
    busy = f->backend->HasPendingWork();
  }
  for (Cq* c : f->waitable) {
    const bool want = busy || c->cq->pending() > 0 || c->cq->has_error();
    if (want == c->signalled) continue;
    uint64_t v = 1;
    ssize_t n = want ? write(c->signal_fd, &v, sizeof v)
                     : read(c->signal_fd, &v, sizeof v);
    if (n == static_cast<ssize_t>(sizeof v)) c->signalled = want;
  }
}

int OpenWaitFd(Cq* c) {
  c->signal_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c->signal_fd < 0) return Fail(ENOMEM, "eventfd failed");
  c->wait_fd = epoll_create1(EPOLL_CLOEXEC);
  if (c->wait_fd < 0) return Fail(ENOMEM, "epoll_create1 failed");
  for (int fd : {c->signal_fd, c->domain->channel->fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(c->wait_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Fail(ENOMEM, "epoll_ctl failed");
    }
  }
  c->domain->fabric->waitable.push_back(c);
  return 0;
}

ssize_t WaitFor(Fabric* f, const std::vector<Domain*>& domains, int timeout_ms,
                const std::function<ssize_t()>& try_read) {
  tp::Backend& backend = *f->backend;
  const uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX
                     : backend.clock().NowNs() +
                           static_cast<uint64_t>(timeout_ms) * 1'000'000;
  std::vector<tp::CompletionChannel*> channels;
  for (Domain* d : domains) channels.push_back(d->channel);
  const tp::WaitSet set{channels.data(), channels.size()};
  ReadSleeper sleeper(domains, try_read);
  // The horizon is the wait's, for its duration (a wait inside a wait, which
  // the API does not make, would keep the nearer one).
  const uint64_t outer = backend.SetPollHorizon(UINT64_MAX);
  backend.SetPollHorizon(std::min(outer, deadline));
  ssize_t n = try_read();
  if (n == -EAGAIN && f->sread_spin_ns > 0) {
    // Poll a while first (a real device only): the clock is read once in
    // 64 polls, so the spin costs reads, not clock calls.
    const uint64_t now = backend.clock().NowNs();
    const uint64_t until = std::min(deadline, now + f->sread_spin_ns);
    for (uint32_t i = 1; n == -EAGAIN; ++i) {
      if (i % 64 == 0 && backend.clock().NowNs() >= until) break;
      n = try_read();
    }
  }
  for (; n == -EAGAIN; n = try_read()) {
    if (Status h = backend.health(); !h.ok()) {
      n = Fail(h);
      break;
    }
    if (deadline != UINT64_MAX && backend.clock().NowNs() >= deadline) {
      n = Fail(ETIMEDOUT, "timed out");
      break;
    }
    if (backend.Wait(set, deadline, &sleeper) == tp::WaitResult::kIdle) {
      n = Fail(ETIMEDOUT, "the fabric is idle: nothing will arrive");
      break;
    }
    if (sleeper.result() != -EAGAIN) {
      n = sleeper.result();
      break;
    }
  }
  backend.SetPollHorizon(outer);
  return n;
}

int ArmForSleep(Fabric* f, const std::vector<Domain*>& domains,
                const std::function<bool()>& something_waiting) {
  if (f->backend->HasPendingWork()) {
    return Fail(EAGAIN, "the fabric has work pending: read the CQs");
  }
  if (!ArmAll(domains)) return Fail(EAGAIN, "an endpoint could not be armed");
  if (something_waiting()) {
    return Fail(EAGAIN, "completions are waiting: read the CQ");
  }
  return 0;
}

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_control(sf_fid* fid, int command, void* arg) {
  if (!IsClass(fid, SF_CLASS_CQ)) {
    return Fail(EINVAL, "wait objects belong to completion queues");
  }
  if (command != SF_GETWAIT) return Fail(ENOSYS, "unknown command");
  if (arg == nullptr) return Fail(EINVAL, "arg must point to an int");
  Cq* cq = ObjectOf<Cq>(fid);
  if (cq->wait_fd < 0) {
    return Fail(EINVAL, "the CQ was opened without a wait object");
  }
  SyncWaitFds(cq->domain->fabric);
  *static_cast<int*>(arg) = cq->wait_fd;
  return 0;
}

int sf_trywait(sf_fabric* pub, sf_fid** fids, int count) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || fids == nullptr || count <= 0) {
    return Fail(EINVAL, "fabric, fids and count must be valid");
  }
  for (int i = 0; i < count; ++i) {
    if (!IsClass(fids[i], SF_CLASS_CQ)) return Fail(EINVAL, "not a CQ");
    Cq* cq = ObjectOf<Cq>(fids[i]);
    if (cq->domain->fabric != f) return Fail(EINVAL, "CQ of another fabric");
    if (cq->wait_fd < 0) return Fail(EINVAL, "CQ without a wait object");
  }
  auto something_waiting = [&] {
    for (int i = 0; i < count; ++i) {
      Cq* cq = ObjectOf<Cq>(fids[i]);
      cq->cq->Progress();
      if (cq->cq->pending() > 0 || cq->cq->has_error()) return true;
    }
    return false;
  };
  const bool waiting = something_waiting();
  SyncWaitFds(f);
  if (waiting) return Fail(EAGAIN, "completions are waiting: read the CQ");
  // Arm, then look once more (what came before the arm raised no event on
  // the channels the fds watch).
  std::vector<Domain*> domains;
  for (int i = 0; i < count; ++i) {
    Domain* d = ObjectOf<Cq>(fids[i])->domain;
    if (std::find(domains.begin(), domains.end(), d) == domains.end()) {
      domains.push_back(d);
    }
  }
  return ArmForSleep(f, domains, something_waiting);
}

}  // extern "C"

}  // namespace softfab::fabric_internal
