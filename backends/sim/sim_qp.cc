// Queue pair state (rxe_qp.c): creation, the kernel's qp_state_table with the
// required and optional attributes of each transition, Modify and Query, the
// move to ERROR or SQE with its flush, RESET, and Destroy.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

QpImpl::QpImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index,
               const QpInitAttr& init, uint32_t send_sge_max,
               uint32_t inline_max)
    : dev_(dev),
      pd_(pd),
      index_(index),
      init_(init),
      send_cq_(static_cast<CqImpl*>(init.send_cq)),
      recv_cq_(static_cast<CqImpl*>(init.recv_cq)),
      srq_(static_cast<SrqImpl*>(init.srq)),
      sq_(init.cap.max_send_wr, send_sge_max, inline_max) {
  if (srq_ == nullptr) {
    rq_.Init(std::max<uint32_t>(init.cap.max_recv_wr, 1),
             init.cap.max_recv_sge);
    resp_.sges.resize(init.cap.max_recv_sge);
  } else {
    resp_.sges.resize(srq_->ring_.sge_max());
  }
  attr_.cap = init.cap;
  attr_.port_num = 1;
  path_.mtu_bytes = ComputePathMtuBytes();
}

uint32_t QpImpl::ComputePathMtuBytes() const {
  return std::min(transport::MtuBytes(attr_.path_mtu),
                  dev_->fabric_->PathMtu(dev_->node_, path_.node));
}

void QpImpl::FlushSend() {
  // Completions may overrun the CQ and re-enter ToError; sq_.head advances
  // first.
  while (sq_.head < sq_.tail) {
    const SendWqe w = sq_.Slot(sq_.head);
    ++sq_.head;
    CompleteSend(w, WcStatus::kWrFlushErr, kVendorFlush);
  }
  sq_.assigned = req_.tx_wqe = sq_.tail;
  req_.tx_pkt = 0;
}

void QpImpl::FlushRecv() {
  if (resp_.recv_active) {
    resp_.recv_active = false;
    CompleteRecvError(resp_.wqe.wr_id, WcStatus::kWrFlushErr, kVendorFlush,
                      /*pkt=*/nullptr);
  }
  if (srq_ != nullptr)
    return;  // an SRQ's requests belong to the SRQ, not to this QP
  RecvWqe r;
  while (rq_.Pop(&r, resp_.sges.data())) {
    CompleteRecvError(r.wr_id, WcStatus::kWrFlushErr, kVendorFlush,
                      /*pkt=*/nullptr);
  }
}

void QpImpl::ToError() {
  if (attr_.qp_state == QpState::kError) return;
  attr_.qp_state = QpState::kError;
  comp_.rnr_wait = false;
  DisarmTimer();
  FlushSend();
  FlushRecv();
  if (srq_ != nullptr && !resp_.last_wqe_reported) {
    resp_.last_wqe_reported = true;
    dev_->Raise(AsyncEventType::kQpLastWqeReached, qp_num(), 0, 0);
  }
}

void QpImpl::ToSqe() {
  attr_.qp_state = QpState::kSqe;
  req_.blocked = false;
  FlushSend();
}

void QpImpl::DiscardAll() {
  // Sequence numbers keep counting, so packets still on the wire never match a
  // new WR.
  sq_.head = sq_.assigned = req_.tx_wqe = sq_.tail;
  req_.tx_pkt = 0;
  rq_.Clear();
  resp_.recv_active = false;
  comp_.rnr_wait = false;
  req_.blocked = false;
  DisarmTimer();
  resp_.nak_sent = false;
  resp_.last_wqe_reported = false;
  req_.drained_reported = false;
}

