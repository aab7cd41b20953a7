// The daemon's watch over processes started by another launcher; see
// internal/thread_watch.h.
#include "backends/simd/internal/thread_watch.h"

#include <algorithm>

namespace softfab::simd::internal {

bool ThreadWatch::LookAtAll(
    const std::vector<std::unique_ptr<Session>>& sessions,
    const std::map<pid_t, std::vector<ThreadLook>>& known,
    std::map<pid_t, std::vector<ThreadLook>>* out) {
  auto known_of = [&known](pid_t pid) {
    const auto it = known.find(pid);
    return it == known.end() ? nullptr : &it->second;
  };
  std::vector<pid_t> launchers;
  for (const auto& s : sessions) {
    if (!Watched(*s)) continue;
    std::vector<ThreadLook>& looks = (*out)[s->pid];
    if (!reader_.Waiting(s->pid, s->parked ? s->parked_tid : 0, &looks,
                         known_of(s->pid))) {
      return false;
    }
    if (std::find(launchers.begin(), launchers.end(), s->parent) ==
        launchers.end()) {
      launchers.push_back(s->parent);
    }
  }
  for (pid_t p : launchers) {
    const bool a_node = std::any_of(sessions.begin(), sessions.end(),
                                    [p](const auto& s) { return s->pid == p; });
    if (!a_node && !reader_.Waiting(p, 0, &(*out)[p], known_of(p))) {
      return false;
    }
  }
  return true;
}

ThreadWatch::Verdict ThreadWatch::Check(
    const std::vector<std::unique_ptr<Session>>& sessions, uint64_t now_ns) {
  to_look_.clear();
  if (std::none_of(sessions.begin(), sessions.end(),
                   [this](const auto& s) { return Watched(*s); })) {
    busy_ = false;
    now_.clear();
    return Verdict::kSettled;
  }
  if (busy_ && now_ns - checked_ns_ < kRecheckNs) return Verdict::kBusy;
  checked_ns_ = now_ns;
  std::map<pid_t, std::vector<ThreadLook>> second;
  now_.clear();
  // The second look reads a system call again only for a thread that ran
  // since the first.
  const bool settled = LookAtAll(sessions, seen_, &now_) &&
                       LookAtAll(sessions, now_, &second) && now_ == second;
  if (!settled) {
    busy_ = true;
    if (busy_since_ns_ == 0) busy_since_ns_ = now_ns;
    if (now_ns - busy_since_ns_ < watchdog_ms_ * 1'000'000) {
      return Verdict::kBusy;
    }
    if (!named_ && log_ != nullptr) {
      named_ = true;
      std::fprintf(log_,
                   "softfab fabricd: a thread of a rank or of its launcher "
                   "has stayed at work outside the fabric for %llu ms; time "
                   "moves on without it (this run may not be "
                   "reproducible)\n",
                   static_cast<unsigned long long>(watchdog_ms_));
    }
    now_.clear();  // nothing seen that a look could compare with
    return Verdict::kSettled;
  }
  busy_ = false;
  busy_since_ns_ = 0;
  named_ = false;
  for (const auto& s : sessions) {
    if (!Watched(*s) || !s->parked || !s->parked_polling) continue;
    const auto seen = seen_.find(s->pid);
    if (seen == seen_.end() || seen->second != now_[s->pid]) {
      to_look_.push_back(s.get());
    }
  }
  return to_look_.empty() ? Verdict::kSettled : Verdict::kLook;
}

std::vector<Session*> ThreadWatch::TakeLooks() {
  for (Session* s : to_look_) seen_[s->pid] = now_[s->pid];
  std::vector<Session*> looks;
  looks.swap(to_look_);
  return looks;
}

void ThreadWatch::Moved() {
  for (auto& [pid, looks] : now_) seen_[pid] = looks;
  now_.clear();
}

}  // namespace softfab::simd::internal
