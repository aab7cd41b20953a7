// The opened verbs device: queries through the port/GID mapping, creation of
// PDs, CQs and completion channels, async events, the monotonic clock, and
// the teardown that releases everything the device still owns.
#include <endian.h>
#include <fcntl.h>
#include <sys/random.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "backends/verbs/internal/errors.h"
#include "backends/verbs/internal/objects.h"
#include "backends/verbs/internal/post_batch.h"
#include "backends/verbs/internal/translate.h"

namespace softfab::verbs::internal {

uint64_t MonotonicClock::NowNs() const {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(ts.tv_nsec);
}

DeviceImpl::DeviceImpl(const DeviceSetup& setup) : setup_(setup) {}

DeviceImpl::~DeviceImpl() {
  // Dependency order: QPs hold CQs, SRQs and PDs; CQs hold channels; SRQs,
  // AHs and MRs hold PDs. Failures here have no one to report to; closing the
  // context releases whatever the kernel still holds.
  for (auto& qp : qps_.items()) (void)ibv_destroy_qp(qp->ibv());
  for (auto& srq : srqs_.items()) (void)ibv_destroy_srq(srq->ibv());
  for (auto& cq : cqs_.items()) {
    cq->AckAllEvents();
    (void)ibv_destroy_cq(cq->ibv());
  }
  for (auto& ch : channels_.items()) (void)ibv_destroy_comp_channel(ch->ibv());
  for (auto& ah : ahs_.items()) (void)ibv_destroy_ah(ah->ibv());
  for (auto& mr : mrs_.items()) (void)ibv_dereg_mr(mr->ibv());
  for (auto& pd : pds_.items()) (void)ibv_dealloc_pd(pd->ibv());
  (void)ibv_close_device(setup_.context);
}

const char* DeviceImpl::name() const {
  return ibv_get_device_name(setup_.context->device);
}

Status DeviceImpl::QueryDevice(transport::DeviceAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  ibv_device_attr a{};
  if (Status s = FromReturn(ibv_query_device(setup_.context, &a),
                            "ibv_query_device failed");
      !s.ok()) {
    return s;
  }
  *attr = transport::DeviceAttr{};
  attr->node_guid = be64toh(a.node_guid);
  attr->max_mr_size = a.max_mr_size;
  attr->vendor_id = a.vendor_id;
  attr->vendor_part_id = a.vendor_part_id;
  attr->max_qp = a.max_qp;
  attr->max_qp_wr = a.max_qp_wr;
  attr->max_sge = std::min(a.max_sge, kPostBatchSges);
  attr->max_cq = a.max_cq;
  attr->max_cqe = a.max_cqe;
  attr->max_mr = a.max_mr;
  attr->max_pd = a.max_pd;
  attr->max_qp_rd_atom = a.max_qp_rd_atom;
  attr->max_qp_init_rd_atom = a.max_qp_init_rd_atom;
  attr->max_srq = a.max_srq;
  attr->max_srq_wr = a.max_srq_wr;
  attr->max_srq_sge = std::min(a.max_srq_sge, kPostBatchSges);
  attr->max_ah = a.max_ah;
  attr->max_inline_data = setup_.max_inline_data;
  attr->phys_port_cnt = 1;  // the transport's one port (see verbs_device.h)
  return Status::Ok();
}

Status DeviceImpl::QueryPort(uint8_t port_num,
                             transport::PortAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  if (port_num != 1) return InvalidArgument("the device has port 1 only");
  ibv_port_attr a{};
  if (Status s = FromReturn(
          ibv_query_port(setup_.context, setup_.map.physical_port, &a),
          "ibv_query_port failed");
      !s.ok()) {
    return s;
  }
  *attr = transport::PortAttr{};
  attr->state = ToPortState(a.state);
  attr->max_mtu = static_cast<transport::Mtu>(a.max_mtu);
  attr->active_mtu = static_cast<transport::Mtu>(a.active_mtu);
  attr->gid_tbl_len = 1;  // index 0 = the selected GID
  attr->pkey_tbl_len = a.pkey_tbl_len;
  attr->max_msg_sz = a.max_msg_sz;
  attr->lid = a.lid;
  attr->sm_lid = a.sm_lid;
  attr->link_layer = a.link_layer;
  return Status::Ok();
}

Status DeviceImpl::QueryGid(uint8_t port_num, int index,
                            transport::Gid* gid) const {
  if (gid == nullptr) return InvalidArgument("gid is null");
  if (port_num != 1 || index != 0) return InvalidArgument("no such GID");
  ibv_gid g{};
  if (Status s =
          FromReturn(ibv_query_gid(setup_.context, setup_.map.physical_port,
                                   setup_.map.gid_index, &g),
                     "ibv_query_gid failed");
      !s.ok()) {
    return s;
  }
  std::memcpy(gid->raw, g.raw, sizeof(gid->raw));
  return Status::Ok();
}

StatusOr<transport::ProtectionDomain*> DeviceImpl::AllocPd() {
  ibv_pd* pd = ibv_alloc_pd(setup_.context);
  if (pd == nullptr) return FromErrno("ibv_alloc_pd failed", ENOMEM);
  return static_cast<transport::ProtectionDomain*>(
      Adopt(std::make_unique<Pd>(this, pd)));
}

StatusOr<transport::CompletionQueue*> DeviceImpl::CreateCq(int32_t cqe) {
  return CreateCqOnChannel(cqe, nullptr);
}

StatusOr<transport::CompletionChannel*> DeviceImpl::CreateCompChannel() {
  ibv_comp_channel* ch = ibv_create_comp_channel(setup_.context);
  if (ch == nullptr) return FromErrno("ibv_create_comp_channel failed");
  const int flags = fcntl(ch->fd, F_GETFL);
  if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    Status s = FromErrno("cannot make the channel's fd non-blocking");
    (void)ibv_destroy_comp_channel(ch);
    return s;
  }
  return static_cast<transport::CompletionChannel*>(
      Adopt(std::make_unique<Channel>(this, ch)));
}