namespace {

// The kernel's qp_state_table, for RC (index 0) and UD (index 1).
struct Transition {
  bool valid;
  uint32_t req[2];
  uint32_t opt[2];
};

constexpr uint32_t kRtsOptRc =
    transport::kQpCurState | transport::kQpAltPath | transport::kQpAccessFlags |
    transport::kQpMinRnrTimer | transport::kQpPathMigState;
constexpr uint32_t kUdOpt = transport::kQpCurState | transport::kQpQkey;

constexpr Transition
    kTable[transport::kQpStateCount][transport::kQpStateCount] = {
        // from RESET
        {{true, {0, 0}, {0, 0}},
         {true,
          {transport::kQpPkeyIndex | transport::kQpPort |
               transport::kQpAccessFlags,
           transport::kQpPkeyIndex | transport::kQpPort | transport::kQpQkey},
          {0, 0}},
         {},
         {},
         {},
         {},
         {}},
        // from INIT
        {{true, {0, 0}, {0, 0}},
         {true,
          {0, 0},
          {transport::kQpPkeyIndex | transport::kQpPort |
               transport::kQpAccessFlags,
           transport::kQpPkeyIndex | transport::kQpPort | transport::kQpQkey}},
         {true,
          {transport::kQpAv | transport::kQpPathMtu | transport::kQpDestQpn |
               transport::kQpRqPsn | transport::kQpMaxDestRdAtomic |
               transport::kQpMinRnrTimer,
           0},
          {transport::kQpAltPath | transport::kQpAccessFlags |
               transport::kQpPkeyIndex,
           transport::kQpPkeyIndex | transport::kQpQkey}},
         {},
         {},
         {},
         {true, {0, 0}, {0, 0}}},
        // from RTR
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true,
          {transport::kQpSqPsn | transport::kQpTimeout |
               transport::kQpRetryCnt | transport::kQpRnrRetry |
               transport::kQpMaxQpRdAtomic,
           transport::kQpSqPsn},
          {kRtsOptRc, kUdOpt}},
         {},
         {},
         {true, {0, 0}, {0, 0}}},
        // from RTS
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true, {0, 0}, {kRtsOptRc, kUdOpt}},
         {true,
          {0, 0},
          {transport::kQpEnSqdAsyncNotify, transport::kQpEnSqdAsyncNotify}},
         {},
         {true, {0, 0}, {0, 0}}},
        // from SQD
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true, {0, 0}, {kRtsOptRc, kUdOpt}},
         {true,
          {0, 0},
          {transport::kQpPort | transport::kQpAv | transport::kQpAltPath |
               transport::kQpAccessFlags | transport::kQpPkeyIndex |
               transport::kQpMinRnrTimer | transport::kQpPathMigState |
               transport::kQpTimeout | transport::kQpRetryCnt |
               transport::kQpRnrRetry | transport::kQpMaxQpRdAtomic |
               transport::kQpMaxDestRdAtomic,
           transport::kQpPkeyIndex | transport::kQpQkey}},
         {},
         {true, {0, 0}, {0, 0}}},
        // from SQE
        {{true, {0, 0}, {0, 0}},
         {},
         {},
         {true, {0, 0}, {0, kUdOpt}},
         {},
         {},
         {true, {0, 0}, {0, 0}}},
        // from ERROR
        {{true, {0, 0}, {0, 0}}, {}, {}, {}, {}, {}, {true, {0, 0}, {0, 0}}},
};

}  // namespace

