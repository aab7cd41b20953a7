// The RC responder (rxe_resp.c): posting and fetching receive requests, the
// PSN check of each request packet, executing SEND / WRITE / READ, ACKs and
// NAKs (sequence, RNR, remote errors), read responses, and receive completions
// in error.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

void QpImpl::SendAck(Syndrome syn, uint32_t psn, uint32_t aux) {
  FabricImpl* f = dev_->fabric_;
  Ev a{};
  a.op = PktOp::kAck;
  a.syndrome = static_cast<uint8_t>(syn);
  a.src_node = dev_->node_;
  a.dst_node = path_.node;
  a.src_qpn = qp_num();
  a.dst_qpn = attr_.dest_qp_num;
  a.psn = psn;
  a.aux = aux;
  if (syn == Syndrome::kNakRnr) ++f->mutable_stats().rnr_naks;
  f->Transmit(a, 0);
}

void QpImpl::SendReadResponses(const Ev& req) {
  FabricImpl* f = dev_->fabric_;
  const uint32_t n = req.aux;
  const uint32_t mtu = PathMtuBytes();
  for (uint32_t i = 0; i < n; ++i) {
    Ev r{};
    r.op = PktOp::kReadResp;
    r.flags = static_cast<uint8_t>((i == 0 ? kPktFirst : 0) |
                                   (i + 1 == n ? kPktLast : 0));
    r.src_node = dev_->node_;
    r.dst_node = path_.node;
    r.src_qpn = qp_num();
    r.dst_qpn = attr_.dest_qp_num;
    r.psn = PsnAdd(req.psn, i);
    r.offset = static_cast<uint64_t>(i) * mtu;
    const uint64_t left = req.offset > r.offset ? req.offset - r.offset
                                                : 0;  // req.offset = length
    r.length = static_cast<uint32_t>(std::min<uint64_t>(left, mtu));
    r.wqe_seq = req.wqe_seq;
    f->Transmit(r, r.length);
  }
}

