// Rendezvous (UCX's src/ucp/rndv/, rxm's RNDV read protocol): messages over
// eager_max. The sender registers its payload and sends a request with its
// address and key (and the first FI_OPT_BUFFERED_MIN bytes); the target READs
// the payload into the matched receive and answers kReadDone, which lets the
// sender complete.
#include <algorithm>
#include <cstring>

#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

// ------------------------------------------------------------------- sender

Status Endpoint::ExposeForRead(uint32_t index, const SendArgs& a, size_t len) {
  TxOp& op = tx_.op(index);
  wire::Header& h = op.header;
  op.rendezvous = true;
  h.op = wire::Op::kRendezvous;
  const uint8_t* src = nullptr;
  size_t first = 0;
  while (a.iov[first].iov_len == 0) ++first;
  src = static_cast<const uint8_t*>(a.iov[first].iov_base);
  const bool contiguous = a.iov[first].iov_len == len;
  if (!contiguous) {
    op.rdv_copy.resize(len);
    size_t off = 0;
    for (size_t i = 0; i < a.iov_count; ++i) {
      if (a.iov[i].iov_len == 0) continue;
      std::memcpy(op.rdv_copy.data() + off, a.iov[i].iov_base,
                  a.iov[i].iov_len);
      off += a.iov[i].iov_len;
    }
    src = op.rdv_copy.data();
  }
  tp::MemoryRegion* mr = (contiguous && a.desc) ? a.desc[first] : nullptr;
  const uint64_t at = reinterpret_cast<uint64_t>(src);
  if (mr == nullptr || !(mr->access() & tp::kAccessRemoteRead) ||
      at < mr->addr() || at + len > mr->addr() + mr->length()) {
    // The user's own buffer may come from the registration cache; a copy
    // (several iovecs) is ours and registered for this send only.
    auto reg = contiguous ? AcquireMr(src, len, tp::kAccessRemoteRead)
                          : pd_->RegMr(const_cast<uint8_t*>(src), len,
                                       tp::kAccessRemoteRead);
    if (!reg.ok()) return reg.status();
    op.rdv_mr_cached = contiguous;
    op.rdv_mr = *reg;
    mr = *reg;
  }
  h.aux = at;
  h.rkey = mr->rkey();
  return Status::Ok();
}

// ------------------------------------------------------------------- target

void Endpoint::StartRead(uint32_t rx_index, uint32_t peer, uint32_t epoch,
                         const wire::Header& h, uint64_t cq_flags) {
  RxOp& r = rx_->op(rx_index);
  const uint32_t ri = tx_.TakeRead();
  Read& rd = tx_.read(ri);
  rd.rx = rx_index;
  rd.peer = peer;
  rd.epoch = epoch;
  rd.header = h;
  rd.cq_flags = cq_flags;
  if (r.flags & kMultiRecv) {
    rd.len = std::min<uint64_t>(r.len - r.consumed, h.length);
    rd.buf = static_cast<uint8_t*>(r.iov[0].iov_base) + r.consumed;
    rx_->ConsumeMulti(rx_index, rd.len);  // Later messages go after this one.
    // Its entry is written when the READ is done: the room it was taken
    // with is held until then, so no later message can fill it.
    rd.claimed = rx_->ClaimEntryRoom();
  } else {
    rd.len = std::min<uint64_t>(r.len, h.length);
    rd.buf = r.iov_count > 0 ? r.iov[0].iov_base : nullptr;
  }
  ++r.reads_pending;
  if (epoch != conns_[peer].epoch) {
    // It came on a connection made anew since: its key and address were
    // the sender's failed send's. No READ (on the new connection it would
    // fail that one, or read what the buffer holds now).
    rd.prov_errno = kProvConnectionReset;
    OnReadDone(ri, false);
    return;
  }
  if (rd.len == 0) {
    OnReadDone(ri, true);
    return;
  }
  if (!ReadOrFail(ri)) {
    conns_[peer].reads_waiting.push_back(ri);
    conns_.MarkBusy(peer);
  }
}

bool Endpoint::ReadOrFail(uint32_t ri) {
  const Status s = PostRead(ri);
  if (s.ok()) return true;
  if (s.code() == ENOMEM || s.code() == EAGAIN) return false;
  // A lasting refusal (the device's, or a registration of the receive
  // buffer that failed): the receive fails now, and the READs queued behind
  // it go on.
  Read& rd = tx_.read(ri);
  const Peer& p = conns_[rd.peer];
  if (p.state == PeerState::kConnected) {
    rd.prov_errno = kProvPostRefused;
  } else {
    rd.prov_errno =
        p.failed_prov_errno ? p.failed_prov_errno : kProvPeerUnreachable;
  }
  OnReadDone(ri, false);
  return true;
}

