// The sfv_* C API over softfab::transport (backends/sim for now). Conversions
// happen here and only here: Status codes become errno return values
// (post/modify/destroy) or NULL + errno (create), as libibverbs does.
#include "api/softfab/verbs.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/status.h"
#include "core/transport.h"

namespace tp = ::softfab::transport;

struct SfvContext;

struct sfv_device {
  sfv_sim_fabric* fabric;
  tp::Device* dev;
  int node;
};

struct sfv_sim_fabric {
  std::unique_ptr<softfab::sim::SimFabric> sim;
  std::vector<std::unique_ptr<sfv_device>> devices;
  std::vector<std::unique_ptr<SfvContext>> contexts;
};

namespace {

struct PdImpl : sfv_pd {
  tp::ProtectionDomain* pd;
};
struct MrImpl : sfv_mr {
  tp::MemoryRegion* mr;
};
struct CqImpl : sfv_cq {
  tp::CompletionQueue* cq;
};
struct SrqImpl : sfv_srq {
  tp::SharedReceiveQueue* srq;
  uint32_t max_sge;
};
struct QpImpl : sfv_qp {
  tp::QueuePair* qp;
  // Checked before an SGE list is read, so an oversized num_sge never reads
  // past the list.
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
};
struct AhImpl : sfv_ah {
  tp::AddressHandle* ah;
};

}  // namespace

// A context owns the C wrappers of everything created under it; the transport
// objects are owned by the device and released through their Destroy() methods.
// The maps are keyed by address for validation lookups only: nothing iterates
// them.
struct SfvContext : sfv_context {
  sfv_sim_fabric* fabric = nullptr;
  bool open = true;
  uint32_t next_handle = 1;
  uint32_t pds = 0;
  uint32_t cqs = 0;
  std::unordered_map<const void*, std::unique_ptr<PdImpl>> pd_objs;
  std::unordered_map<const void*, std::unique_ptr<MrImpl>> mr_objs;
  std::unordered_map<const void*, std::unique_ptr<CqImpl>> cq_objs;
  std::unordered_map<const void*, std::unique_ptr<SrqImpl>> srq_objs;
  std::unordered_map<const void*, std::unique_ptr<QpImpl>> qp_objs;
  std::unordered_map<const void*, std::unique_ptr<AhImpl>> ah_objs;
  // Lookups for async events: transport handle / QP number -> wrapper.
  std::map<uint32_t, CqImpl*> cq_by_handle;
  std::map<uint32_t, SrqImpl*> srq_by_handle;
  std::map<uint32_t, QpImpl*> qp_by_num;
};

namespace {

// The errno of a status, for calls that return it.
int Err(const softfab::Status& s) { return s.code(); }

template <typename T>
T* Fail(int code) {
  errno = code;
  return nullptr;
}

SfvContext* Ctx(sfv_context* c) { return static_cast<SfvContext*>(c); }

// The integer in a C enum field. A C caller may store any int there; reading an
// out-of-range value through the C++ enum type would be undefined, so copy the
// bits.
template <typename E>
int Raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

bool ValidMtu(int m) { return m >= SFV_MTU_256 && m <= SFV_MTU_4096; }

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

void SyncState(QpImpl* q) {
  q->state = static_cast<sfv_qp_state>(q->qp->state());
}

}  // namespace

