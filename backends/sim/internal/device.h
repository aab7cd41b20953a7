// One node's HCA, the transport::Device: it owns every object created on it
// (indexed by handle, lkey/rkey and QP number) and its async event queue.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_DEVICE_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_DEVICE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "backends/sim/internal/address.h"
#include "backends/sim/internal/channel.h"
#include "backends/sim/internal/common.h"
#include "backends/sim/internal/cq.h"
#include "backends/sim/internal/mr.h"
#include "backends/sim/internal/pd.h"
#include "backends/sim/internal/qp.h"
#include "backends/sim/internal/rng.h"
#include "backends/sim/internal/srq.h"

namespace softfab::sim::internal {

class DeviceImpl final : public transport::Device {
 public:
  DeviceImpl(FabricImpl* fabric, int32_t node);
  const char* name() const override { return name_; }
  Status QueryDevice(DeviceAttr* attr) const override;
  Status QueryPort(uint8_t port_num, PortAttr* attr) const override;
  Status QueryGid(uint8_t port_num, int index, Gid* gid) const override;
  StatusOr<ProtectionDomain*> AllocPd() override;
  StatusOr<CompletionQueue*> CreateCq(int32_t cqe) override;
  StatusOr<CompletionChannel*> CreateCompChannel() override;
  StatusOr<CompletionQueue*> CreateCqOnChannel(
      int32_t cqe, CompletionChannel* channel) override;
  Status GetAsyncEvent(AsyncEvent* event) override;
  std::optional<bool> AsyncEventPending() const override {
    return !events_.empty();
  }
  const transport::Clock& clock() const override;
  void ScheduleWakeup(uint64_t t_ns) override;
  uint64_t Random() override { return random_.Next(); }

  void Raise(AsyncEventType type, uint32_t qp_num, uint32_t cq, uint32_t srq);
  MrImpl* MrByKey(uint32_t key) const {
    const uint32_t index = key >> 8;
    return index < mrs_.size() ? mrs_[index].get() : nullptr;
  }
  // The index (number - kQpnBase) a new QP takes, per
  // SimConfig::qp_number_cycle; its slot in qps_ exists and is empty.
  StatusOr<uint32_t> FreeQpIndex();
  QpImpl* QpByNum(uint32_t qpn) const {
    if (qpn < kQpnBase) return nullptr;
    const uint32_t index = qpn - kQpnBase;
    return index < qps_.size() ? qps_[index].get() : nullptr;
  }

  FabricImpl* fabric_;
  int32_t node_;
  Rng random_;  // Random(): this node's stream of the master seed
  char name_[24];
  std::vector<std::unique_ptr<PdImpl>> pds_;
  std::vector<std::unique_ptr<MrImpl>> mrs_;
  std::vector<std::unique_ptr<CqImpl>> cqs_;
  std::vector<std::unique_ptr<ChannelImpl>> channels_;
  std::vector<std::unique_ptr<SrqImpl>> srqs_;
  std::vector<std::unique_ptr<QpImpl>> qps_;
  std::vector<std::unique_ptr<AhImpl>> ahs_;
  std::deque<AsyncEvent> events_;
  // QP numbering (SimConfig::qp_number_cycle): where the next search for a
  // free number starts, and how many QPs were created (each QP's
  // incarnation, which its timers' events carry: a number given again must
  // not take a destroyed QP's timer).
  uint32_t next_qp_index_ = 0;
  uint32_t qps_created_ = 0;
  uint32_t mr_tag_ = 1;
  uint64_t mr_epoch_ = 0;  // +1 per deregistration (MrImpl::Destroy)
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_DEVICE_H_
