// sfv_* queue pairs and what they post through: address handles, shared
// receive queues (create, modify, query, post receives), QPs (create, the
// modify state machine, query) and posting sends and receives, SGE lists
// checked against the limits the QP was created with.
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "api/softfab/verbs.h"
#include "api/verbs/internal/verbs_objects.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs_internal {

namespace {

tp::AhAttr ToAh(const sfv_ah_attr& a) {
  tp::AhAttr t;
  std::memcpy(t.grh.dgid.raw, a.grh.dgid.raw, 16);
  t.grh.flow_label = a.grh.flow_label;
  t.grh.sgid_index = a.grh.sgid_index;
  t.grh.hop_limit = a.grh.hop_limit;
  t.grh.traffic_class = a.grh.traffic_class;
  t.dlid = a.dlid;
  t.sl = a.sl;
  t.src_path_bits = a.src_path_bits;
  t.static_rate = a.static_rate;
  t.is_global = a.is_global;
  t.port_num = a.port_num;
  return t;
}

sfv_ah_attr FromAh(const tp::AhAttr& t) {
  sfv_ah_attr a{};
  std::memcpy(a.grh.dgid.raw, t.grh.dgid.raw, 16);
  a.grh.flow_label = t.grh.flow_label;
  a.grh.sgid_index = t.grh.sgid_index;
  a.grh.hop_limit = t.grh.hop_limit;
  a.grh.traffic_class = t.grh.traffic_class;
  a.dlid = t.dlid;
  a.sl = t.sl;
  a.src_path_bits = t.src_path_bits;
  a.static_rate = t.static_rate;
  a.is_global = t.is_global;
  a.port_num = t.port_num;
  return a;
}

tp::QpCap ToCap(const sfv_qp_cap& c) {
  return tp::QpCap{c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge,
                   c.max_inline_data};
}

sfv_qp_cap FromCap(const tp::QpCap& c) {
  return sfv_qp_cap{c.max_send_wr, c.max_recv_wr, c.max_send_sge,
                    c.max_recv_sge, c.max_inline_data};
}

constexpr int kSgeMax =
    64;  // more than any device max_sge; larger lists are EINVAL

// Copies an SGE list into `out`; false if it cannot be valid.
bool ToSges(const sfv_sge* in, int n, std::array<tp::Sge, kSgeMax>* out) {
  if (n < 0 || n > kSgeMax || (n > 0 && in == nullptr)) return false;
  for (int i = 0; i < n; ++i)
    (*out)[i] = tp::Sge{in[i].addr, in[i].length, in[i].lkey};
  return true;
}

}  // namespace