Status QpImpl::Modify(const QpAttr& attr, uint32_t mask) {
  if (mask & ~transport::kQpAttrMaskAll)
    return InvalidArgument("unknown attribute mask bits");
  const QpState cur = attr_.qp_state;
  if ((mask & transport::kQpCurState) && attr.cur_qp_state != cur) {
    return InvalidArgument("cur_qp_state does not match the QP's state");
  }
  if ((mask & transport::kQpCurState) && cur != QpState::kRtr &&
      cur != QpState::kRts && cur != QpState::kSqd && cur != QpState::kSqe) {
    return InvalidArgument(
        "cur_qp_state is only accepted from RTR, RTS, SQD or SQE");
  }
  const QpState next = (mask & transport::kQpState) ? attr.qp_state : cur;
  if (static_cast<uint32_t>(next) >= transport::kQpStateCount) {
    return InvalidArgument("unknown qp_state");
  }
  const Transition& t = kTable[static_cast<int>(cur)][static_cast<int>(next)];
  if (!t.valid) return InvalidArgument("illegal QP state transition");
  const int type = init_.qp_type == QpType::kRc ? 0 : 1;
  if ((mask & t.req[type]) != t.req[type]) {
    return InvalidArgument(
        "a required attribute for this transition is missing");
  }
  if (mask & ~(t.req[type] | t.opt[type] | transport::kQpState)) {
    return InvalidArgument(
        "an attribute not allowed for this transition was given");
  }
  // Value checks before anything changes.
  FabricImpl* f = dev_->fabric_;
  if ((mask & transport::kQpPort) && attr.port_num != 1)
    return InvalidArgument("bad port");
  if ((mask & transport::kQpPkeyIndex) && attr.pkey_index != 0) {
    return InvalidArgument("bad pkey_index");
  }
  if ((mask & transport::kQpAccessFlags) &&
      (attr.qp_access_flags & ~transport::kAccessAll)) {
    return InvalidArgument("unknown access flags");
  }
  if ((mask & transport::kQpPathMtu) &&
      (static_cast<uint32_t>(attr.path_mtu) < 1 ||
       static_cast<uint32_t>(attr.path_mtu) > 5)) {
    return InvalidArgument("bad path_mtu");
  }
  if ((mask & transport::kQpTimeout) && attr.timeout > 31) {
    return InvalidArgument("timeout > 31");
  }
  if ((mask & transport::kQpRetryCnt) && attr.retry_cnt > 7) {
    return InvalidArgument("retry_cnt > 7");
  }
  if ((mask & transport::kQpRnrRetry) && attr.rnr_retry > 7) {
    return InvalidArgument("rnr_retry > 7");
  }
  if ((mask & transport::kQpMinRnrTimer) && attr.min_rnr_timer > 31) {
    return InvalidArgument("min_rnr_timer > 31");
  }
  if ((mask & transport::kQpDestQpn) && attr.dest_qp_num > kPsnMask) {
    return InvalidArgument("dest_qp_num beyond 24 bits");
  }
  int32_t av_node = path_.node;
  if (mask & transport::kQpAv) {
    av_node = NodeOfAh(f, attr.ah_attr);
    if (av_node < 0) return InvalidArgument("ah_attr names no reachable port");
  }
  // Apply.
  if (mask & transport::kQpAccessFlags)
    attr_.qp_access_flags = attr.qp_access_flags;
  if (mask & transport::kQpPkeyIndex) attr_.pkey_index = attr.pkey_index;
  if (mask & transport::kQpPort) attr_.port_num = attr.port_num;
  if (mask & transport::kQpQkey) attr_.qkey = attr.qkey;
  if (mask & transport::kQpAv) {
    attr_.ah_attr = attr.ah_attr;
    path_.node = av_node;
  }
  if (mask & transport::kQpPathMtu) attr_.path_mtu = attr.path_mtu;
  if (mask & transport::kQpTimeout) attr_.timeout = attr.timeout;
  if (mask & transport::kQpRetryCnt) {
    attr_.retry_cnt = attr.retry_cnt;
    comp_.retry_left = attr.retry_cnt;
  }
  if (mask & transport::kQpRnrRetry) {
    attr_.rnr_retry = attr.rnr_retry;
    comp_.rnr_left = attr.rnr_retry;
  }
  if (mask & transport::kQpRqPsn) {
    attr_.rq_psn = attr.rq_psn & kPsnMask;  // the kernel masks to 24 bits
    resp_.epsn = attr_.rq_psn;
  }
  if (mask & transport::kQpSqPsn) {
    attr_.sq_psn = attr.sq_psn & kPsnMask;
    req_.next_psn = comp_.una_psn = attr_.sq_psn;
  }
  if (mask & transport::kQpMaxQpRdAtomic)
    attr_.max_rd_atomic = attr.max_rd_atomic;
  if (mask & transport::kQpMaxDestRdAtomic)
    attr_.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & transport::kQpMinRnrTimer)
    attr_.min_rnr_timer = attr.min_rnr_timer;
  if (mask & transport::kQpDestQpn) attr_.dest_qp_num = attr.dest_qp_num;
  if (mask & transport::kQpEnSqdAsyncNotify) {
    attr_.en_sqd_async_notify = attr.en_sqd_async_notify;
  }
  path_.mtu_bytes = ComputePathMtuBytes();
  if (next == cur) return Status::Ok();
  switch (next) {
    case QpState::kReset:
      DiscardAll();
      attr_.qp_state = QpState::kReset;
      return Status::Ok();
    case QpState::kError:
      ToError();
      return Status::Ok();
    case QpState::kSqd:
      attr_.qp_state = QpState::kSqd;
      req_.drained_reported = false;
      Retire();
      return Status::Ok();
    case QpState::kRts:
      attr_.qp_state = QpState::kRts;
      Pump();
      return Status::Ok();
    default:
      attr_.qp_state = next;
      return Status::Ok();
  }
}

Status QpImpl::Query(QpAttr* attr, QpInitAttr* init_attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  *attr = attr_;
  attr->cur_qp_state = attr_.qp_state;
  attr->sq_draining = attr_.qp_state == QpState::kSqd && sq_.outstanding();
  if (init_attr != nullptr) *init_attr = init_;
  return Status::Ok();
}

