// Address handles and address resolution (rxe_av.c): the node a LID or GID
// names, and creating and destroying AHs.
#include <cstdint>
#include <memory>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

int32_t NodeOfAh(const FabricImpl* f, const AhAttr& ah) {
  if (ah.port_num != 0 && ah.port_num != 1) return -1;
  if (ah.is_global) {
    const uint8_t* g = ah.grh.dgid.raw;
    for (int i = 0; i < 10; ++i) {
      if (g[i] != 0) return -1;
    }
    if (g[10] != 0xff || g[11] != 0xff || g[12] != 10) return -1;
    const int32_t node = (g[13] << 16) | (g[14] << 8) | g[15];
    return node < f->config().nodes ? node : -1;
  }
  if (ah.dlid == 0 || ah.dlid > f->config().nodes) return -1;
  return ah.dlid - 1;
}

StatusOr<AddressHandle*> PdImpl::CreateAh(const AhAttr& attr) {
  const int32_t node = NodeOfAh(dev_->fabric_, attr);
  if (node < 0) return InvalidArgument("address names no reachable port");
  const uint32_t index = static_cast<uint32_t>(dev_->ahs_.size());
  dev_->ahs_.push_back(std::make_unique<AhImpl>(
      dev_, this, index, node, attr.is_global ? attr.grh.traffic_class : 0));
  ++refs_;
  return static_cast<AddressHandle*>(dev_->ahs_.back().get());
}

Status AhImpl::Destroy() {
  pd_->refs_--;
  dev_->ahs_[index_].reset();
  return Status::Ok();
}

}  // namespace softfab::sim::internal
