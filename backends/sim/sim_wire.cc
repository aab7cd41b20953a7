// Packet arrival (rxe_recv.c's part): the checks every packet passes (corrupt,
// unknown or non-receiving QP, port down, wrong source) before it reaches the
// responder or the completer; and the delivery of UD datagrams with the GRH
// (their payloads travel in internal/ud_pool.h).
#include <cstdint>
#include <cstring>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

void FabricImpl::OnPacket(const Ev& ev) {
  recorder_.Record(TraceKind::kPacketArrive, ev, 0, now());
  if (tap_ != nullptr) [[unlikely]]
    tap_->OnPacket(ev);
  DeviceImpl* d = nodes_[ev.dst_node].device.get();
  QpImpl* qp = d->QpByNum(ev.dst_qpn);
  const bool drop = (ev.flags & kPktCorrupt) != 0 || qp == nullptr ||
                    !qp->Receiving() || nodes_[ev.dst_node].port_down;
  if (drop) {
    ++recorder_.stats().packets_dropped;
    if (ev.op == PktOp::kUdSend) ud_pool_.Release(ev.aux);
    return;
  }
  if (ev.op == PktOp::kUdSend) {
    qp->OnUdDatagram(ev);
    ud_pool_.Release(ev.aux);
    return;
  }
  if (qp->qp_type() != QpType::kRc || ev.src_node != qp->path_.node ||
      ev.src_qpn != qp->attr_.dest_qp_num) {
    ++recorder_.stats().packets_dropped;
    return;
  }
  if (ev.op == PktOp::kAck || ev.op == PktOp::kReadResp) {
    qp->OnResponse(ev);
  } else {
    qp->OnRequest(ev);
  }
}

void QpImpl::OnUdDatagram(const Ev& ev) {
  FabricImpl* f = dev_->fabric_;
  if (qp_type() != QpType::kUd || ev.psn != attr_.qkey) {
    // Wrong type or Q_Key mismatch: silently discarded.
    ++f->mutable_stats().packets_dropped;
    return;
  }
  if (!FetchRecv()) {
    ++f->mutable_stats().packets_dropped;  // no receive request: UD drops.
    return;
  }
  resp_.recv_active = false;
  if (resp_.capacity == UINT64_MAX) {
    CompleteRecvError(resp_.wqe.wr_id, WcStatus::kLocProtErr, kVendorLocal,
                      &ev);
    return;
  }
  if (resp_.capacity < kGrhBytes + ev.length) {
    // No room for the GRH and the payload: the receive completes in error,
    // and the QP goes to ERROR too where the personality says so (rxe).
    CompleteRecvError(resp_.wqe.wr_id, f->quirks().ud_recv_too_small,
                      kVendorLocal, &ev);
    if (f->quirks().ud_recv_too_small_errors_qp) ToError();
    return;
  }
  // GRH: RoCEv2 over IPv4 leaves the first 20 bytes undefined (poisoned here),
  // then the IPv4 header.
  uint8_t* grh = f->staging();
  std::memset(grh, kGrhPoison, 20);
  uint8_t* ip = grh + 20;
  std::memset(ip, 0, 20);
  const uint32_t total = 20 + 8 + 12 + ev.length + 4;
  ip[0] = 0x45;
  ip[1] = f->ud_pool().traffic_class(ev.aux);  // TOS: the sender's class
  ip[2] = static_cast<uint8_t>(total >> 8);
  ip[3] = static_cast<uint8_t>(total);
  ip[8] = 64;
  ip[9] = 17;  // UDP
  const Gid sg = GidOfNode(ev.src_node);
  const Gid dg = GidOfNode(ev.dst_node);
  std::memcpy(ip + 12, sg.raw + 12, 4);
  std::memcpy(ip + 16, dg.raw + 12, 4);
  if (ev.length > 0) {  // An empty datagram's pool buffer may have no data.
    std::memcpy(grh + kGrhBytes, f->ud_pool().data(ev.aux), ev.length);
  }
  Scatter(resp_.sges.data(), resp_.wqe.num_sge, 0, grh, kGrhBytes + ev.length);
  f->Written(resp_.sges.data(), resp_.wqe.num_sge, 0, kGrhBytes + ev.length);
  WorkCompletion wc{};
  wc.wr_id = resp_.wqe.wr_id;
  wc.opcode = WcOpcode::kRecv;
  wc.byte_len = kGrhBytes + ev.length;
  wc.qp_num = qp_num();
  wc.src_qp = ev.src_qpn;
  wc.slid = static_cast<uint16_t>(ev.src_node + 1);
  wc.wc_flags = transport::kWcGrh;
  if (ev.flags & kPktImm) {
    wc.wc_flags |= transport::kWcWithImm;
    wc.imm_data = static_cast<uint32_t>(ev.offset);
  }
  f->Completed(recv_cq_, wc, this, &ev);
}

}  // namespace softfab::sim::internal
