// The link model: latency, bandwidth and MTU of the path between two nodes,
// with the serialisation time of a packet (sim_links_faults.cc puts packets on
// it).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_LINK_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_LINK_H_

#include <cstdint>

#include "backends/sim/internal/common.h"
#include "backends/sim/sim_fabric.h"

namespace softfab::sim::internal {

struct Link {
  uint64_t latency_ns;
  uint64_t bandwidth_bps;
  uint32_t mtu_bytes;
  bool down;
  // Serialisation times remembered (packet sizes repeat, so this saves a
  // division per packet): header-only packets (ACKs), and the last other size.
  uint64_t header_ser_ns = 0;
  uint64_t ser_bytes = 0;
  uint64_t ser_ns = 0;

  static uint64_t WireNs(uint64_t bytes, uint64_t bandwidth_bps) {
    return bandwidth_bps == 0 ? 0 : bytes * 8'000'000'000ull / bandwidth_bps;
  }
  // Wire time of a packet of `bytes` bytes (headers included) in ns.
  uint64_t SerializationNs(uint64_t bytes) {
    if (bytes == kHeaderBytes) return header_ser_ns;
    if (bytes != ser_bytes) {
      ser_bytes = bytes;
      ser_ns = WireNs(bytes, bandwidth_bps);
    }
    return ser_ns;
  }
};

inline Link MakeLink(const SimLinkConfig& c) {
  return Link{c.latency_ns,
              c.bandwidth_bps,
              transport::MtuBytes(c.mtu),
              false,
              Link::WireNs(kHeaderBytes, c.bandwidth_bps),
              0,
              0};
}

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_LINK_H_
