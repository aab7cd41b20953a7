// Packets onto links, and the fault plan acting on them: Transmit puts a packet
// through the sending port and its link (internal/link.h: serialisation,
// latency) and lets the per-packet faults act on it (internal/packet_faults.h:
// drop, duplicate, reorder, delay, corrupt); timed faults take links and ports
// down and up, force QPs to ERROR and stall receivers.
#include <algorithm>
#include <cstdint>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

void FabricImpl::Transmit(Ev pkt, uint32_t payload_bytes) {
  pkt.kind = EvKind::kPacket;
  ++recorder_.stats().packets_sent;
  const int32_t src = pkt.src_node;
  const int32_t dst = pkt.dst_node;
  Link& link = links_.MutableFor(src, dst);
  Node& sn = nodes_[src];
  auto drop = [&](uint64_t seq_hint) {
    ++recorder_.stats().packets_dropped;
    recorder_.Record(TraceKind::kPacketDropped, pkt, seq_hint, now());
    if (pkt.op == PktOp::kUdSend) ud_pool_.Release(pkt.aux);
  };
  if (sn.port_down || nodes_[dst].port_down || link.down) {
    drop(loop_.next_seq());
    return;
  }
  const uint64_t bytes = payload_bytes + kHeaderBytes;
  const uint64_t ser = link.SerializationNs(bytes);
  const uint64_t depart = std::max(now(), sn.port_free_ns);
  sn.port_free_ns = depart + ser;
  // A frame larger than the receiving port's MTU leaves, and is dropped
  // there.
  if (payload_bytes > links_.PortMtuBytes(dst)) {
    drop(loop_.next_seq());
    return;
  }
  PacketFaults::Effect effect;
  if (!packet_faults_.Apply(now(), &pkt, &effect)) {
    drop(loop_.next_seq());
    return;
  }
  const uint64_t t = depart + ser + link.latency_ns + effect.delay_ns;
  loop_.Schedule(t, pkt);
  if (effect.duplicate) {
    if (pkt.op == PktOp::kUdSend) ud_pool_.AddRef(pkt.aux);
    loop_.Schedule(t + effect.dup_delay_ns, pkt);
  }
}

void FabricImpl::OnTimedFault(const TimedFault& f) {
  Node& n = nodes_[f.node];
  switch (f.kind) {
    case TimedFaultKind::kLinkDown:
    case TimedFaultKind::kLinkUp: {
      const bool down = f.kind == TimedFaultKind::kLinkDown;
      if (f.peer_node >= 0) {
        links_.MutableFor(f.node, f.peer_node).down = down;
        // A shared default link would take every pair down: give the pair its
        // own entry.
        return;
      }
      if (n.port_down == down) return;
      n.port_down = down;
      n.device->Raise(
          down ? AsyncEventType::kPortErr : AsyncEventType::kPortActive, 0, 0,
          0);
      return;
    }
    case TimedFaultKind::kQpError: {
      QpImpl* qp = n.device->QpByNum(f.qp_num);
      if (qp == nullptr || qp->attr_.qp_state == QpState::kReset ||
          qp->attr_.qp_state == QpState::kError) {
        return;
      }
      n.device->Raise(AsyncEventType::kQpFatal, qp->qp_num(), 0, 0);
      qp->ToError();
      return;
    }
    case TimedFaultKind::kReceiverStall:
      n.stall_until_ns = std::max(n.stall_until_ns, now() + f.duration_ns);
      return;
  }
}

}  // namespace softfab::sim::internal
