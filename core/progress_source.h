// How reading a queue drives the protocol (manual progress, fi_domain(3)'s
// FI_PROGRESS_MANUAL): a ProgressSource is something whose progress runs when
// a queue it reports to is read (an endpoint, a listener), and
// ProgressSources is the list a completion queue, an event queue or a shared
// receive context holds of them. Sources register themselves when they bind
// (Endpoint::BindCq, BindEq, Enable) and leave when they unbind or go away;
// a read runs them in the order they registered, which is what keeps the
// simulator's runs reproducible. Not thread-safe.
#ifndef SOFTFAB_CORE_PROGRESS_SOURCE_H_
#define SOFTFAB_CORE_PROGRESS_SOURCE_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace softfab::core {

class ProgressSource {
 public:
  // Polls the transport and runs the protocol; may write entries to the
  // queues the source reports to. Never registers or unregisters sources.
  virtual void Progress() = 0;
  // The thread that reads the queue is about to sleep in a fabric whose time
  // moves only while every process sleeps (Backend::ParksIdleReads): work
  // that only a later completion would finish is finished first (an
  // endpoint's unsignaled sends: Endpoint::KickUnsignaled), as nothing that
  // process does while asleep will.
  virtual void BeforeSleep() {}

 protected:
  ~ProgressSource() = default;
};

// The sources bound to one queue, in registration order. The list does not
// own them: a source removes itself before it is destroyed. `Source` is
// ProgressSource, or a kind of it whose holder needs more of it (a shared
// receive context's endpoints).
template <typename Source = ProgressSource>
class ProgressSources {
 public:
  // Registers `source` at the end; nothing when it is registered already
  // (it keeps its place).
  void Add(Source* source) {
    if (std::find(sources_.begin(), sources_.end(), source) == sources_.end()) {
      sources_.push_back(source);
    }
  }
  void Remove(Source* source) {
    auto it = std::find(sources_.begin(), sources_.end(), source);
    if (it != sources_.end()) sources_.erase(it);
  }
  size_t size() const { return sources_.size(); }
  bool empty() const { return sources_.empty(); }
  Source* front() const { return sources_.front(); }
  auto begin() const { return sources_.begin(); }
  auto end() const { return sources_.end(); }
  // Runs every source's progress once, in registration order.
  void BeforeSleep() const {
    for (size_t i = 0; i < sources_.size(); ++i) sources_[i]->BeforeSleep();
  }
  void Run() const {
    // Index loop: progress does not register or unregister sources.
    for (size_t i = 0; i < sources_.size(); ++i) sources_[i]->Progress();
  }

 private:
  std::vector<Source*> sources_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_PROGRESS_SOURCE_H_
