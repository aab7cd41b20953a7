// When the shared fabric's virtual time may move; see internal/time_gate.h.
#include "backends/simd/internal/time_gate.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "backends/simd/mailbox.h"
#include "backends/simd/outside_processes.h"

namespace softfab::simd::internal {

const char* TimeGate::Awake(const Session* s) {
  if (s->window == nullptr) return "it has not said hello";
  const Mailbox box(s->window);
  if (box.ReplyUnread(s->reply_seq)) {
    return "it has not taken the daemon's last reply";
  }
  if (box.RequestWaiting(s->request_seen)) {
    return "its request waits to be served";
  }
  if (!AllThreadsSleep(s->pid)) {
    return "a thread of it is at work (running, or in a timed sleep)";
  }
  return nullptr;
}

bool TimeGate::AsleepOutside(Session* s, uint64_t now, bool fresh) {
  // Nothing of ours unread by it, nothing of its unread by us (a request
  // on its way means it is in a call, waiting for our answer). Heard from
  // within the last millisecond: surely not. /proc is read at most once a
  // millisecond per process while the daemon spins (its loop turns far
  // more often); in between, the last look's answer stands, unless fresh.
  if (!fresh && s->window != nullptr && now == s->outside_looked_ms) {
    return s->asleep_since_ms != 0 && now - s->asleep_since_ms >= 1;
  }
  s->outside_looked_ms = now;
  if (now - s->last_heard_ms < 1 || Awake(s) != nullptr) {
    s->asleep_since_ms = 0;
    return false;
  }
  if (s->asleep_since_ms == 0) s->asleep_since_ms = now;
  return now - s->asleep_since_ms >= 1;
}

TimeGate::Verdict TimeGate::Check(
    const std::vector<std::unique_ptr<Session>>& sessions,
    size_t nodes_connected, uint64_t now, uint64_t now_ns) {
  if (expected_nodes_ > 0 &&
      nodes_connected < static_cast<size_t>(expected_nodes_)) {
    return Verdict::kNo;
  }
  bool any = false, outside = false, outside_long = true;
  std::vector<Session*> sleepers;
  for (const auto& s : sessions) {
    if (s->address_only) continue;         // no node: not in time
    if (s->node < 0) return Verdict::kNo;  // saying hello
    if (s->parked) {
      any = true;
    } else if (AsleepOutside(s.get(), now, /*fresh=*/false)) {
      sleepers.push_back(s.get());
    } else if (outside_ms_ > 0 && now - s->last_heard_ms >= outside_ms_) {
      outside = true;
      outside_long &= now - s->last_heard_ms >= watchdog_ms_;
    } else {
      return Verdict::kNo;
    }
  }
  if (!any) return Verdict::kNo;
  // Everyone else is parked (and stays so: only this loop answers them), so
  // a sleeper seen asleep now, with quiet sockets below, cannot wake before
  // the fabric wakes someone. Look again at each: the answers above may be
  // up to a millisecond old.
  std::vector<pid_t> asleep;
  for (Session* s : sleepers) {
    if (!AsleepOutside(s, now, /*fresh=*/true)) return Verdict::kNo;
    asleep.push_back(s->pid);
  }
  // A sleeper with TCP bytes on their way between processes of the run is
  // about to wake (outside_processes.h): time waits for it.
  if (!asleep.empty() && !LaunchersQuiet(sessions, &asleep))
    return Verdict::kNo;
  switch (watch_->Check(sessions, now_ns)) {
    case ThreadWatch::Verdict::kBusy:
      return Verdict::kNo;
    case ThreadWatch::Verdict::kLook:
      return Verdict::kLook;
    case ThreadWatch::Verdict::kSettled:
      break;
  }
  if (!outside) return Verdict::kEveryoneParked;
  return outside_long ? Verdict::kOutsideLong : Verdict::kSomeoneOutside;
}

bool TimeGate::LaunchersQuiet(
    const std::vector<std::unique_ptr<Session>>& sessions,
    std::vector<pid_t>* asleep) {
  std::vector<pid_t> pids;
  std::vector<unsigned long> ours;
  for (const auto& s : sessions) {
    pids.push_back(s->pid);
    ours.push_back(s->fd_inode);
  }
  for (const auto& s : sessions) {
    const pid_t p = s->parent;
    if (p <= 1 || p == getpid() ||
        std::find(pids.begin(), pids.end(), p) != pids.end()) {
      continue;
    }
    if (!AllThreadsSleep(p)) return false;
    pids.push_back(p);
    asleep->push_back(p);
  }
  return SocketsQuiet(pids, *asleep, std::move(ours));
}

const char* TimeGate::WhyNotAsleep(
    const std::vector<std::unique_ptr<Session>>& sessions, Session* s) const {
  if (const char* why = Awake(s)) return why;
  std::vector<pid_t> asleep = {s->pid};
  if (!LaunchersQuiet(sessions, &asleep)) {
    return "it sleeps outside the fabric, but bytes are on their way to it "
           "or another process of the run (a socket), or its launcher is "
           "at work";
  }
  return "it sleeps outside the fabric, while another process runs";
}

}  // namespace softfab::simd::internal
