// The sfv_* calls above the queues: devices and their contexts (open, close,
// query device, port and GID), protection domains, memory regions, and async
// events. The simulator's own calls (sfv_sim_*) are in api/sim/verbs_sim.cc.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "api/softfab/verbs.h"
#include "api/verbs/internal/verbs_objects.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs_internal {

// The sfv_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/verbs.h declares.
extern "C" {

// ---- devices ----

void sfv_free_device_list(sfv_device** list) {
  if (list == nullptr) return;
  // Entries of real devices belong to their list; a fabric owns its own.
  for (sfv_device** d = list; *d != nullptr; ++d) {
    if ((*d)->owner == nullptr) delete *d;
  }
  delete[] list;
}

const char* sfv_get_device_name(sfv_device* device) {
  if (device == nullptr) return Fail<const char>(EINVAL, "device is NULL");
  return device->name.c_str();
}

uint64_t sfv_get_device_guid(sfv_device* device) {
  return device == nullptr ? 0 : device->guid;
}

sfv_context* sfv_open_device(sfv_device* device) {
  if (device == nullptr) return Fail<sfv_context>(EINVAL, "device is NULL");
  std::string why;
  auto dev = device->backend->OpenDevice(device->node, &why);
  if (!dev.ok()) {
    // The diagnostic names what was found; the status message is the fallback.
    SetError(dev.status().code(),
             why.empty() ? dev.status().message() : why.c_str());
    return nullptr;
  }
  auto ctx = std::make_unique<SfvContext>();
  ctx->entry = *device;
  ctx->device = &ctx->entry;
  ctx->num_comp_vectors = 1;
  ctx->backend = device->backend;
  ctx->dev = *dev;
  if (device->owner == nullptr) return ctx.release();  // sfv_close_device
  SfvContext* raw = ctx.get();
  device->owner->contexts.push_back(std::move(ctx));
  return raw;
}

int sfv_close_device(sfv_context* context) {
  if (context == nullptr || !Ctx(context)->open) return EINVAL;
  SfvContext* c = Ctx(context);
  if (c->pds != 0 || c->cqs != 0 || c->channels != 0) return EBUSY;
  c->backend->CloseDevice(c->dev);
  c->open = false;
  // A fabric's contexts live until the fabric goes, so stale use is caught;
  // a real device's context has nothing left.
  if (c->entry.owner == nullptr) delete c;
  return 0;
}

int sfv_query_device(sfv_context* context, sfv_device_attr* attr) {
  if (context == nullptr || attr == nullptr) return EINVAL;
  tp::DeviceAttr a;
  const softfab::Status s = Ctx(context)->dev->QueryDevice(&a);
  if (!s.ok()) return Err(s);
  std::memset(attr, 0, sizeof(*attr));
  // The transport carries no firmware version; the entry may name one.
  std::strncpy(attr->fw_ver, Ctx(context)->entry.fw_ver.c_str(),
               sizeof(attr->fw_ver) - 1);
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
  attr->max_qp_init_rd_atom = a.max_qp_init_rd_atom;
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
  const softfab::Status s = Ctx(context)->dev->QueryPort(port_num, &a);
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
  const softfab::Status s = Ctx(context)->dev->QueryGid(port_num, index, &g);
  if (!s.ok()) return Err(s);
  std::memcpy(gid->raw, g.raw, 16);
  return 0;
}

// ---- PD and MR ----

sfv_pd* sfv_alloc_pd(sfv_context* context) {
  if (context == nullptr || !Ctx(context)->open) return Fail<sfv_pd>(EINVAL);
  SfvContext* c = Ctx(context);
  auto r = Ctx(context)->dev->AllocPd();
  if (!r.ok()) return Fail<sfv_pd>(r.status());
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
  if (!r.ok()) return Fail<sfv_mr>(r.status());
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

// ---- events ----

int sfv_get_async_event(sfv_context* context, sfv_async_event* event) {
  if (context == nullptr || event == nullptr) {
    SetError(EINVAL, "context or event is NULL");
    return -1;
  }
  SfvContext* c = Ctx(context);
  tp::AsyncEvent e;
  const softfab::Status s = Ctx(context)->dev->GetAsyncEvent(&e);
  if (!s.ok()) {
    SetError(s.code(), s.message());
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

}  // namespace softfab::verbs_internal
