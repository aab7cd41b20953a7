// The link model and its fault plan: Transmit puts a packet through the sending
// port and the link (serialisation, latency) and applies the per-packet faults
// (drop, duplicate, reorder, delay, corrupt); timed faults take links and ports
// down and up, force QPs to ERROR and stall receivers.
#include <algorithm>
#include <cstdint>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

namespace {

uint32_t FaultOpBit(PktOp op) {
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

}  // namespace

void FabricImpl::Transmit(Ev pkt, uint32_t payload_bytes) {
  pkt.kind = EvKind::kPacket;
  ++stats_.packets_sent;
  const int32_t src = pkt.src_node;
  const int32_t dst = pkt.dst_node;
  Link& link = MutableLinkFor(src, dst);
  Node& sn = nodes_[src];
  auto drop = [&](uint64_t seq_hint) {
    ++stats_.packets_dropped;
    Record(TraceKind::kPacketDropped, pkt, seq_hint);
    if (pkt.op == PktOp::kUdSend) UdRelease(pkt.aux);
  };
  if (sn.port_down || nodes_[dst].port_down || link.down) {
    drop(queue_.next_seq());
    return;
  }
  const uint64_t bytes = payload_bytes + kHeaderBytes;
  const uint64_t ser = link.SerializationNs(bytes);
  const uint64_t depart = std::max(now_ns_, sn.port_free_ns);
  sn.port_free_ns = depart + ser;
  uint64_t t = depart + ser + link.latency_ns;
  bool duplicate = false;
  uint64_t dup_delay = 0;
  const auto& faults = config_.faults.packet_faults;
  for (size_t i = 0; i < faults.size(); ++i) {
    const PacketFault& f = faults[i];
    if (fault_counts_[i] >= f.count_max) continue;
    if (now_ns_ < f.start_ns || now_ns_ >= f.end_ns) continue;
    if (f.src_node >= 0 && f.src_node != src) continue;
    if (f.dst_node >= 0 && f.dst_node != dst) continue;
    if (f.qp_num != 0 && f.qp_num != pkt.src_qpn && f.qp_num != pkt.dst_qpn)
      continue;
    if ((f.opcode_mask & FaultOpBit(pkt.op)) == 0) continue;
    if (!fault_rngs_[i].Chance(f.probability)) continue;
    ++fault_counts_[i];
    switch (f.kind) {
      case PacketFaultKind::kDrop:
        drop(queue_.next_seq());
        return;
      case PacketFaultKind::kCorrupt:
        pkt.flags |= kPktCorrupt;
        break;
      case PacketFaultKind::kDuplicate:
        duplicate = true;
        dup_delay = f.delay_ns;
        break;
      case PacketFaultKind::kReorder:
      case PacketFaultKind::kDelayFixed:
        t += f.delay_ns;
        break;
      case PacketFaultKind::kDelayExponential:
        t += fault_rngs_[i].Exponential(f.delay_ns);
        break;
    }
  }
  queue_.Push(t, pkt);
  if (duplicate) {
    if (pkt.op == PktOp::kUdSend) ++ud_pool_[pkt.aux].refs;
    queue_.Push(t + dup_delay, pkt);
  }
}

void FabricImpl::OnTimedFault(const TimedFault& f) {
  Node& n = nodes_[f.node];
  switch (f.kind) {
    case TimedFaultKind::kLinkDown:
    case TimedFaultKind::kLinkUp: {
      const bool down = f.kind == TimedFaultKind::kLinkDown;
      if (f.peer_node >= 0) {
        MutableLinkFor(f.node, f.peer_node).down = down;
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
      n.stall_until_ns = std::max(n.stall_until_ns, now_ns_ + f.duration_ns);
      return;
  }
}

}  // namespace softfab::sim::internal
