// The RC responder (rxe_resp.c): posting and fetching receive requests, the
// PSN check of each request packet, executing SEND / WRITE / READ, ACKs and
// NAKs (sequence, RNR, remote errors), read responses, and receive completions
// in error.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

void FabricImpl::SendAck(QpImpl* qp, Syndrome syn, uint32_t psn, uint32_t aux) {
  Ev a{};
  a.op = PktOp::kAck;
  a.syndrome = static_cast<uint8_t>(syn);
  a.src_node = qp->dev_->node_;
  a.dst_node = qp->path_.node;
  a.src_qpn = qp->qp_num();
  a.dst_qpn = qp->attr_.dest_qp_num;
  a.psn = psn;
  a.aux = aux;
  if (syn == Syndrome::kNakRnr) ++recorder_.stats().rnr_naks;
  Transmit(a, 0);
}

void FabricImpl::SendReadResponses(QpImpl* qp, const Ev& req) {
  const uint32_t n = req.aux;
  const uint32_t mtu = qp->PathMtuBytes();
  for (uint32_t i = 0; i < n; ++i) {
    Ev r{};
    r.op = PktOp::kReadResp;
    r.flags = static_cast<uint8_t>((i == 0 ? kPktFirst : 0) |
                                   (i + 1 == n ? kPktLast : 0));
    r.src_node = qp->dev_->node_;
    r.dst_node = qp->path_.node;
    r.src_qpn = qp->qp_num();
    r.dst_qpn = qp->attr_.dest_qp_num;
    r.psn = PsnAdd(req.psn, i);
    r.offset = static_cast<uint64_t>(i) * mtu;
    const uint64_t left = req.offset > r.offset ? req.offset - r.offset
                                                : 0;  // req.offset = length
    r.length = static_cast<uint32_t>(std::min<uint64_t>(left, mtu));
    r.wqe_seq = req.wqe_seq;
    Transmit(r, r.length);
  }
}

