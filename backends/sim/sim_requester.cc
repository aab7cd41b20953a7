// The requester (rxe_req.c): post send (checks, WQE copy, inline data), and
// Pump, which starts WRs in order (fence, max_rd_atomic, local checks), gives
// them PSNs and transmits their packets; GoBack rewinds it for a retry.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

void QpImpl::GoBack(uint32_t psn) {
  for (uint64_t i = sq_.head; i < sq_.assigned; ++i) {
    const SendWqe& w = sq_.Slot(i);
    const int32_t d = PsnDiff(psn, w.first_psn);
    if (d >= 0 && d < static_cast<int32_t>(w.npkts)) {
      req_.tx_wqe = i;
      req_.tx_pkt =
          w.opcode == WrOpcode::kRdmaRead ? 0 : static_cast<uint32_t>(d);
      return;
    }
  }
  req_.tx_wqe = sq_.assigned;
  req_.tx_pkt = 0;
}

void QpImpl::Pump() {
  assert(sq_.head <= req_.tx_wqe || req_.tx_wqe >= sq_.assigned ||
         sq_.head == sq_.tail);
  assert(req_.tx_wqe <= sq_.tail && sq_.assigned <= sq_.tail);
  FabricImpl* f = dev_->fabric_;
  if (f->doorbells_held()) [[unlikely]] {
    f->HoldPump(this);  // rung when the daemon next advances time
    return;
  }
  const QpState s = attr_.qp_state;
  if ((s != QpState::kRts && s != QpState::kSqd) || comp_.rnr_wait) return;
  bool sent = false;
  const uint32_t mtu = PathMtuBytes();
  // Retransmissions may still run below a WR that failed its local checks;
  // nothing at or after it is sent.
  while (req_.tx_wqe < sq_.tail &&
         !(req_.blocked && req_.tx_wqe >= req_.blocked_at)) {
    SendWqe& w = sq_.Slot(req_.tx_wqe);
    if (req_.tx_wqe == sq_.assigned) {
      if (s == QpState::kSqd) break;
      // A fenced WR waits until every earlier RDMA READ has completed; a READ
      // waits while max_rd_atomic reads are outstanding (the responder's
      // resources, IB C9-150).
      if ((w.send_flags & transport::kSendFence) ||
          w.opcode == WrOpcode::kRdmaRead) {
        uint32_t reads_outstanding = 0;
        for (uint64_t i = sq_.head; i < req_.tx_wqe; ++i) {
          const SendWqe& r = sq_.Slot(i);
          if (r.opcode == WrOpcode::kRdmaRead && r.read_done != r.npkts)
            ++reads_outstanding;
        }
        if ((w.send_flags & transport::kSendFence) && reads_outstanding > 0)
          break;
        if (w.opcode == WrOpcode::kRdmaRead &&
            reads_outstanding >= std::max<uint32_t>(attr_.max_rd_atomic, 1)) {
          break;
        }
      }
      // Local checks the HCA makes as it starts the WR.
      WcStatus err = WcStatus::kSuccess;
      if (!(w.send_flags & transport::kSendInline)) {
        const uint32_t need =
            w.opcode == WrOpcode::kRdmaRead ? transport::kAccessLocalWrite : 0;
        if (CheckSges(dev_, pd_, sq_.Sges(req_.tx_wqe), w.num_sge, need) < 0) {
          err = WcStatus::kLocProtErr;
        } else {
          w.mr_checked = dev_->mr_epoch_ + 1;
        }
      }
      // A UD message longer than the MTU: per the device personality, sent
      // as nothing and completed successfully (IB C10-93.1.1, rxe), or
      // failed with LOC_LEN_ERR.
      bool unsent = false;
      if (init_.qp_type == QpType::kUd && err == WcStatus::kSuccess) {
        // (The path MTU is never above the sending port's.)
        if (w.length > f->PathMtu(dev_->node_, w.ud_node)) {
          if (f->quirks().ud_send_over_mtu_is_silent) {
            unsent = true;
          } else {
            err = WcStatus::kLocLenErr;
          }
        }
      }
      if (err != WcStatus::kSuccess) {
        w.error = err;
        req_.blocked = true;
        req_.blocked_at = req_.tx_wqe;
        // It completes in error (and the QP leaves RTS) once every WR before it
        // has completed: Retire reaches it in order.
        ++sq_.assigned;
        break;
      }
      w.first_psn = req_.next_psn;
      if (init_.qp_type == QpType::kUd) {
        w.npkts = 1;
      } else {
        w.npkts = w.length == 0
                      ? 1
                      : static_cast<uint32_t>((w.length + mtu - 1) / mtu);
      }
      req_.next_psn = PsnAdd(req_.next_psn, w.npkts);
      ++sq_.assigned;
      req_.tx_pkt = 0;
      if (unsent) {
        // It leaves nothing on the port and completes as the next event.
        ScheduleUdSendDone(w.seq, f->now());
        ++req_.tx_wqe;
        continue;
      }
    }
    Ev p{};
    p.src_node = dev_->node_;
    p.src_qpn = qp_num();
    p.wqe_seq = w.seq;
    if (init_.qp_type == QpType::kUd) {
      p.op = PktOp::kUdSend;
      p.dst_node = w.ud_node;
      p.dst_qpn = w.ud_qpn;
      p.psn = w.ud_qkey;
      p.length = static_cast<uint32_t>(w.length);
      if (w.opcode == WrOpcode::kSendWithImm) {
        p.flags = kPktImm;
        p.offset = w.imm;
      }
      if (w.send_flags & transport::kSendSolicited) p.flags |= kPktSolicited;
      p.aux = f->ud_pool().Alloc(w.length, w.ud_traffic_class);
      if (w.send_flags & transport::kSendInline) {
        std::memcpy(f->ud_pool().data(p.aux), sq_.Inline(req_.tx_wqe),
                    w.length);
      } else {
        Gather(sq_.Sges(req_.tx_wqe), w.num_sge, 0, f->ud_pool().data(p.aux),
               w.length);
      }
      const uint64_t seq = w.seq;
      f->Transmit(p, p.length);
      ScheduleUdSendDone(seq,
                         std::max(f->now(), f->node(dev_->node_).port_free_ns));
      ++req_.tx_wqe;
      continue;
    }
    p.dst_node = path_.node;
    p.dst_qpn = attr_.dest_qp_num;
    const bool imm = w.opcode == WrOpcode::kSendWithImm ||
                     w.opcode == WrOpcode::kRdmaWriteWithImm;
    if (w.opcode == WrOpcode::kRdmaRead) {
      p.op = PktOp::kReadReq;
      p.psn = w.first_psn;
      p.aux = w.npkts;
      p.offset = w.length;  // the read length travels in `offset`
      p.flags = kPktFirst | kPktLast;
      f->Transmit(p, 16);
      sent = true;
      ++req_.tx_wqe;
      req_.tx_pkt = 0;
      continue;
    }
    p.op = (w.opcode == WrOpcode::kSend || w.opcode == WrOpcode::kSendWithImm)
               ? PktOp::kSend
               : PktOp::kWrite;
    for (; req_.tx_pkt < w.npkts; ++req_.tx_pkt) {
      p.psn = PsnAdd(w.first_psn, req_.tx_pkt);
      p.offset = static_cast<uint64_t>(req_.tx_pkt) * mtu;
      p.length =
          static_cast<uint32_t>(std::min<uint64_t>(w.length - p.offset, mtu));
      p.flags = static_cast<uint8_t>(
          (req_.tx_pkt == 0 ? kPktFirst : 0) |
          (req_.tx_pkt + 1 == w.npkts ? kPktLast : 0) | (imm ? kPktImm : 0));
      // The SE bit: on the last packet of a SEND or WRITE_WITH_IMM (not of a
      // plain WRITE, which completes nothing at the responder). Tested here,
      // not kept in a variable across the loop, to cost the data path least.
      // (Only RC SEND, SEND_WITH_IMM and the WRITEs come here.)
      if (w.send_flags & transport::kSendSolicited) [[unlikely]] {
        if ((p.flags & kPktLast) && w.opcode != WrOpcode::kRdmaWrite)
          p.flags |= kPktSolicited;
      }
      f->Transmit(p, p.length);
    }
    sent = true;
    ++req_.tx_wqe;
    req_.tx_pkt = 0;
  }
  if (sent && (comp_.timer_deadline_ns == 0)) ArmTimer();
  if (req_.blocked) Retire();
}