// The sfv_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/verbs.h declares.
extern "C" {

// ---- AH ----

sfv_ah* sfv_create_ah(sfv_pd* pd, sfv_ah_attr* attr) {
  if (pd == nullptr || attr == nullptr ||
      Ctx(pd->context)->pd_objs.count(pd) == 0) {
    return Fail<sfv_ah>(EINVAL);
  }
  auto r = static_cast<PdImpl*>(pd)->pd->CreateAh(ToAh(*attr));
  if (!r.ok()) return Fail<sfv_ah>(r.status());
  SfvContext* c = Ctx(pd->context);
  auto ah = std::make_unique<AhImpl>();
  ah->context = pd->context;
  ah->pd = pd;
  ah->handle = c->next_handle++;
  ah->ah = *r;
  AhImpl* raw = ah.get();
  c->ah_objs[raw] = std::move(ah);
  return raw;
}

int sfv_destroy_ah(sfv_ah* ah) {
  if (ah == nullptr) return EINVAL;
  SfvContext* c = Ctx(ah->context);
  auto it = c->ah_objs.find(ah);
  if (it == c->ah_objs.end()) return EINVAL;
  const softfab::Status s = it->second->ah->Destroy();
  if (!s.ok()) return Err(s);
  c->ah_objs.erase(it);
  return 0;
}

// ---- SRQ ----

sfv_srq* sfv_create_srq(sfv_pd* pd, sfv_srq_init_attr* init) {
  if (pd == nullptr || init == nullptr ||
      Ctx(pd->context)->pd_objs.count(pd) == 0) {
    return Fail<sfv_srq>(EINVAL);
  }
  tp::SrqAttr a{init->attr.max_wr, init->attr.max_sge, init->attr.srq_limit};
  auto r = static_cast<PdImpl*>(pd)->pd->CreateSrq(a);
  if (!r.ok()) return Fail<sfv_srq>(r.status());
  SfvContext* c = Ctx(pd->context);
  auto srq = std::make_unique<SrqImpl>();
  srq->context = pd->context;
  srq->srq_context = init->srq_context;
  srq->pd = pd;
  srq->handle = (*r)->handle();
  srq->srq = *r;
  srq->max_sge = init->attr.max_sge;
  SrqImpl* raw = srq.get();
  c->srq_by_handle[srq->handle] = raw;
  c->srq_objs[raw] = std::move(srq);
  return raw;
}

int sfv_modify_srq(sfv_srq* srq, sfv_srq_attr* attr, int mask) {
  if (srq == nullptr || attr == nullptr || mask < 0) return EINVAL;
  tp::SrqAttr a{attr->max_wr, attr->max_sge, attr->srq_limit};
  return Err(
      static_cast<SrqImpl*>(srq)->srq->Modify(a, static_cast<uint32_t>(mask)));
}

int sfv_query_srq(sfv_srq* srq, sfv_srq_attr* attr) {
  if (srq == nullptr || attr == nullptr) return EINVAL;
  tp::SrqAttr a;
  const softfab::Status s = static_cast<SrqImpl*>(srq)->srq->Query(&a);
  if (!s.ok()) return Err(s);
  attr->max_wr = a.max_wr;
  attr->max_sge = a.max_sge;
  attr->srq_limit = a.srq_limit;
  return 0;
}

int sfv_destroy_srq(sfv_srq* srq) {
  if (srq == nullptr) return EINVAL;
  SfvContext* c = Ctx(srq->context);
  auto it = c->srq_objs.find(srq);
  if (it == c->srq_objs.end()) return EINVAL;
  const softfab::Status s = it->second->srq->Destroy();
  if (!s.ok()) return Err(s);
  c->srq_by_handle.erase(srq->handle);
  c->srq_objs.erase(it);
  return 0;
}

int sfv_post_srq_recv(sfv_srq* srq, sfv_recv_wr* wr, sfv_recv_wr** bad_wr) {
  if (srq == nullptr || bad_wr == nullptr) return EINVAL;
  *bad_wr = nullptr;
  std::array<tp::Sge, kSgeMax> sges;
  for (; wr != nullptr; wr = wr->next) {
    if (!ToSges(wr->sg_list, wr->num_sge, &sges)) {
      *bad_wr = wr;
      return EINVAL;
    }
    tp::RecvWr t;
    t.wr_id = wr->wr_id;
    t.sg_list = sges.data();
    t.num_sge = wr->num_sge;
    const tp::RecvWr* bad = nullptr;
    const softfab::Status s =
        static_cast<SrqImpl*>(srq)->srq->PostRecv(&t, &bad);
    if (!s.ok()) {
      *bad_wr = wr;
      return Err(s);
    }
  }
  return 0;
}

// ---- QP ----

sfv_qp* sfv_create_qp(sfv_pd* pd, sfv_qp_init_attr* init) {
  if (pd == nullptr || init == nullptr ||
      Ctx(pd->context)->pd_objs.count(pd) == 0) {
    return Fail<sfv_qp>(EINVAL);
  }
  SfvContext* c = Ctx(pd->context);
  const int qp_type = Raw(init->qp_type);
  if (qp_type != SFV_QPT_RC && qp_type != SFV_QPT_UD) {
    return Fail<sfv_qp>(EOPNOTSUPP);  // UC is not modelled
  }
  if (init->send_cq == nullptr || init->recv_cq == nullptr ||
      c->cq_objs.count(init->send_cq) == 0 ||
      c->cq_objs.count(init->recv_cq) == 0 ||
      (init->srq != nullptr && c->srq_objs.count(init->srq) == 0)) {
    return Fail<sfv_qp>(EINVAL);
  }
  tp::QpInitAttr a;
  a.send_cq = static_cast<CqImpl*>(init->send_cq)->cq;
  a.recv_cq = static_cast<CqImpl*>(init->recv_cq)->cq;
  a.srq = init->srq ? static_cast<SrqImpl*>(init->srq)->srq : nullptr;
  a.cap = ToCap(init->cap);
  a.qp_type = static_cast<tp::QpType>(qp_type);
  a.sq_sig_all = init->sq_sig_all;
  auto r = static_cast<PdImpl*>(pd)->pd->CreateQp(a);
  if (!r.ok()) return Fail<sfv_qp>(r.status());
  auto qp = std::make_unique<QpImpl>();
  qp->context = pd->context;
  qp->qp_context = init->qp_context;
  qp->pd = pd;
  qp->send_cq = init->send_cq;
  qp->recv_cq = init->recv_cq;
  qp->srq = init->srq;
  qp->handle = c->next_handle++;
  qp->qp_num = (*r)->qp_num();
  qp->qp_type = init->qp_type;
  qp->qp = *r;
  qp->max_send_sge = init->cap.max_send_sge;
  qp->max_recv_sge = init->srq ? 0 : init->cap.max_recv_sge;
  SyncState(qp.get());
  QpImpl* raw = qp.get();
  c->qp_by_num[raw->qp_num] = raw;
  c->qp_objs[raw] = std::move(qp);
  return raw;
}

int sfv_modify_qp(sfv_qp* qp, sfv_qp_attr* attr, int mask) {
  if (qp == nullptr || attr == nullptr || mask < 0) return EINVAL;
  const int state = Raw(attr->qp_state);
  const int cur_state = Raw(attr->cur_qp_state);
  const int path_mtu = Raw(attr->path_mtu);
  if ((mask & SFV_QP_STATE) && (state < SFV_QPS_RESET || state > SFV_QPS_ERR)) {
    return EINVAL;
  }
  if ((mask & SFV_QP_CUR_STATE) &&
      (cur_state < SFV_QPS_RESET || cur_state > SFV_QPS_ERR)) {
    return EINVAL;
  }
  if ((mask & SFV_QP_PATH_MTU) && !ValidMtu(path_mtu)) return EINVAL;
  tp::QpAttr a;
  if (mask & SFV_QP_STATE) a.qp_state = static_cast<tp::QpState>(state);
  if (mask & SFV_QP_CUR_STATE) {
    a.cur_qp_state = static_cast<tp::QpState>(cur_state);
  }
  if (mask & SFV_QP_PATH_MTU) a.path_mtu = static_cast<tp::Mtu>(path_mtu);
  a.qkey = attr->qkey;
  a.rq_psn = attr->rq_psn;
  a.sq_psn = attr->sq_psn;
  a.dest_qp_num = attr->dest_qp_num;
  a.qp_access_flags = attr->qp_access_flags;
  a.cap = ToCap(attr->cap);
  a.ah_attr = ToAh(attr->ah_attr);
  a.pkey_index = attr->pkey_index;
  a.en_sqd_async_notify = attr->en_sqd_async_notify;
  a.max_rd_atomic = attr->max_rd_atomic;
  a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  a.min_rnr_timer = attr->min_rnr_timer;
  a.port_num = attr->port_num;
  a.timeout = attr->timeout;
  a.retry_cnt = attr->retry_cnt;
  a.rnr_retry = attr->rnr_retry;
  QpImpl* q = static_cast<QpImpl*>(qp);
  const softfab::Status s = q->qp->Modify(a, static_cast<uint32_t>(mask));
  SyncState(q);
  return Err(s);
}

int sfv_query_qp(sfv_qp* qp, sfv_qp_attr* attr, int attr_mask,
                 sfv_qp_init_attr* init_attr) {
  (void)attr_mask;  // every modelled field is filled, as most providers do
  if (qp == nullptr || attr == nullptr) return EINVAL;
  QpImpl* q = static_cast<QpImpl*>(qp);
  tp::QpAttr a;
  tp::QpInitAttr i;
  const softfab::Status s = q->qp->Query(&a, &i);
  if (!s.ok()) return Err(s);
  std::memset(attr, 0, sizeof(*attr));
  attr->qp_state = static_cast<sfv_qp_state>(a.qp_state);
  attr->cur_qp_state = static_cast<sfv_qp_state>(a.cur_qp_state);
  attr->path_mtu = static_cast<sfv_mtu>(a.path_mtu);
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = a.qp_access_flags;
  attr->cap = FromCap(a.cap);
  attr->ah_attr = FromAh(a.ah_attr);
  attr->pkey_index = a.pkey_index;
  attr->en_sqd_async_notify = a.en_sqd_async_notify;
  attr->sq_draining = a.sq_draining;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = a.port_num;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  if (init_attr != nullptr) {
    std::memset(init_attr, 0, sizeof(*init_attr));
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = FromCap(i.cap);
    init_attr->qp_type = qp->qp_type;
    init_attr->sq_sig_all = i.sq_sig_all;
  }
  SyncState(q);
  return 0;
}

int sfv_destroy_qp(sfv_qp* qp) {
  if (qp == nullptr) return EINVAL;
  SfvContext* c = Ctx(qp->context);
  auto it = c->qp_objs.find(qp);
  if (it == c->qp_objs.end()) return EINVAL;
  const softfab::Status s = it->second->qp->Destroy();
  if (!s.ok()) return Err(s);
  c->qp_by_num.erase(qp->qp_num);
  c->qp_objs.erase(it);
  return 0;
}

int sfv_post_send(sfv_qp* qp, sfv_send_wr* wr, sfv_send_wr** bad_wr) {
  if (qp == nullptr || bad_wr == nullptr) return EINVAL;
  *bad_wr = nullptr;
  QpImpl* q = static_cast<QpImpl*>(qp);
  SfvContext* c = Ctx(qp->context);
  std::array<tp::Sge, kSgeMax> sges;
  int rc = 0;
  for (; wr != nullptr; wr = wr->next) {
    tp::SendWr t;
    const bool ud = Raw(qp->qp_type) == SFV_QPT_UD;
    const int opcode = Raw(wr->opcode);
    if (wr->num_sge < 0 ||
        static_cast<uint32_t>(wr->num_sge) > q->max_send_sge ||
        !ToSges(wr->sg_list, wr->num_sge, &sges) ||
        opcode < SFV_WR_RDMA_WRITE || opcode > SFV_WR_RDMA_READ ||
        (ud && wr->wr.ud.ah != nullptr &&
         c->ah_objs.count(wr->wr.ud.ah) == 0)) {
      *bad_wr = wr;
      rc = EINVAL;
      break;
    }
    t.wr_id = wr->wr_id;
    t.sg_list = sges.data();
    t.num_sge = wr->num_sge;
    t.opcode = static_cast<tp::WrOpcode>(opcode);
    t.send_flags = wr->send_flags;
    t.imm_data = wr->imm_data;
    if (ud) {
      t.ud.ah = wr->wr.ud.ah ? static_cast<AhImpl*>(wr->wr.ud.ah)->ah : nullptr;
      t.ud.remote_qpn = wr->wr.ud.remote_qpn;
      t.ud.remote_qkey = wr->wr.ud.remote_qkey;
    } else {
      t.rdma.remote_addr = wr->wr.rdma.remote_addr;
      t.rdma.rkey = wr->wr.rdma.rkey;
    }
    const tp::SendWr* bad = nullptr;
    const softfab::Status s = q->qp->PostSend(&t, &bad);
    if (!s.ok()) {
      *bad_wr = wr;
      rc = Err(s);
      break;
    }
  }
  SyncState(q);
  return rc;
}

int sfv_post_recv(sfv_qp* qp, sfv_recv_wr* wr, sfv_recv_wr** bad_wr) {
  if (qp == nullptr || bad_wr == nullptr) return EINVAL;
  *bad_wr = nullptr;
  QpImpl* q = static_cast<QpImpl*>(qp);
  std::array<tp::Sge, kSgeMax> sges;
  for (; wr != nullptr; wr = wr->next) {
    if (qp->srq != nullptr || wr->num_sge < 0 ||
        static_cast<uint32_t>(wr->num_sge) > q->max_recv_sge ||
        !ToSges(wr->sg_list, wr->num_sge, &sges)) {
      *bad_wr = wr;
      return EINVAL;
    }
    tp::RecvWr t;
    t.wr_id = wr->wr_id;
    t.sg_list = sges.data();
    t.num_sge = wr->num_sge;
    const tp::RecvWr* bad = nullptr;
    const softfab::Status s = q->qp->PostRecv(&t, &bad);
    if (!s.ok()) {
      *bad_wr = wr;
      return Err(s);
    }
  }
  return 0;
}

}  // extern "C"

}  // namespace softfab::verbs_internal