extern "C" {

// -------------------------------------------------------------------------
// simulator

sfv_sim_fabric* sfv_sim_fabric_create(const sfv_sim_config* config) {
  if (config == nullptr) return Fail<sfv_sim_fabric>(EINVAL);
  softfab::sim::SimConfig c;
  c.nodes = config->nodes;
  c.master_seed = config->master_seed;
  if (config->latency_ns != 0) c.default_link.latency_ns = config->latency_ns;
  if (config->bandwidth_bps != 0)
    c.default_link.bandwidth_bps = config->bandwidth_bps;
  const int mtu = Raw(config->mtu);
  if (mtu != 0) {
    if (!ValidMtu(mtu)) return Fail<sfv_sim_fabric>(EINVAL);
    c.default_link.mtu = static_cast<tp::Mtu>(mtu);
    c.active_mtu = static_cast<tp::Mtu>(mtu);
  }
  auto add = [&](softfab::sim::PacketFaultKind kind, double p, uint64_t delay) {
    if (p == 0.0) return;
    softfab::sim::PacketFault f;
    f.kind = kind;
    f.probability = p;
    f.delay_ns = delay;
    c.faults.packet_faults.push_back(f);
  };
  add(softfab::sim::PacketFaultKind::kDrop, config->drop_probability, 0);
  add(softfab::sim::PacketFaultKind::kDuplicate, config->duplicate_probability,
      config->reorder_delay_ns);
  add(softfab::sim::PacketFaultKind::kReorder, config->reorder_probability,
      config->reorder_delay_ns);
  if (!softfab::sim::ValidateSimConfig(c).ok())
    return Fail<sfv_sim_fabric>(EINVAL);
  auto f = std::make_unique<sfv_sim_fabric>();
  f->sim = softfab::sim::CreateSimFabric(c);
  if (!f->sim) return Fail<sfv_sim_fabric>(EINVAL);
  for (int n = 0; n < c.nodes; ++n) {
    f->devices.push_back(std::make_unique<sfv_device>(
        sfv_device{f.get(), f->sim->device(n), n}));
  }
  return f.release();
}

void sfv_sim_fabric_destroy(sfv_sim_fabric* fabric) { delete fabric; }

uint64_t sfv_sim_run_until_idle(sfv_sim_fabric* fabric, uint64_t max_events) {
  return fabric ? fabric->sim->RunUntilIdle(max_events) : 0;
}

uint64_t sfv_sim_run_until(sfv_sim_fabric* fabric, uint64_t t_ns) {
  return fabric ? fabric->sim->RunUntil(t_ns) : 0;
}

uint64_t sfv_sim_now_ns(const sfv_sim_fabric* fabric) {
  return fabric ? fabric->sim->clock().NowNs() : 0;
}

uint64_t sfv_sim_digest(const sfv_sim_fabric* fabric) {
  return fabric ? fabric->sim->digest() : 0;
}

// -------------------------------------------------------------------------
// devices

sfv_device** sfv_sim_get_device_list(sfv_sim_fabric* fabric, int* num_devices) {
  if (fabric == nullptr) return Fail<sfv_device*>(EINVAL);
  auto** list = new sfv_device*[fabric->devices.size() + 1];
  for (size_t i = 0; i < fabric->devices.size(); ++i)
    list[i] = fabric->devices[i].get();
  list[fabric->devices.size()] = nullptr;
  if (num_devices != nullptr)
    *num_devices = static_cast<int>(fabric->devices.size());
  return list;
}

void sfv_free_device_list(sfv_device** list) { delete[] list; }

const char* sfv_get_device_name(sfv_device* device) {
  if (device == nullptr) return Fail<const char>(EINVAL);
  return device->dev->name();
}

uint64_t sfv_get_device_guid(sfv_device* device) {
  tp::DeviceAttr a;
  if (device == nullptr || !device->dev->QueryDevice(&a).ok()) return 0;
  return a.node_guid;
}

sfv_context* sfv_open_device(sfv_device* device) {
  if (device == nullptr) return Fail<sfv_context>(EINVAL);
  auto ctx = std::make_unique<SfvContext>();
  ctx->device = device;
  ctx->fabric = device->fabric;
  SfvContext* raw = ctx.get();
  device->fabric->contexts.push_back(std::move(ctx));
  return raw;
}

int sfv_close_device(sfv_context* context) {
  if (context == nullptr || !Ctx(context)->open) return EINVAL;
  SfvContext* c = Ctx(context);
  if (c->pds != 0 || c->cqs != 0) return EBUSY;
  c->open =
      false;  // the wrapper lives until the fabric goes, so stale use is caught
  return 0;
}

int sfv_query_device(sfv_context* context, sfv_device_attr* attr) {
  if (context == nullptr || attr == nullptr) return EINVAL;
  tp::DeviceAttr a;
  const softfab::Status s = context->device->dev->QueryDevice(&a);
  if (!s.ok()) return Err(s);
  std::memset(attr, 0, sizeof(*attr));
  std::strncpy(attr->fw_ver, "softfab-sim", sizeof(attr->fw_ver) - 1);
  attr->node_guid = a.node_guid;
  attr->sys_image_guid = a.node_guid;
  attr->max_mr_size = a.max_mr_size;
  attr->page_size_cap = 4096;
  attr->vendor_id = a.vendor_id;
  attr->vendor_part_id = a.vendor_part_id;
  attr->max_qp = a.max_qp;
  attr->max_qp_wr = a.max_qp_wr;
  attr->max_sge = a.max_sge;
  attr->max_sge_rd = a.max_sge;
  attr->max_cq = a.max_cq;
  attr->max_cqe = a.max_cqe;
  attr->max_mr = a.max_mr;
  attr->max_pd = a.max_pd;
  attr->max_qp_rd_atom = a.max_qp_rd_atom;
  attr->max_qp_init_rd_atom = a.max_qp_rd_atom;
  attr->max_ah = a.max_ah;
  attr->max_srq = a.max_srq;
  attr->max_srq_wr = a.max_srq_wr;
  attr->max_srq_sge = a.max_srq_sge;
  attr->max_pkeys = 1;
  attr->phys_port_cnt = a.phys_port_cnt;
  return 0;
}

int sfv_query_port(sfv_context* context, uint8_t port_num,
                   sfv_port_attr* attr) {
  if (context == nullptr || attr == nullptr) return EINVAL;
  tp::PortAttr a;
  const softfab::Status s = context->device->dev->QueryPort(port_num, &a);
  if (!s.ok()) return Err(s);
  std::memset(attr, 0, sizeof(*attr));
  attr->state = static_cast<sfv_port_state>(a.state);
  attr->max_mtu = static_cast<sfv_mtu>(a.max_mtu);
  attr->active_mtu = static_cast<sfv_mtu>(a.active_mtu);
  attr->gid_tbl_len = a.gid_tbl_len;
  attr->max_msg_sz = a.max_msg_sz;
  attr->pkey_tbl_len = 1;
  attr->lid = a.lid;
  attr->sm_lid = a.sm_lid;
  attr->link_layer = a.link_layer;
  return 0;
}

int sfv_query_gid(sfv_context* context, uint8_t port_num, int index,
                  sfv_gid* gid) {
  if (context == nullptr || gid == nullptr) return EINVAL;
  tp::Gid g;
  const softfab::Status s = context->device->dev->QueryGid(port_num, index, &g);
  if (!s.ok()) return Err(s);
  std::memcpy(gid->raw, g.raw, 16);
  return 0;
}

// ------------------------------------------------------------------------- PD,
// MR, AH

sfv_pd* sfv_alloc_pd(sfv_context* context) {
  if (context == nullptr || !Ctx(context)->open) return Fail<sfv_pd>(EINVAL);
  SfvContext* c = Ctx(context);
  auto r = context->device->dev->AllocPd();
  if (!r.ok()) return Fail<sfv_pd>(r.status().code());
  auto pd = std::make_unique<PdImpl>();
  pd->context = context;
  pd->handle = c->next_handle++;
  pd->pd = *r;
  PdImpl* raw = pd.get();
  c->pd_objs[raw] = std::move(pd);
  ++c->pds;
  return raw;
}

int sfv_dealloc_pd(sfv_pd* pd) {
  if (pd == nullptr) return EINVAL;
  SfvContext* c = Ctx(pd->context);
  auto it = c->pd_objs.find(pd);
  if (it == c->pd_objs.end()) return EINVAL;
  const softfab::Status s = it->second->pd->Destroy();
  if (!s.ok()) return Err(s);
  c->pd_objs.erase(it);
  --c->pds;
  return 0;
}

sfv_mr* sfv_reg_mr(sfv_pd* pd, void* addr, size_t length, int access) {
  if (pd == nullptr || Ctx(pd->context)->pd_objs.count(pd) == 0)
    return Fail<sfv_mr>(EINVAL);
  if (access < 0) return Fail<sfv_mr>(EINVAL);
  auto r = static_cast<PdImpl*>(pd)->pd->RegMr(addr, length,
                                               static_cast<uint32_t>(access));
  if (!r.ok()) return Fail<sfv_mr>(r.status().code());
  SfvContext* c = Ctx(pd->context);
  auto mr = std::make_unique<MrImpl>();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->handle = c->next_handle++;
  mr->lkey = (*r)->lkey();
  mr->rkey = (*r)->rkey();
  mr->mr = *r;
  MrImpl* raw = mr.get();
  c->mr_objs[raw] = std::move(mr);
  return raw;
}

int sfv_dereg_mr(sfv_mr* mr) {
  if (mr == nullptr) return EINVAL;
  SfvContext* c = Ctx(mr->context);
  auto it = c->mr_objs.find(mr);
  if (it == c->mr_objs.end()) return EINVAL;
  const softfab::Status s = it->second->mr->Destroy();
  if (!s.ok()) return Err(s);
  c->mr_objs.erase(it);
  return 0;
}

sfv_ah* sfv_create_ah(sfv_pd* pd, sfv_ah_attr* attr) {
  if (pd == nullptr || attr == nullptr ||
      Ctx(pd->context)->pd_objs.count(pd) == 0) {
    return Fail<sfv_ah>(EINVAL);
  }
  auto r = static_cast<PdImpl*>(pd)->pd->CreateAh(ToAh(*attr));
  if (!r.ok()) return Fail<sfv_ah>(r.status().code());
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

// ------------------------------------------------------------------------- CQ

sfv_cq* sfv_create_cq(sfv_context* context, int cqe, void* cq_context,
                      sfv_comp_channel* channel, int comp_vector) {
  (void)comp_vector;
  if (context == nullptr || !Ctx(context)->open || channel != nullptr) {
    return Fail<sfv_cq>(EINVAL);
  }
  auto r = context->device->dev->CreateCq(cqe);
  if (!r.ok()) return Fail<sfv_cq>(r.status().code());
  SfvContext* c = Ctx(context);
  auto cq = std::make_unique<CqImpl>();
  cq->context = context;
  cq->channel = nullptr;
  cq->cq_context = cq_context;
  cq->handle = (*r)->handle();
  cq->cqe = (*r)->cqe();
  cq->cq = *r;
  CqImpl* raw = cq.get();
  c->cq_by_handle[cq->handle] = raw;
  c->cq_objs[raw] = std::move(cq);
  ++c->cqs;
  return raw;
}

int sfv_destroy_cq(sfv_cq* cq) {
  if (cq == nullptr) return EINVAL;
  SfvContext* c = Ctx(cq->context);
  auto it = c->cq_objs.find(cq);
  if (it == c->cq_objs.end()) return EINVAL;
  const softfab::Status s = it->second->cq->Destroy();
  if (!s.ok()) return Err(s);
  c->cq_by_handle.erase(cq->handle);
  c->cq_objs.erase(it);
  --c->cqs;
  return 0;
}

int sfv_poll_cq(sfv_cq* cq, int num_entries, sfv_wc* wc) {
  if (cq == nullptr || num_entries < 0 || (num_entries > 0 && wc == nullptr))
    return -EINVAL;
  tp::WorkCompletion buf[32];
  int total = 0;
  tp::CompletionQueue* q = static_cast<CqImpl*>(cq)->cq;
  while (total < num_entries) {
    const int want = std::min(num_entries - total, 32);
    const int n = q->Poll(want, buf);
    if (n < 0) return total > 0 ? total : n;
    for (int i = 0; i < n; ++i) {
      sfv_wc& o = wc[total + i];
      const tp::WorkCompletion& w = buf[i];
      o.wr_id = w.wr_id;
      o.status = static_cast<sfv_wc_status>(w.status);
      o.opcode = static_cast<sfv_wc_opcode>(w.opcode);
      o.vendor_err = w.vendor_err;
      o.byte_len = w.byte_len;
      o.imm_data = w.imm_data;
      o.qp_num = w.qp_num;
      o.src_qp = w.src_qp;
      o.wc_flags = w.wc_flags;
      o.pkey_index = w.pkey_index;
      o.slid = w.slid;
      o.sl = w.sl;
      o.dlid_path_bits = w.dlid_path_bits;
    }
    total += n;
    if (n < want) break;
  }
  // As in libibverbs, sfv_qp::state is refreshed by modify/query (and here by
  // posts and async events), not by polling.
  return total;
}

// ------------------------------------------------------------------------- SRQ

sfv_srq* sfv_create_srq(sfv_pd* pd, sfv_srq_init_attr* init) {
  if (pd == nullptr || init == nullptr ||
      Ctx(pd->context)->pd_objs.count(pd) == 0) {
    return Fail<sfv_srq>(EINVAL);
  }
  tp::SrqAttr a{init->attr.max_wr, init->attr.max_sge, init->attr.srq_limit};
  auto r = static_cast<PdImpl*>(pd)->pd->CreateSrq(a);
  if (!r.ok()) return Fail<sfv_srq>(r.status().code());
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

// ------------------------------------------------------------------------- QP

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
  if (!r.ok()) return Fail<sfv_qp>(r.status().code());
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

// -------------------------------------------------------------------------
// events

int sfv_get_async_event(sfv_context* context, sfv_async_event* event) {
  if (context == nullptr || event == nullptr) {
    errno = EINVAL;
    return -1;
  }
  SfvContext* c = Ctx(context);
  tp::AsyncEvent e;
  const softfab::Status s = context->device->dev->GetAsyncEvent(&e);
  if (!s.ok()) {
    errno = s.code();
    return -1;
  }
  std::memset(event, 0, sizeof(*event));
  event->event_type = static_cast<sfv_event_type>(e.event_type);
  switch (e.event_type) {
    case tp::AsyncEventType::kCqErr: {
      auto it = c->cq_by_handle.find(e.cq_handle);
      event->element.cq = it == c->cq_by_handle.end() ? nullptr : it->second;
      break;
    }
    case tp::AsyncEventType::kSrqErr:
    case tp::AsyncEventType::kSrqLimitReached: {
      auto it = c->srq_by_handle.find(e.srq_handle);
      event->element.srq = it == c->srq_by_handle.end() ? nullptr : it->second;
      break;
    }
    case tp::AsyncEventType::kPortActive:
    case tp::AsyncEventType::kPortErr:
    case tp::AsyncEventType::kLidChange:
    case tp::AsyncEventType::kPkeyChange:
    case tp::AsyncEventType::kSmChange:
    case tp::AsyncEventType::kClientReregister:
    case tp::AsyncEventType::kGidChange:
      event->element.port_num = e.port_num;
      break;
    case tp::AsyncEventType::kDeviceFatal:
      break;
    default: {
      auto it = c->qp_by_num.find(e.qp_num);
      event->element.qp = it == c->qp_by_num.end() ? nullptr : it->second;
      if (it != c->qp_by_num.end()) SyncState(it->second);
    }
  }
  return 0;
}

void sfv_ack_async_event(sfv_async_event* event) { (void)event; }

const char* sfv_wc_status_str(sfv_wc_status status) {
  static const char* const kNames[] = {"success",
                                       "local length error",
                                       "local QP operation error",
                                       "local EE context operation error",
                                       "local protection error",
                                       "Work Request Flushed Error",
                                       "memory management operation error",
                                       "bad response error",
                                       "local access error",
                                       "remote invalid request error",
                                       "remote access error",
                                       "remote operation error",
                                       "transport retry counter exceeded",
                                       "RNR retry counter exceeded",
                                       "local RDD violation error",
                                       "remote invalid RD request",
                                       "aborted error",
                                       "invalid EE context number",
                                       "invalid EE context state",
                                       "fatal error",
                                       "response timeout error",
                                       "general error"};
  const int i = static_cast<int>(status);
  return i >= 0 && i <= SFV_WC_GENERAL_ERR ? kNames[i] : "unknown";
}

const char* sfv_event_type_str(sfv_event_type event) {
  static const char* const kNames[] = {
      "CQ error",
      "local work queue catastrophic error",
      "invalid request local work queue error",
      "local access violation work queue error",
      "communication established",
      "send queue drained",
      "path migrated",
      "path migration request error",
      "local catastrophic error",
      "port active",
      "port error",
      "LID change",
      "P_Key change",
      "SM change",
      "SRQ catastrophic error",
      "SRQ limit reached",
      "last WQE reached",
      "client reregistration",
      "GID table change"};
  const int i = static_cast<int>(event);
  return i >= 0 && i <= SFV_EVENT_GID_CHANGE ? kNames[i] : "unknown";
}

}  // extern "C"
