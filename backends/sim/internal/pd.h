// Protection domains: the objects a PD creates (MRs, SRQs, QPs, AHs) hold a
// reference on it, so it cannot be destroyed under them.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_PD_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_PD_H_

#include <cstdint>

#include "backends/sim/internal/common.h"

namespace softfab::sim::internal {

class PdImpl final : public ProtectionDomain {
 public:
  PdImpl(DeviceImpl* dev, uint32_t index) : dev_(dev), index_(index) {}
  StatusOr<MemoryRegion*> RegMr(void* addr, uint64_t length,
                                uint32_t access) override;
  StatusOr<SharedReceiveQueue*> CreateSrq(const SrqAttr& attr) override;
  StatusOr<QueuePair*> CreateQp(const QpInitAttr& attr) override;
  StatusOr<AddressHandle*> CreateAh(const AhAttr& attr) override;
  Status Destroy() override;
  DeviceImpl* dev_;
  uint32_t index_;
  uint32_t refs_ = 0;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_PD_H_