void QpImpl::OnRequest(const Ev& ev) {
  FabricImpl* f = dev_->fabric_;
  const int32_t diff = PsnDiff(ev.psn, resp_.epsn);
  if (diff < 0) {
    // Duplicate: re-execute a read (its responses may have been lost), else
    // re-acknowledge.
    if (ev.op == PktOp::kReadReq) {
      QpImpl* req_qp = f->dev(ev.src_node)->QpByNum(ev.src_qpn);
      SendWqe* w = req_qp ? req_qp->sq_.Find(ev.wqe_seq) : nullptr;
      if (w && RemoteTarget(this, w->rkey, w->remote_addr, w->length,
                            transport::kAccessRemoteRead)) {
        SendReadResponses(ev);
      }
      return;
    }
    SendAck(Syndrome::kAck, PsnAdd(resp_.epsn, kPsnMask), 0);
    return;
  }
  if (diff > 0) {
    if (!resp_.nak_sent) {
      resp_.nak_sent = true;
      SendAck(Syndrome::kNakSeq, resp_.epsn, 0);
    }
    return;
  }
  resp_.nak_sent = false;
  QpImpl* req_qp = f->dev(ev.src_node)->QpByNum(ev.src_qpn);
  SendWqe* w = req_qp ? req_qp->sq_.Find(ev.wqe_seq) : nullptr;
  if (w == nullptr) {
    ++f->mutable_stats().packets_dropped;  // the requester's WR is gone; see
                                           // the file comment.
    return;
  }
  const bool last = (ev.flags & kPktLast) != 0;
  // A responder error: NAK the requester, complete the receive in progress (if
  // any) with `local_status` (kSuccess: none is involved), and move this QP to
  // ERROR.
  auto fail = [&](Syndrome syn, WcStatus local_status) {
    SendAck(syn, ev.psn, 0);
    if (local_status != WcStatus::kSuccess && resp_.recv_active) {
      resp_.recv_active = false;
      CompleteRecvError(resp_.wqe.wr_id, local_status, kVendorLocal, &ev);
    }
    ToError();
  };
  // Payload bytes of this packet, contiguous: in the inline copy, in the one
  // requester SGE that holds them all, or gathered into the fabric's staging
  // buffer. `private`: not user memory (the inline copy or the staging
  // buffer), so it cannot overlap the destination.
  const uint8_t* data = f->staging();
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
        ++f->mutable_stats().packets_dropped;  // deregistered since posted
        return;
      }
      data = InOneSge(sges, w->num_sge, ev.offset, ev.length);
      if (data != nullptr) {
        data_private = false;
      } else {
        Gather(sges, w->num_sge, ev.offset, f->staging(), ev.length);
        data = f->staging();
      }
    }
  }
  switch (ev.op) {
    case PktOp::kSend: {
      if (ev.flags & kPktFirst) {
        if (!FetchRecv()) {
          SendAck(Syndrome::kNakRnr, ev.psn, attr_.min_rnr_timer);
          return;
        }
        if (resp_.capacity == UINT64_MAX) {
          fail(Syndrome::kNakRemOp, WcStatus::kLocProtErr);
          return;
        }
      }
      if (!resp_.recv_active) {
        // A middle/last packet with no message in progress: only possible after
        // the responder was reset mid-message. Dropped; the requester's retry
        // sorts it out.
        ++f->mutable_stats().packets_dropped;
        return;
      }
      if (resp_.bytes + ev.length > resp_.capacity ||
          (last && ev.offset + ev.length > resp_.capacity)) {
        // Too small a receive. A message small enough to be scattered to the
        // CQE (mlx5) is acknowledged and fails in the provider's copy: the
        // receive alone completes in error. Otherwise a responder error with
        // the personality's NAK and receive status; both QPs go to ERROR.
        if (w->length <= f->quirks().scatter_to_cqe_bytes) {
          resp_.recv_active = false;
          resp_.epsn = PsnAdd(resp_.epsn, 1);
          SendAck(Syndrome::kAck, ev.psn, 0);
          CompleteRecvError(resp_.wqe.wr_id, WcStatus::kLocLenErr, kVendorLocal,
                            &ev);
          return;
        }
        fail(f->quirks().rc_recv_too_small_nak, f->quirks().rc_recv_too_small);
        return;
      }
      PlaceBytes(resp_.sges.data(), resp_.wqe.num_sge, ev.offset, data,
                 ev.length, data_private, f->staging());
      f->Written(resp_.sges.data(), resp_.wqe.num_sge, ev.offset, ev.length);
      resp_.bytes = ev.offset + ev.length;
      resp_.epsn = PsnAdd(resp_.epsn, 1);
      if (last) {
        resp_.recv_active = false;
        WorkCompletion wc{};
        wc.wr_id = resp_.wqe.wr_id;
        wc.opcode = WcOpcode::kRecv;
        wc.byte_len = static_cast<uint32_t>(ev.offset + ev.length);
        wc.qp_num = qp_num();
        wc.src_qp = ev.src_qpn;
        wc.slid = static_cast<uint16_t>(ev.src_node + 1);
        if (ev.flags & kPktImm) {
          wc.wc_flags = transport::kWcWithImm;
          wc.imm_data = w->imm;
        }
        SendAck(Syndrome::kAck, ev.psn, 0);
        f->Completed(recv_cq_, wc, this, &ev);
      }
      return;
    }
    case PktOp::kWrite: {
      uint8_t* target = RemoteTarget(this, w->rkey, w->remote_addr, w->length,
                                     transport::kAccessRemoteWrite);
      if (target == nullptr) {
        fail(Syndrome::kNakRemAccess, WcStatus::kSuccess);
        return;
      }
      const bool with_imm = (ev.flags & kPktImm) != 0;
      if (last && with_imm) {
        if (!FetchRecv()) {
          SendAck(Syndrome::kNakRnr, ev.psn, attr_.min_rnr_timer);
          return;
        }
        if (resp_.capacity == UINT64_MAX) {
          fail(Syndrome::kNakRemOp, WcStatus::kLocProtErr);
          return;
        }
      }
      if (ev.length > 0) {
        std::memmove(target + ev.offset, data, ev.length);
        if (f->config().observer != nullptr) [[unlikely]] {
          f->config().observer->OnMemoryWritten(target + ev.offset, ev.length);
        }
      }
      resp_.epsn = PsnAdd(resp_.epsn, 1);
      if (last) {
        SendAck(Syndrome::kAck, ev.psn, 0);
        if (with_imm) {
          resp_.recv_active = false;
          WorkCompletion wc{};
          wc.wr_id = resp_.wqe.wr_id;
          wc.opcode = WcOpcode::kRecvRdmaWithImm;
          wc.byte_len = static_cast<uint32_t>(w->length);
          wc.qp_num = qp_num();
          wc.src_qp = ev.src_qpn;
          wc.slid = static_cast<uint16_t>(ev.src_node + 1);
          wc.wc_flags = transport::kWcWithImm;
          wc.imm_data = w->imm;
          f->Completed(recv_cq_, wc, this, &ev);
        }
      }
      return;
    }
    case PktOp::kReadReq: {
      if (!RemoteTarget(this, w->rkey, w->remote_addr, w->length,
                        transport::kAccessRemoteRead)) {
        fail(Syndrome::kNakRemAccess, WcStatus::kSuccess);
        return;
      }
      resp_.epsn = PsnAdd(resp_.epsn, ev.aux);
      SendReadResponses(ev);
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
