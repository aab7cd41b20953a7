// The link model: latency, bandwidth and MTU of the path between two nodes,
// with the serialisation time of a packet, and the table that gives each pair
// of nodes its link (sim_links_faults.cc puts packets on them).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_LINK_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_LINK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

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

// Node n's port MTU: its SimConfig::port_mtu entry, else active_mtu.
inline Mtu PortMtuOf(const SimConfig& c, int32_t n) {
  return static_cast<size_t>(n) < c.port_mtu.size() ? c.port_mtu[n]
                                                    : c.active_mtu;
}

// Which link joins two nodes: a pair listed in SimConfig::links has its own
// (both directions), every other pair shares the default link. Built once from
// the config; afterwards only a link's `down` flag (timed faults) and its
// remembered serialisation times change.
class LinkTable {
 public:
  explicit LinkTable(const SimConfig& c)
      : nodes_(c.nodes),
        default_link_(MakeLink(c.default_link)),
        index_(static_cast<size_t>(c.nodes) * c.nodes, -1) {
    for (int32_t n = 0; n < c.nodes; ++n) {
      port_mtu_bytes_.push_back(transport::MtuBytes(PortMtuOf(c, n)));
    }
    for (const SimLinkConfig& l : c.links) {
      const int32_t idx = static_cast<int32_t>(links_.size());
      links_.push_back(MakeLink(l));
      index_[static_cast<size_t>(l.node_a) * nodes_ + l.node_b] = idx;
      index_[static_cast<size_t>(l.node_b) * nodes_ + l.node_a] = idx;
    }
  }

  const Link& For(int32_t a, int32_t b) const {
    const int32_t idx = index_[static_cast<size_t>(a) * nodes_ + b];
    return idx < 0 ? default_link_ : links_[idx];
  }
  Link& MutableFor(int32_t a, int32_t b) {
    const int32_t idx = index_[static_cast<size_t>(a) * nodes_ + b];
    return idx < 0 ? default_link_ : links_[idx];
  }
  // The largest packet payload a sends toward b: the smaller of the link's
  // MTU and a's port MTU (256 when either node is unknown, -1). b's port may
  // be smaller still (SimConfig::port_mtu): the sender does not know.
  uint32_t PathMtu(int32_t a, int32_t b) const {
    if (a < 0 || b < 0) return 256;
    return std::min(For(a, b).mtu_bytes, port_mtu_bytes_[a]);
  }
  // Node n's port MTU in bytes.
  uint32_t PortMtuBytes(int32_t n) const { return port_mtu_bytes_[n]; }

 private:
  int32_t nodes_;
  std::vector<uint32_t> port_mtu_bytes_;  // per node
  Link default_link_;
  std::vector<Link> links_;
  std::vector<int32_t> index_;  // [a * nodes + b]: into links_, -1: default
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_LINK_H_