StatusOr<transport::CompletionQueue*> DeviceImpl::CreateCqOnChannel(
    int32_t cqe, transport::CompletionChannel* channel) {
  if (cqe < 1 || cqe > setup_.attr.max_cqe) {
    return InvalidArgument("cqe out of range");
  }
  auto* ch = dynamic_cast<Channel*>(channel);
  if ((channel != nullptr && ch == nullptr) ||
      (ch != nullptr && ch->device() != this)) {
    return InvalidArgument("channel of another device");
  }
  auto cq = std::make_unique<Cq>(this, ch);
  ibv_cq* ibv = ibv_create_cq(setup_.context, cqe, cq.get(),
                              ch != nullptr ? ch->ibv() : nullptr, 0);
  if (ibv == nullptr) return FromErrno("ibv_create_cq failed", ENOMEM);
  cq->set_ibv(ibv);
  return static_cast<transport::CompletionQueue*>(Adopt(std::move(cq)));
}

uint64_t DeviceImpl::Random() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    // No entropy source (a very old kernel): the clock, mixed.
    v = static_cast<uint64_t>(clock_.NowNs()) * 0x9e3779b97f4a7c15ull;
    v ^= v >> 29;
  }
  return v;
}

Status DeviceImpl::GetAsyncEvent(transport::AsyncEvent* event) {
  if (event == nullptr) return InvalidArgument("event is null");
  // Events the transport has no name for are acked and skipped; the kernel's
  // queue is finite, but bound the loop all the same.
  for (int skipped = 0; skipped < 1024; ++skipped) {
    ibv_async_event ev{};
    if (ibv_get_async_event(setup_.context, &ev) != 0) {
      const int code = ErrnoOrFallback(EIO);
      if (code == EAGAIN || code == EWOULDBLOCK) {
        return TryAgain("no async event pending");
      }
      return Status(code, "ibv_get_async_event failed");
    }
    const bool known =
        ToAsyncEvent(ev, setup_.map, clock_.NowNs(), event);  // before the ack
    ibv_ack_async_event(&ev);
    if (known) return Status::Ok();
  }
  return TryAgain("no async event pending");
}

}  // namespace softfab::verbs::internal
