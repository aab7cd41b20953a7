// Real devices as a transport::Backend (see verbs_backend.h).
#include "backends/verbs/verbs_backend.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/verbs/internal/objects.h"

namespace softfab::verbs {
namespace {

using transport::WaitResult;

// A sleeper wakes at least this often to run the protocol's own timers
// (connection-request retries), which no completion announces; one whose CQs
// could not all be armed wakes every millisecond instead.
constexpr uint64_t kTimerSliceNs = 10'000'000;
constexpr uint64_t kUnarmedSliceNs = 1'000'000;

class VerbsBackend final : public transport::Backend {
 public:
  // `every_node`: every node opens per_node[0] (up to kVerbsNodesMax);
  // otherwise node i opens per_node[i].
  VerbsBackend(std::vector<VerbsOptions> per_node, bool every_node)
      : per_node_(std::move(per_node)), every_node_(every_node) {}

  int32_t node_count() const override {
    return every_node_ ? kVerbsNodesMax
                       : static_cast<int32_t>(per_node_.size());
  }

  StatusOr<transport::Device*> OpenDevice(int32_t node,
                                          std::string* why) override {
    if (why != nullptr) why->clear();
    if (node < 0 || node >= node_count()) {
      return InvalidArgument(every_node_ ? "node must be in [0, 64) on verbs"
                                         : "no such device in the list");
    }
    const VerbsOptions& options =
        per_node_[every_node_ ? 0 : static_cast<size_t>(node)];
    StatusOr<std::unique_ptr<VerbsDevice>> device =
        OpenVerbsDevice(options, why);
    if (!device.ok()) return device.status();
    devices_.push_back(std::move(*device));
    return static_cast<transport::Device*>(devices_.back().get());
  }
  // Closing the context destroys whatever is left of it.
  void CloseDevice(transport::Device* device) override {
    auto it = std::find_if(devices_.begin(), devices_.end(),
                           [device](const std::unique_ptr<VerbsDevice>& d) {
                             return d.get() == device;
                           });
    if (it != devices_.end()) devices_.erase(it);
  }

  const transport::Clock& clock() const override { return clock_; }
  // Real networks: retry a connection request every 10 ms for 5 s (a peer
  // that makes no progress for a while must not fail the connection), and
  // let the device copy small sends at post, and put receive buffers back in
  // chains.
  transport::BackendTuning tuning() const override {
    transport::BackendTuning t;
    t.inline_sends = true;
    t.defer_reposts = true;
    t.cm_retry_ns = 10'000'000;
    t.cm_retries_max = 500;
    return t;
  }

  WaitResult Wait(const transport::WaitSet& set, uint64_t deadline_ns,
                  transport::Sleeper* sleeper) override {
    bool armed = true;
    if (sleeper != nullptr) {
      armed = sleeper->Arm();
      if (sleeper->Ready()) return WaitResult::kWoken;
    }
    const uint64_t now = clock_.NowNs();
    if (now >= deadline_ns) return WaitResult::kWoken;
    uint64_t left = deadline_ns - now;
    if (sleeper != nullptr) {
      left = std::min(left, armed ? kTimerSliceNs : kUnarmedSliceNs);
    }
    fds_.clear();
    for (size_t i = 0; i < set.channel_count; ++i) {
      fds_.push_back({set.channels[i]->fd(), POLLIN, 0});
    }
    // poll() sleeps whole milliseconds: round up, so a wait never ends
    // before its deadline. No deadline and nothing to arm: sleep until a
    // channel fires.
    const int timeout_ms = deadline_ns == UINT64_MAX && sleeper == nullptr
                               ? -1
                               : static_cast<int>(std::min<uint64_t>(
                                     (left + 999'999) / 1'000'000, INT32_MAX));
    // A failure other than a signal ends this wait early too; the caller
    // looks again.
    if (poll(fds_.data(), fds_.size(), timeout_ms) < 0 && errno == EINTR) {
      return WaitResult::kInterrupted;
    }
    return WaitResult::kWoken;
  }
  uint64_t SetPollHorizon(uint64_t) override { return UINT64_MAX; }
  bool HasPendingWork() const override { return false; }
  transport::Simulation* simulation() override { return nullptr; }

 private:
  const std::vector<VerbsOptions> per_node_;
  const bool every_node_;
  internal::MonotonicClock clock_;
  std::vector<std::unique_ptr<VerbsDevice>> devices_;
  std::vector<pollfd> fds_;
};

}  // namespace

std::unique_ptr<transport::Backend> CreateVerbsBackend(
    const VerbsOptions& options) {
  return std::make_unique<VerbsBackend>(std::vector<VerbsOptions>{options},
                                        /*every_node=*/true);
}

std::unique_ptr<transport::Backend> CreateVerbsListBackend(
    std::vector<std::string> names) {
  std::vector<VerbsOptions> per_node(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    per_node[i].device_name = std::move(names[i]);
  }
  return std::make_unique<VerbsBackend>(std::move(per_node),
                                        /*every_node=*/false);
}

}  // namespace softfab::verbs
