// The per-packet half of the fault plan (FaultPlan::packet_faults; the timed
// half is an event, FabricImpl::OnTimedFault): each rule with its own random
// stream, derived from the master seed and the rule's index, and a count of
// the packets it has hit. Transmit asks it about every packet it puts on a
// link, after the link has timed it; nothing else draws from these streams,
// so a rule's choices depend only on the packets it was asked about.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_PACKET_FAULTS_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_PACKET_FAULTS_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/sim/internal/event.h"
#include "backends/sim/internal/rng.h"
#include "backends/sim/sim_fabric.h"

namespace softfab::sim::internal {

class PacketFaults {
 public:
  // What the rules did to a packet they let through.
  struct Effect {
    uint64_t delay_ns = 0;      // added to its arrival time
    bool duplicate = false;     // a copy arrives dup_delay_ns after it
    uint64_t dup_delay_ns = 0;  // (the last duplicating rule's delay)
  };

  // `rules` must outlive this object (the fabric's own copy of the config).
  PacketFaults(const std::vector<PacketFault>& rules, uint64_t master_seed)
      : rules_(rules), counts_(rules.size(), 0) {
    for (size_t i = 0; i < rules.size(); ++i) {
      rngs_.emplace_back(DeriveSeed(master_seed, 1000 + i));
    }
  }

  // Applies the rules, in order, to `pkt` sent at now_ns: each one whose
  // scope matches draws from its stream and, if it fires, counts the packet
  // and acts. A drop ends it (false: the packet is lost); a corruption marks
  // the packet (kPktCorrupt: the receiver drops it as an ICRC failure);
  // delays add up in *effect, and a duplication asks for a copy. Inlined
  // into Transmit, its one caller: with no rules it costs one test a packet.
  [[gnu::always_inline]] bool Apply(uint64_t now_ns, Ev* pkt, Effect* effect) {
    for (size_t i = 0; i < rules_.size(); ++i) {
      const PacketFault& f = rules_[i];
      if (counts_[i] >= f.count_max) continue;
      if (now_ns < f.start_ns || now_ns >= f.end_ns) continue;
      if (f.src_node >= 0 && f.src_node != pkt->src_node) continue;
      if (f.dst_node >= 0 && f.dst_node != pkt->dst_node) continue;
      if (f.qp_num != 0 && f.qp_num != pkt->src_qpn && f.qp_num != pkt->dst_qpn)
        continue;
      if ((f.opcode_mask & OpBit(pkt->op)) == 0) continue;
      if (!rngs_[i].Chance(f.probability)) continue;
      ++counts_[i];
      switch (f.kind) {
        case PacketFaultKind::kDrop:
          return false;
        case PacketFaultKind::kCorrupt:
          pkt->flags |= kPktCorrupt;
          break;
        case PacketFaultKind::kDuplicate:
          effect->duplicate = true;
          effect->dup_delay_ns = f.delay_ns;
          break;
        case PacketFaultKind::kReorder:
        case PacketFaultKind::kDelayFixed:
          effect->delay_ns += f.delay_ns;
          break;
        case PacketFaultKind::kDelayExponential:
          effect->delay_ns += rngs_[i].Exponential(f.delay_ns);
          break;
      }
    }
    return true;
  }

 private:
  // The PacketFault::opcode_mask bit of a packet opcode.
  static uint32_t OpBit(PktOp op) {
    switch (op) {
      case PktOp::kSend:
        return kFaultOpSend;
      case PktOp::kWrite:
        return kFaultOpWrite;
      case PktOp::kReadReq:
        return kFaultOpReadReq;
      case PktOp::kReadResp:
        return kFaultOpReadResp;
      case PktOp::kAck:
        return kFaultOpAck;
      case PktOp::kUdSend:
        return kFaultOpUd;
    }
    return 0;
  }

  std::span<const PacketFault> rules_;
  std::vector<Rng> rngs_;         // one stream per rule
  std::vector<uint32_t> counts_;  // packets each rule hit (up to count_max)
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_PACKET_FAULTS_H_