Status Endpoint::PostRead(uint32_t ri) {
  Read& rd = tx_.read(ri);
  const RxOp& r = rx_->op(rd.rx);
  Peer& p = conns_[rd.peer];
  if (p.state != PeerState::kConnected) {
    return Status(EIO, "connection to the sender is gone");
  }
  const bool multi = r.flags & kMultiRecv;
  const size_t pieces = multi ? 1 : r.iov_count;
  // One READ per tx_.read_sge_max() pieces, each from where the previous one's
  // bytes end in the sender's buffer; posted together or not at all.
  uint32_t num_sge = 0;
  size_t left = rd.len;
  for (size_t i = 0; i < pieces && left > 0; ++i) {
    const size_t n = multi ? left : std::min(left, r.iov[i].iov_len);
    num_sge += n > 0;
    left -= n;
  }
  const uint32_t num_wrs =
      (num_sge + tx_.read_sge_max() - 1) / tx_.read_sge_max();
  if (p.sq_outstanding + num_wrs > qp_send_depth() || !SendCqHasRoom(num_wrs)) {
    return TryAgain("send queue or send CQ full");
  }
  // The scatter list: the piece of each buffer the READs fill, each under a
  // registration (the caller's descriptor where it covers, else our own).
  tp::Sge sges[kIovMax];
  num_sge = 0;
  left = rd.len;
  for (size_t i = 0; i < pieces && left > 0; ++i) {
    uint8_t* base = multi ? static_cast<uint8_t*>(rd.buf)
                          : static_cast<uint8_t*>(r.iov[i].iov_base);
    const size_t n = multi ? left : std::min(left, r.iov[i].iov_len);
    if (n == 0) continue;
    tp::MemoryRegion* mr = r.desc[multi ? 0 : i];
    const uint64_t at = reinterpret_cast<uint64_t>(base);
    if (mr == nullptr || !(mr->access() & tp::kAccessLocalWrite) ||
        at < mr->addr() || at + n > mr->addr() + mr->length()) {
      if (rd.mrs[i] == nullptr) {
        auto reg = AcquireMr(base, n, tp::kAccessLocalWrite);
        if (!reg.ok()) return reg.status();
        rd.mrs[i] = *reg;
      }
      mr = rd.mrs[i];
    }
    sges[num_sge++] = tp::Sge{at, static_cast<uint32_t>(n), mr->lkey()};
    left -= n;
  }
  tp::SendWr wrs[kIovMax];
  uint64_t remote = rd.header.aux;
  for (uint32_t w = 0; w < num_wrs; ++w) {
    tp::SendWr& wr = wrs[w];
    wr.wr_id = Sequenced(p, WrId(kWrRead, ri), /*ahead=*/w);
    wr.sg_list = sges + w * tx_.read_sge_max();
    wr.num_sge = static_cast<int32_t>(
        std::min(tx_.read_sge_max(), num_sge - w * tx_.read_sge_max()));
    wr.opcode = tp::WrOpcode::kRdmaRead;
    wr.send_flags = tp::kSendSignaled;
    wr.rdma.remote_addr = remote;
    wr.rdma.rkey = rd.header.rkey;
    wr.next = w + 1 < num_wrs ? &wrs[w + 1] : nullptr;
    for (int32_t k = 0; k < wr.num_sge; ++k) remote += wr.sg_list[k].length;
  }
  const tp::SendWr* bad = nullptr;
  const Status s = p.qp->PostSend(wrs, &bad);
  // The READs before a refused one are posted: they complete (the read then
  // fails as a whole); with none posted the caller fails or retries it.
  const uint32_t posted =
      s.ok() ? num_wrs : static_cast<uint32_t>(bad == nullptr ? 0 : bad - wrs);
  rd.wrs_pending += posted;
  for (uint32_t w = 0; w < posted; ++w) Posted(p, wrs[w].wr_id, true);
  if (posted == 0) return s;
  if (!s.ok() && !rd.failed) {
    rd.failed = true;
    rd.prov_errno = kProvPostRefused;
  }
  return Status::Ok();
}

void Endpoint::OnReadWrDone(uint32_t ri, int status) {
  Read& rd = tx_.read(ri);
  if (status != 0 && !rd.failed) {
    rd.failed = true;
    rd.prov_errno = status;
  }
  if (--rd.wrs_pending == 0) OnReadDone(ri, !rd.failed);
}

void Endpoint::OnReadDone(uint32_t ri, bool ok) {
  Read& rd = tx_.read(ri);
  RxOp& r = rx_->op(rd.rx);
  --r.reads_pending;
  CqEntry e = rx_->RecvEntry(r, SourceOf(rd.peer), rd.header);
  e.flags |= rd.cq_flags;
  e.buf = rd.buf;
  e.len = rd.len;
  const uint64_t total = rd.header.length;
  const int err = !ok ? EIO : (rd.len < total ? kErrTruncated : 0);
  rx_->CompleteRx(rd.rx, e, err, ok ? total - rd.len : 0,
                  ok ? 0 : rd.prov_errno, rd.claimed);
  for (tp::MemoryRegion*& mr : rd.mrs) {
    if (mr) ReleaseMr(mr);
    mr = nullptr;
  }
  // The sender may now release its buffer and complete.
  SendAck(rd.peer, rd.epoch, rd.header.msg_id, wire::Op::kReadDone);
  tx_.FreeRead(ri);
}

StatusOr<tp::MemoryRegion*> Endpoint::AcquireMr(const void* addr, uint64_t len,
                                                uint32_t access) {
  if (attr_.mr_cache) return attr_.mr_cache->Acquire(addr, len, access);
  return pd_->RegMr(const_cast<void*>(addr), len, access);
}

void Endpoint::ReleaseMr(tp::MemoryRegion* mr) {
  if (attr_.mr_cache) {
    attr_.mr_cache->Release(mr);
  } else {
    (void)mr->Destroy();
  }
}

void Endpoint::ReleaseRdvMr(TxOp& op) {
  if (op.rdv_mr_cached) {
    ReleaseMr(op.rdv_mr);
  } else {
    (void)op.rdv_mr->Destroy();
  }
  op.rdv_mr_cached = false;
}

}  // namespace softfab::core