void FabricImpl::OnRequest(QpImpl* qp, const Ev& ev) {
  const int32_t diff = PsnDiff(ev.psn, qp->resp_.epsn);
  if (diff < 0) {
    // Duplicate: re-execute a read (its responses may have been lost), else
    // re-acknowledge.
    if (ev.op == PktOp::kReadReq) {
      QpImpl* req_qp = dev(ev.src_node)->QpByNum(ev.src_qpn);
      SendWqe* w = req_qp ? req_qp->sq_.Find(ev.wqe_seq) : nullptr;
      if (w && RemoteTarget(qp, w->rkey, w->remote_addr, w->length,
                            transport::kAccessRemoteRead)) {
        SendReadResponses(qp, ev);
      }
      return;
    }
    SendAck(qp, Syndrome::kAck, PsnAdd(qp->resp_.epsn, kPsnMask), 0);
    return;
  }
  if (diff > 0) {
    if (!qp->resp_.nak_sent) {
      qp->resp_.nak_sent = true;
      SendAck(qp, Syndrome::kNakSeq, qp->resp_.epsn, 0);
    }
    return;
  }
  qp->resp_.nak_sent = false;
  QpImpl* req_qp = dev(ev.src_node)->QpByNum(ev.src_qpn);
  SendWqe* w = req_qp ? req_qp->sq_.Find(ev.wqe_seq) : nullptr;
  if (w == nullptr) {
    ++recorder_.stats().packets_dropped;  // the requester's WR is gone; see the
                                          // file comment.
    return;
  }
  const bool last = (ev.flags & kPktLast) != 0;
  // A responder error: NAK the requester, complete the receive in progress (if
  // any) with `local_status` (kSuccess: none is involved), and move this QP to
  // ERROR.
  auto fail = [&](Syndrome syn, WcStatus local_status) {
    SendAck(qp, syn, ev.psn, 0);
    if (local_status != WcStatus::kSuccess && qp->resp_.recv_active) {
      qp->resp_.recv_active = false;
      qp->CompleteRecvError(qp->resp_.wqe.wr_id, local_status, kVendorLocal,
                            &ev);
    }
    qp->ToError();
  };
  // Payload bytes of this packet.
  // Payload bytes of this packet, contiguous: in the inline copy, in the one
  // requester SGE that holds them all, or gathered into staging_. `private`:
  // not user memory (the inline copy or staging_), so it cannot overlap the
  // destination.
  const uint8_t* data = staging_.data();
  bool data_private = true;
  if (ev.op != PktOp::kReadReq && ev.length > 0) {
    if (w->send_flags & transport::kSendInline) {
      data = req_qp->sq_.Inline(ev.wqe_seq) + ev.offset;
    } else {
      const Sge* sges = req_qp->sq_.Sges(ev.wqe_seq);
      // Pump checked the SGEs at the first transmission; only a deregistration
      // since then can make them fail.
      if (w->mr_checked != req_qp->dev_->mr_epoch_ + 1 &&
          CheckSges(req_qp->dev_, req_qp->pd_, sges, w->num_sge, 0) < 0) {
        ++recorder_.stats()
              .packets_dropped;  // deregistered since it was posted
        return;
      }
      data = InOneSge(sges, w->num_sge, ev.offset, ev.length);
      if (data != nullptr) {
        data_private = false;
      } else {
        Gather(sges, w->num_sge, ev.offset, staging_.data(), ev.length);
        data = staging_.data();
      }
    }
  }
  switch (ev.op) {
    case PktOp::kSend: {
      if (ev.flags & kPktFirst) {
        if (!qp->FetchRecv()) {
          SendAck(qp, Syndrome::kNakRnr, ev.psn, qp->attr_.min_rnr_timer);
          return;
        }
        if (qp->resp_.capacity == UINT64_MAX) {
          fail(Syndrome::kNakRemOp, WcStatus::kLocProtErr);
          return;
        }
      }
      if (!qp->resp_.recv_active) {
        // A middle/last packet with no message in progress: only possible after
        // the responder was reset mid-message. Dropped; the requester's retry
        // sorts it out.
        ++recorder_.stats().packets_dropped;
        return;
      }
      if (qp->resp_.bytes + ev.length > qp->resp_.capacity ||
          (last && ev.offset + ev.length > qp->resp_.capacity)) {
        // Too small a receive. A message small enough to be scattered to the
        // CQE (mlx5) is acknowledged and fails in the provider's copy: the
        // receive alone completes in error. Otherwise a responder error with
        // the personality's NAK and receive status; both QPs go to ERROR.
        if (w->length <= quirks_.scatter_to_cqe_bytes) {
          qp->resp_.recv_active = false;
          qp->resp_.epsn = PsnAdd(qp->resp_.epsn, 1);
          SendAck(qp, Syndrome::kAck, ev.psn, 0);
          qp->CompleteRecvError(qp->resp_.wqe.wr_id, WcStatus::kLocLenErr,
                                kVendorLocal, &ev);
          return;
        }
        fail(quirks_.rc_recv_too_small_nak, quirks_.rc_recv_too_small);
        return;
      }
      PlaceBytes(qp->resp_.sges.data(), qp->resp_.wqe.num_sge, ev.offset, data,
                 ev.length, data_private);
      qp->resp_.bytes = ev.offset + ev.length;
      qp->resp_.epsn = PsnAdd(qp->resp_.epsn, 1);
      if (last) {
        qp->resp_.recv_active = false;
        WorkCompletion wc{};
        wc.wr_id = qp->resp_.wqe.wr_id;
        wc.opcode = WcOpcode::kRecv;
        wc.byte_len = static_cast<uint32_t>(ev.offset + ev.length);
        wc.qp_num = qp->qp_num();
        wc.src_qp = ev.src_qpn;
        wc.slid = static_cast<uint16_t>(ev.src_node + 1);
        if (ev.flags & kPktImm) {
          wc.wc_flags = transport::kWcWithImm;
          wc.imm_data = w->imm;
        }
        SendAck(qp, Syndrome::kAck, ev.psn, 0);
        Completed(qp->recv_cq_, wc, qp, &ev);
      }
      return;
    }
    case PktOp::kWrite: {
      uint8_t* target = RemoteTarget(qp, w->rkey, w->remote_addr, w->length,
                                     transport::kAccessRemoteWrite);
      if (target == nullptr) {
        fail(Syndrome::kNakRemAccess, WcStatus::kSuccess);
        return;
      }
      const bool with_imm = (ev.flags & kPktImm) != 0;
      if (last && with_imm) {
        if (!qp->FetchRecv()) {
          SendAck(qp, Syndrome::kNakRnr, ev.psn, qp->attr_.min_rnr_timer);
          return;
        }
        if (qp->resp_.capacity == UINT64_MAX) {
          fail(Syndrome::kNakRemOp, WcStatus::kLocProtErr);
          return;
        }
      }
      if (ev.length > 0) std::memmove(target + ev.offset, data, ev.length);
      qp->resp_.epsn = PsnAdd(qp->resp_.epsn, 1);
      if (last) {
        SendAck(qp, Syndrome::kAck, ev.psn, 0);
        if (with_imm) {
          qp->resp_.recv_active = false;
          WorkCompletion wc{};
          wc.wr_id = qp->resp_.wqe.wr_id;
          wc.opcode = WcOpcode::kRecvRdmaWithImm;
          wc.byte_len = static_cast<uint32_t>(w->length);
          wc.qp_num = qp->qp_num();
          wc.src_qp = ev.src_qpn;
          wc.slid = static_cast<uint16_t>(ev.src_node + 1);
          wc.wc_flags = transport::kWcWithImm;
          wc.imm_data = w->imm;
          Completed(qp->recv_cq_, wc, qp, &ev);
        }
      }
      return;
    }
    case PktOp::kReadReq: {
      if (!RemoteTarget(qp, w->rkey, w->remote_addr, w->length,
                        transport::kAccessRemoteRead)) {
        fail(Syndrome::kNakRemAccess, WcStatus::kSuccess);
        return;
      }
      qp->resp_.epsn = PsnAdd(qp->resp_.epsn, ev.aux);
      SendReadResponses(qp, ev);
      return;
    }
    default:
      return;
  }
}

