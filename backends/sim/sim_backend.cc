// The simulated fabric as a transport::Backend (see sim_backend.h).
#include "backends/sim/sim_backend.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace softfab::sim {
namespace {

using transport::WaitResult;

class SimBackend final : public transport::Backend,
                         public transport::Simulation {
 public:
  explicit SimBackend(std::unique_ptr<SimFabric> fabric)
      : fabric_(std::move(fabric)) {}

  int32_t node_count() const override { return fabric_->num_devices(); }

  StatusOr<transport::Device*> OpenDevice(int32_t node,
                                          std::string* why) override {
    transport::Device* device = fabric_->device(node);
    if (device == nullptr) {
      if (why != nullptr) {
        *why = "no such node: the fabric has " +
               std::to_string(fabric_->num_devices());
      }
      return InvalidArgument("no such node");
    }
    return device;
  }
  // A node's HCA belongs to the fabric and lives as long as it.
  void CloseDevice(transport::Device*) override {}

  const transport::Clock& clock() const override { return fabric_->clock(); }
  transport::BackendTuning tuning() const override {
    transport::BackendTuning t;
    t.inline_sends = true;  // small injects skip the tx table
    return t;
  }

  // Nothing arrives while the caller is outside a call, so the sleeper is
  // never asked to arm: the next event runs, or, when none comes before the
  // deadline, the clock goes to the deadline.
  WaitResult Wait(const transport::WaitSet&, uint64_t deadline_ns,
                  transport::Sleeper*) override {
    if (deadline_ns == UINT64_MAX) {
      return fabric_->Step() ? WaitResult::kWoken : WaitResult::kIdle;
    }
    if (fabric_->next_event_ns() > deadline_ns) {
      fabric_->RunUntil(deadline_ns);
    } else {
      fabric_->Step();
    }
    return WaitResult::kWoken;
  }
  uint64_t SetPollHorizon(uint64_t t_ns) override {
    const uint64_t before = fabric_->poll_horizon_ns();
    fabric_->SetPollHorizon(t_ns);
    return before;
  }
  bool HasPendingWork() const override { return fabric_->pending_events() > 0; }
  transport::Simulation* simulation() override { return this; }

  uint64_t RunUntilIdle(uint64_t events_max) override {
    return fabric_->RunUntilIdle(events_max);
  }
  uint64_t RunUntil(uint64_t t_ns) override { return fabric_->RunUntil(t_ns); }
  uint64_t digest() const override { return fabric_->digest(); }

 private:
  std::unique_ptr<SimFabric> fabric_;
};

}  // namespace

std::unique_ptr<transport::Backend> CreateSimBackend(
    std::unique_ptr<SimFabric> fabric) {
  return std::make_unique<SimBackend>(std::move(fabric));
}

}  // namespace softfab::sim
