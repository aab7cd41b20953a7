// The wire tap: an observer the fabric calls with every packet as it reaches
// the destination port (sim_wire.cc), before any check decides its fate. The
// pcap writer (sim_pcap.cc) is its one implementation.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_PACKET_TAP_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_PACKET_TAP_H_

#include "backends/sim/internal/event.h"

namespace softfab::sim::internal {

class PacketTap {
 public:
  virtual ~PacketTap() = default;
  // Called once per packet arrival, at the packet's arrival time (the fabric's
  // clock), in event order: the same packets, in the same order, as the
  // trace's kPacketArrive records. It may read the fabric's objects but must
  // change nothing the fabric does (no event, no state, no RNG draw), so that
  // a run with a tap is the same run without one, digest included.
  virtual void OnPacket(const Ev& packet) = 0;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_PACKET_TAP_H_