void QpImpl::CompleteRecvError(uint64_t wr_id, WcStatus status,
                               uint32_t vendor_err, const Ev* pkt) {
  WorkCompletion wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.qp_num = qp_num();
  wc.vendor_err = vendor_err;
  dev_->fabric_->Completed(recv_cq_, wc, this, pkt);
}

bool QpImpl::FetchRecv() {
  FabricImpl* f = dev_->fabric_;
  if (f->now() < f->node(dev_->node_).stall_until_ns) return false;
  if (srq_ != nullptr) {
    if (!srq_->ring_.Pop(&resp_.wqe, resp_.sges.data())) return false;
    if (srq_->limit_ != 0 && srq_->ring_.count() < srq_->limit_) {
      srq_->limit_ = 0;
      dev_->Raise(AsyncEventType::kSrqLimitReached, 0, 0, srq_->index_);
    }
  } else if (!rq_.Pop(&resp_.wqe, resp_.sges.data())) {
    return false;
  }
  resp_.recv_active = true;
  resp_.bytes = 0;
  const int64_t cap = CheckSges(dev_, pd_, resp_.sges.data(), resp_.wqe.num_sge,
                                transport::kAccessLocalWrite);
  resp_.capacity = cap < 0 ? UINT64_MAX : static_cast<uint64_t>(cap);
  return true;
}

Status QpImpl::PostRecv(const RecvWr* wr, const RecvWr** bad_wr) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  for (; wr != nullptr; wr = wr->next) {
    Status s;
    if (srq_ != nullptr) {
      s = InvalidArgument("QP uses an SRQ: post to the SRQ");
    } else if (attr_.qp_state == QpState::kReset) {
      s = InvalidArgument("QP is in RESET");
    } else {
      s = ValidateRecvWr(*wr, rq_.sge_max());
      if (s.ok() && rq_.full()) s = NoMemory("receive queue full");
    }
    if (!s.ok()) {
      if (bad_wr != nullptr) *bad_wr = wr;
      return s;
    }
    if (attr_.qp_state == QpState::kError) {
      CompleteRecvError(wr->wr_id, WcStatus::kWrFlushErr, kVendorFlush,
                        /*pkt=*/nullptr);
      continue;
    }
    rq_.Push(*wr);
  }
  return Status::Ok();
}

}  // namespace softfab::sim::internal
