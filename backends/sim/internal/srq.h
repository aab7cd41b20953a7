// Shared receive queues (rxe_srq.c): one RecvRing that several QPs fetch from,
// with the limit that raises SRQ_LIMIT_REACHED once.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_SRQ_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_SRQ_H_

#include <cstdint>

#include "backends/sim/internal/common.h"
#include "backends/sim/internal/recv_ring.h"

namespace softfab::sim::internal {

class SrqImpl final : public SharedReceiveQueue {
 public:
  SrqImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index)
      : dev_(dev), pd_(pd), index_(index) {}
  Status PostRecv(const RecvWr* wr, const RecvWr** bad_wr) override;
  Status Modify(const SrqAttr& attr, uint32_t attr_mask) override;
  Status Query(SrqAttr* attr) const override;
  uint32_t handle() const override { return index_; }
  Status Destroy() override;

  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  uint32_t refs_ = 0;
  uint32_t limit_ = 0;
  RecvRing ring_;
  uint64_t post_calls_ = 0;  // PostRecv calls; read only by tests
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_SRQ_H_
