// The device (one node's HCA): queries of device, port and GID limits and
// state, wakeups, and the bounded async event queue.
#include <cstdint>
#include <cstdio>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

// Stream ids of the nodes' Random() (packet faults use 1000 + rule).
constexpr uint64_t kDeviceRandomStream = 0x5eed'0000'0000ull;

DeviceImpl::DeviceImpl(FabricImpl* fabric, int32_t node)
    : fabric_(fabric),
      node_(node),
      random_(DeriveSeed(fabric->config().master_seed,
                         kDeviceRandomStream + static_cast<uint64_t>(node))) {
  std::snprintf(name_, sizeof(name_), "softfab_sim%d", node);
}

Status DeviceImpl::QueryDevice(DeviceAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  const SimConfig& c = fabric_->config();
  *attr = DeviceAttr{};
  attr->node_guid = 0x5f5f000000000000ull | static_cast<uint64_t>(node_);
  attr->max_mr_size = 1ull << 40;
  attr->vendor_id = 0x5f5f;
  attr->vendor_part_id = 1;
  attr->max_qp = static_cast<int32_t>(
      c.qp_number_cycle != 0 ? c.qp_number_cycle : kPsnMask - kQpnBase);
  attr->max_qp_wr = c.max_qp_wr;
  attr->max_sge = c.max_sge;
  attr->max_cq = 1 << 20;
  attr->max_cqe = c.max_cqe;
  attr->max_mr = 1 << 23;
  attr->max_pd = 1 << 20;
  attr->max_qp_rd_atom = 16;
  attr->max_qp_init_rd_atom = 16;
  attr->max_srq = 1 << 20;
  attr->max_srq_wr = c.max_srq_wr;
  attr->max_srq_sge = c.max_sge;
  attr->max_ah = 1 << 20;
  attr->max_inline_data = c.max_inline_data;
  attr->phys_port_cnt = 1;
  return Status::Ok();
}

Status DeviceImpl::QueryPort(uint8_t port_num, PortAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  if (port_num != 1) return InvalidArgument("the device has port 1 only");
  *attr = PortAttr{};
  attr->state =
      fabric_->node(node_).port_down ? PortState::kDown : PortState::kActive;
  attr->max_mtu = Mtu::k4096;
  attr->active_mtu = PortMtuOf(fabric_->config(), node_);
  attr->gid_tbl_len = 1;
  attr->max_msg_sz = 1u << 31;
  attr->lid = static_cast<uint16_t>(node_ + 1);
  attr->sm_lid = 1;
  return Status::Ok();
}

void DeviceImpl::ScheduleWakeup(uint64_t t_ns) {
  fabric_->ScheduleWakeup(node_, t_ns);
}

Status DeviceImpl::QueryGid(uint8_t port_num, int index, Gid* gid) const {
  if (gid == nullptr) return InvalidArgument("gid is null");
  if (port_num != 1 || index != 0) return InvalidArgument("no such GID");
  *gid = GidOfNode(node_);
  return Status::Ok();
}

Status DeviceImpl::GetAsyncEvent(AsyncEvent* event) {
  if (event == nullptr) return InvalidArgument("event is null");
  if (events_.empty()) return TryAgain("no async event pending");
  *event = events_.front();
  events_.pop_front();
  return Status::Ok();
}

const transport::Clock& DeviceImpl::clock() const { return fabric_->clock(); }

void DeviceImpl::Raise(AsyncEventType type, uint32_t qp_num, uint32_t cq,
                       uint32_t srq) {
  if (events_.size() >= kAsyncEventsMax)
    return;  // bounded; the oldest are kept
  if (fabric_->config().observer != nullptr) [[unlikely]] {
    fabric_->config().observer->OnNodeEvent(node_);
  }
  AsyncEvent e{};
  e.event_type = type;
  e.qp_num = qp_num;
  e.cq_handle = cq;
  e.srq_handle = srq;
  e.port_num = 1;
  e.time_ns = fabric_->now();
  events_.push_back(e);
  if (fabric_->config().observer != nullptr) [[unlikely]] {
    fabric_->config().observer->OnAsyncEvent(node_);
  }
}

}  // namespace softfab::sim::internal
