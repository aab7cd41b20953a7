// Addressing: which node a GID or LID names (node n has LID n + 1 and an
// IPv4-mapped GID ending in 10.x.y.z), and address handles for UD sends
// (rxe_av.c).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_ADDRESS_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_ADDRESS_H_

#include <cstdint>

#include "backends/sim/internal/common.h"

namespace softfab::sim::internal {

class AhImpl final : public AddressHandle {
 public:
  AhImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index, int32_t node,
         uint8_t traffic_class)
      : dev_(dev),
        pd_(pd),
        index_(index),
        node_(node),
        traffic_class_(traffic_class) {}
  Status Destroy() override;
  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  int32_t node_;
  uint8_t traffic_class_;  // the GRH's (0 without one)
};

// The GID of `node`'s port.
inline Gid GidOfNode(int32_t node) {
  Gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = 10;
  g.raw[13] = static_cast<uint8_t>(node >> 16);
  g.raw[14] = static_cast<uint8_t>(node >> 8);
  g.raw[15] = static_cast<uint8_t>(node);
  return g;
}

// The node `ah` names, or -1 if it names no reachable port.
int32_t NodeOfAh(const FabricImpl* f, const AhAttr& ah);

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_ADDRESS_H_