void QpImpl::ScheduleUdSendDone(uint64_t seq, uint64_t t_ns) {
  Ev done{};
  done.kind = EvKind::kUdSendDone;
  done.src_node = dev_->node_;
  done.src_qpn = qp_num();
  done.aux = incarnation_;
  done.wqe_seq = seq;
  dev_->fabric_->Schedule(t_ns, done);
}

// A UD send's time on the wire is over: it completes, in order (Retire),
// unless its QP is gone (destroyed, or its number given to a later QP).
void FabricImpl::OnUdSendDone(const Ev& ev) {
  QpImpl* qp = TimerQp(ev.src_node, ev.src_qpn, ev.aux);
  if (qp == nullptr) return;
  SendWqe* w = qp->sq_.Find(ev.wqe_seq);
  if (w == nullptr) return;
  w->done = true;
  qp->Retire();
}

Status QpImpl::PostSend(const SendWr* wr, const SendWr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  for (; wr != nullptr; wr = wr->next) {
    Status s;
    const QpState st = attr_.qp_state;
    const bool is_ud = init_.qp_type == QpType::kUd;
    uint64_t total = 0;
    int32_t ud_node = -1;
    uint8_t ud_traffic_class = 0;
    if (st == QpState::kReset || st == QpState::kInit || st == QpState::kRtr) {
      s = InvalidArgument("post_send needs RTS, SQD, SQE or ERROR");
    } else if (static_cast<uint32_t>(wr->opcode) >
               static_cast<uint32_t>(WrOpcode::kRdmaRead)) {
      s = InvalidArgument("unknown opcode");
    } else if (is_ud && wr->opcode != WrOpcode::kSend &&
               wr->opcode != WrOpcode::kSendWithImm) {
      s = InvalidArgument("UD supports SEND and SEND_WITH_IMM only");
    } else if (wr->send_flags & ~transport::kSendFlagsAll) {
      s = InvalidArgument("unknown send flags");
    } else if (wr->num_sge < 0 ||
               static_cast<uint32_t>(wr->num_sge) > sq_.sge_max()) {
      s = InvalidArgument("num_sge exceeds max_send_sge");
    } else if (wr->num_sge > 0 && wr->sg_list == nullptr) {
      s = InvalidArgument("sg_list is null");
    } else if (sq_.full()) {
      s = NoMemory("send queue full");
    } else {
      for (int i = 0; i < wr->num_sge; ++i) total += SgeLength(wr->sg_list[i]);
      if (wr->send_flags & transport::kSendInline) {
        if (wr->opcode == WrOpcode::kRdmaRead) {
          s = InvalidArgument("INLINE with RDMA_READ");
        } else if (total > sq_.inline_max()) {
          s = InvalidArgument("inline data exceeds max_inline_data");
        }
      }
      if (s.ok() && is_ud) {
        const AhImpl* ah = static_cast<const AhImpl*>(wr->ud.ah);
        if (ah == nullptr) {
          s = InvalidArgument("UD send without an address handle");
        } else if (ah->pd_ != pd_) {
          s = InvalidArgument("address handle from another PD");
        } else {
          ud_node = ah->node_;
          ud_traffic_class = ah->traffic_class_;
        }
      }
      if (s.ok() && total > kSgeZeroLength)
        s = InvalidArgument("message longer than 2^31");
    }
    if (!s.ok()) {
      if (bad_wr != nullptr) *bad_wr = wr;
      Pump();  // the requests before the bad one are posted and start
      return s;
    }
    const uint64_t idx = sq_.tail;
    SendWqe& w = sq_.Slot(idx);
    w = SendWqe{};
    w.wr_id = wr->wr_id;
    w.seq = idx;
    w.length = total;
    w.remote_addr = wr->rdma.remote_addr;
    w.rkey = wr->rdma.rkey;
    w.imm = wr->imm_data;
    w.ud_qpn = wr->ud.remote_qpn;
    w.ud_qkey = wr->ud.remote_qkey;
    w.ud_node = ud_node;
    w.ud_traffic_class = ud_traffic_class;
    w.num_sge = static_cast<uint32_t>(wr->num_sge);
    w.opcode = wr->opcode;
    w.send_flags = wr->send_flags;
    w.error = WcStatus::kSuccess;
    Sge* sges = sq_.MutableSges(idx);
    for (int i = 0; i < wr->num_sge; ++i) sges[i] = wr->sg_list[i];
    if (wr->send_flags & transport::kSendInline) {
      Gather(wr->sg_list, w.num_sge, 0, sq_.MutableInline(idx), total);
    }
    ++sq_.tail;
    if (st == QpState::kError || st == QpState::kSqe) {
      // Accepted, and flushed at once.
      ++sq_.head;
      sq_.assigned = req_.tx_wqe = sq_.tail;
      CompleteSend(w, WcStatus::kWrFlushErr, kVendorFlush);
      continue;
    }
  }
  Pump();
  return Status::Ok();
}

}  // namespace softfab::sim::internal
