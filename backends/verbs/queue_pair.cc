// Queue pairs over ibv_qp: creation with the device's inline limit, state
// changes (QpAttr + mask translated field by field), queries, and posting
// send and receive lists through stack batches.
#include <algorithm>
#include <cerrno>

#include "backends/verbs/internal/errors.h"
#include "backends/verbs/internal/objects.h"
#include "backends/verbs/internal/post_batch.h"
#include "backends/verbs/internal/translate.h"

namespace softfab::verbs::internal {

namespace tp = ::softfab::transport;

StatusOr<tp::QueuePair*> Pd::CreateQp(const tp::QpInitAttr& attr) {
  DeviceImpl* dev = device();
  if (attr.qp_type != tp::QpType::kRc && attr.qp_type != tp::QpType::kUd) {
    return InvalidArgument("only RC and UD QPs");
  }
  if (attr.send_cq == nullptr || attr.recv_cq == nullptr) {
    return InvalidArgument("CQ is null");
  }
  // Control path: dynamic_cast also refuses objects of another backend.
  auto* scq = dynamic_cast<Cq*>(attr.send_cq);
  auto* rcq = dynamic_cast<Cq*>(attr.recv_cq);
  if (scq == nullptr || rcq == nullptr || scq->device() != dev ||
      rcq->device() != dev) {
    return InvalidArgument("CQ of another device");
  }
  auto* srq = dynamic_cast<Srq*>(attr.srq);
  if ((attr.srq != nullptr && srq == nullptr) ||
      (srq != nullptr && srq->device() != dev)) {
    return InvalidArgument("SRQ of another device");
  }
  const tp::QpCap& cap = attr.cap;
  const auto sge_max =
      static_cast<uint32_t>(std::min(dev->attr().max_sge, kPostBatchSges));
  if (cap.max_send_wr == 0 ||
      cap.max_send_wr > static_cast<uint32_t>(dev->attr().max_qp_wr) ||
      cap.max_send_sge > sge_max ||
      cap.max_inline_data > dev->max_inline_data()) {
    return InvalidArgument("send queue capabilities out of range");
  }
  if (srq == nullptr &&
      (cap.max_recv_wr == 0 ||
       cap.max_recv_wr > static_cast<uint32_t>(dev->attr().max_qp_wr) ||
       cap.max_recv_sge > sge_max)) {
    return InvalidArgument("receive queue capabilities out of range");
  }
  ibv_qp_init_attr init{};
  init.send_cq = scq->ibv();
  init.recv_cq = rcq->ibv();
  init.srq = srq != nullptr ? srq->ibv() : nullptr;
  init.cap.max_send_wr = cap.max_send_wr;
  init.cap.max_send_sge = cap.max_send_sge;
  init.cap.max_inline_data = cap.max_inline_data;
  if (srq == nullptr) {
    init.cap.max_recv_wr = cap.max_recv_wr;
    init.cap.max_recv_sge = cap.max_recv_sge;
  }
  init.qp_type = static_cast<ibv_qp_type>(attr.qp_type);
  init.sq_sig_all = attr.sq_sig_all;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  if (qp == nullptr) return FromErrno("ibv_create_qp failed", ENOMEM);
  // ibv_create_qp wrote back what was granted (at least what was asked).
  SendQueueLimits send;
  send.max_sge = init.cap.max_send_sge;
  send.max_inline = init.cap.max_inline_data;
  send.ud = attr.qp_type == tp::QpType::kUd;
  return static_cast<tp::QueuePair*>(
      dev->Adopt(std::make_unique<Qp>(dev, qp, this, attr.qp_type, send,
                                      init.cap.max_recv_sge, srq != nullptr)));
}

Status Qp::Modify(const tp::QpAttr& attr, uint32_t attr_mask) {
  ibv_qp_attr a{};
  if (Status s = ToIbvQpAttr(attr, attr_mask, device()->map(), &a); !s.ok()) {
    return s;
  }
  // The kernel checks the transition and the masks (ib_modify_qp_is_ok).
  return FromReturn(ibv_modify_qp(qp_, &a, static_cast<int>(attr_mask)),
                    "ibv_modify_qp refused the transition or an attribute");
}

Status Qp::Query(tp::QpAttr* attr, tp::QpInitAttr* init_attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  if (Status s = FromReturn(
          ibv_query_qp(qp_, &a, static_cast<int>(tp::kQpAttrMaskAll), &init),
          "ibv_query_qp failed");
      !s.ok()) {
    return s;
  }
  FromIbvQpAttr(a, device()->map(), attr);
  if (init_attr != nullptr) {
    *init_attr = tp::QpInitAttr{};
    init_attr->send_cq = static_cast<Cq*>(qp_->send_cq->cq_context);
    init_attr->recv_cq = static_cast<Cq*>(qp_->recv_cq->cq_context);
    init_attr->srq = qp_->srq != nullptr
                         ? static_cast<Srq*>(qp_->srq->srq_context)
                         : nullptr;
    init_attr->cap.max_send_wr = init.cap.max_send_wr;
    init_attr->cap.max_recv_wr = init.cap.max_recv_wr;
    init_attr->cap.max_send_sge = init.cap.max_send_sge;
    init_attr->cap.max_recv_sge = init.cap.max_recv_sge;
    init_attr->cap.max_inline_data = init.cap.max_inline_data;
    init_attr->qp_type = type_;
    init_attr->sq_sig_all = init.sq_sig_all;
  }
  return Status::Ok();
}

Status Qp::PostSend(const tp::SendWr* wr, const tp::SendWr** bad_wr) {
  // The transport refuses sends before RTS. Providers differ (rxe queues the
  // requests, then its doorbell fails without naming one), so check first.
  const ibv_qp_state st = qp_->state;
  if (wr != nullptr &&
      (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR)) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return InvalidArgument("post_send needs RTS, SQD, SQE or ERROR");
  }
  const Pd* pd = pd_;
  return PostChain<tp::SendWr, ibv_send_wr>(
      wr, bad_wr,
      [this, pd](const tp::SendWr& in, ibv_sge* sges, ibv_send_wr* out) {
        return ToIbvSendWr(
            in, send_,
            [pd](const tp::AddressHandle* ah) -> ibv_ah* {
              const auto* ours = static_cast<const Ah*>(ah);
              return ours->pd() == pd ? ours->ibv() : nullptr;
            },
            sges, out);
      },
      [this](ibv_send_wr* first, ibv_send_wr** bad) {
        return ibv_post_send(qp_, first, bad);
      },
      {"send queue full", "ibv_post_send refused the request"});
}

Status Qp::PostRecv(const tp::RecvWr* wr, const tp::RecvWr** bad_wr) {
  if (wr != nullptr && (has_srq_ || qp_->state == IBV_QPS_RESET)) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return InvalidArgument(has_srq_ ? "QP uses an SRQ: post to the SRQ"
                                    : "QP is in RESET");
  }
  return PostChain<tp::RecvWr, ibv_recv_wr>(
      wr, bad_wr,
      [this](const tp::RecvWr& in, ibv_sge* sges, ibv_recv_wr* out) {
        return ToIbvRecvWr(in, max_recv_sge_, sges, out);
      },
      [this](ibv_recv_wr* first, ibv_recv_wr** bad) {
        return ibv_post_recv(qp_, first, bad);
      },
      {"receive queue full", "ibv_post_recv refused the request"});
}

Status Qp::Destroy() {
  return device()->Release(
      this, [this] { return ibv_destroy_qp(qp_); }, "QP still in use",
      "ibv_destroy_qp failed");
}

}  // namespace softfab::verbs::internal