Status QpImpl::Destroy() {
  DeviceImpl* d = dev_;
  if (d->fabric_->config().shared_by_processes)
    d->fabric_->ForgetHeldPump(this);
  send_cq_->refs_--;
  recv_cq_->refs_--;
  if (srq_ != nullptr) srq_->refs_--;
  pd_->refs_--;
  const bool timer_pending = comp_.timer_pending;
  FabricImpl* f = d->fabric_;
  d->qps_[index_].reset();               // deletes this
  if (timer_pending) f->SettleTimers();  // its timer names no QP now
  return Status::Ok();
}

StatusOr<QueuePair*> PdImpl::CreateQp(const QpInitAttr& attr) {
  const SimConfig& c = dev_->fabric_->config();
  if (attr.qp_type != QpType::kRc && attr.qp_type != QpType::kUd) {
    return InvalidArgument("only RC and UD QPs");
  }
  if (attr.send_cq == nullptr || attr.recv_cq == nullptr)
    return InvalidArgument("CQ is null");
  auto* scq = static_cast<CqImpl*>(attr.send_cq);
  auto* rcq = static_cast<CqImpl*>(attr.recv_cq);
  if (scq->dev_ != dev_ || rcq->dev_ != dev_)
    return InvalidArgument("CQ of another device");
  auto* srq = static_cast<SrqImpl*>(attr.srq);
  if (srq != nullptr && srq->dev_ != dev_)
    return InvalidArgument("SRQ of another device");
  const QpCap& cap = attr.cap;
  if (cap.max_send_wr == 0 ||
      cap.max_send_wr > static_cast<uint32_t>(c.max_qp_wr) ||
      cap.max_send_sge > static_cast<uint32_t>(c.max_sge) ||
      cap.max_inline_data > c.max_inline_data) {
    return InvalidArgument("send queue capabilities out of range");
  }
  if (srq == nullptr && (cap.max_recv_wr == 0 ||
                         cap.max_recv_wr > static_cast<uint32_t>(c.max_qp_wr) ||
                         cap.max_recv_sge > static_cast<uint32_t>(c.max_sge))) {
    return InvalidArgument("receive queue capabilities out of range");
  }
  auto index_or = dev_->FreeQpIndex();
  if (!index_or.ok()) return index_or.status();
  const uint32_t index = *index_or;
  QpInitAttr init = attr;
  if (srq != nullptr) {
    init.cap.max_recv_wr = 0;
    init.cap.max_recv_sge = 0;
  }
  auto& slot = dev_->qps_[index];
  slot = std::make_unique<QpImpl>(dev_, this, index, init, cap.max_send_sge,
                                  cap.max_inline_data);
  slot->incarnation_ = dev_->qps_created_++;
  if (dev_->fabric_->config().qp_number_cycle != 0) {
    // Where numbers are given again, a QP's WQE sequence numbers start where
    // no earlier QP's can be: a packet of a destroyed QP that arrives after
    // its number was given again (the responder reads the payload through
    // the requester's WQE) finds no WQE, as if the QP were gone.
    const uint64_t base = uint64_t{slot->incarnation_} << 32;
    slot->sq_.head = slot->sq_.assigned = slot->sq_.tail = base;
    slot->req_.tx_wqe = base;
  }
  ++refs_;
  ++scq->refs_;
  ++rcq->refs_;
  if (srq != nullptr) ++srq->refs_;
  return static_cast<QueuePair*>(slot.get());
}

StatusOr<uint32_t> DeviceImpl::FreeQpIndex() {
  const uint32_t cycle = fabric_->config().qp_number_cycle;
  if (cycle == 0) {
    const uint32_t index = static_cast<uint32_t>(qps_.size());
    if (index + kQpnBase > kPsnMask) return NoMemory("QP numbers exhausted");
    qps_.emplace_back();
    return index;
  }
  // The table grows only as far as numbers are given (a slot past its end
  // is free), so a large cycle costs nothing until it is used.
  for (uint32_t k = 0; k < cycle; ++k) {
    const uint32_t index = (next_qp_index_ + k) % cycle;
    if (index >= qps_.size()) qps_.resize(index + 1);
    if (qps_[index] == nullptr) {
      next_qp_index_ = (index + 1) % cycle;
      return index;
    }
  }
  return NoMemory("every QP number of the cycle is in use");
}

}  // namespace softfab::sim::internal
