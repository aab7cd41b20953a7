// The simulated fabric's construction and its public entry points
// (ValidateSimConfig, CreateSimFabric). The rest of the simulated HCA is laid
// out as the kernel's rxe driver: sim_qp.cc, sim_requester.cc,
// sim_responder.cc, sim_completer.cc, sim_srq.cc, sim_cq.cc, sim_pd_mr.cc,
// sim_address.cc, sim_device.cc, plus what rxe does not have: the event loop
// with the virtual clock (sim_event_loop.cc), the link model with its fault
// plan (sim_links_faults.cc) and packet arrival (sim_wire.cc). Objects are
// defined in internal/.
//
// Data model choices (written down because real hardware leaves them open):
// - RC payload bytes are read from the requester's registered buffers when a
//   packet arrives at the responder (the requester may not touch them until its
//   WR completes, so this equals reading them at transmit time), and written
//   straight into the responder's buffers. A packet whose requester WR no
//   longer exists (QP destroyed, reset or flushed meanwhile) is dropped on
//   arrival, as if it had been lost.
// - UD payloads are copied into a pooled buffer when sent (the send completes
//   as the packet leaves the port), so duplicates and late packets never read
//   reused user memory.
// - A CQ overrun keeps every completion (in order, in an overflow list), raises
//   CQ_ERR and moves the QP that overran it to ERROR with QP_FATAL, as hardware
//   does; nothing vanishes.
// - Responder errors (remote access, local protection on the receive buffer,
//   and a receive too small except as the personality says) move BOTH QPs to
//   ERROR, as the IB spec's class C/D responder errors do.
// - Where real devices differ (a UD send over the MTU, a receive too small
//   for an RC or UD message), the HCA follows SimConfig::personality
//   (internal/personality.h).
#include "backends/sim/sim_fabric.h"

#include <memory>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim {
namespace internal {

FabricImpl::FabricImpl(const SimConfig& config)
    : config_(config),
      quirks_(QuirksOf(config.personality)),
      recorder_(config.trace_capacity),
      links_(config_),
      packet_faults_(config_.faults.packet_faults, config_.master_seed),
      staging_(4096 + kGrhBytes) {
  nodes_.resize(config_.nodes);
  for (int32_t n = 0; n < config_.nodes; ++n) {
    nodes_[n].device = std::make_unique<DeviceImpl>(this, n);
  }
  for (size_t i = 0; i < config_.faults.timed_faults.size(); ++i) {
    Ev ev{};
    ev.kind = EvKind::kTimedFault;
    ev.aux = static_cast<uint32_t>(i);
    loop_.Schedule(config_.faults.timed_faults[i].time_ns, ev);
  }
  recorder_.Fold(config_.master_seed);
}

}  // namespace internal

Status ValidateSimConfig(const SimConfig& c) {
  if (c.nodes < 1 || c.nodes > (1 << 16))
    return InvalidArgument("nodes out of range");
  auto bad_node = [&](int32_t n) { return n < 0 || n >= c.nodes; };
  for (const SimLinkConfig& l : c.links) {
    if (bad_node(l.node_a) || bad_node(l.node_b))
      return InvalidArgument("link names no node");
    if (static_cast<uint32_t>(l.mtu) < 1 || static_cast<uint32_t>(l.mtu) > 5) {
      return InvalidArgument("link mtu");
    }
  }
  if (static_cast<uint32_t>(c.default_link.mtu) < 1 ||
      static_cast<uint32_t>(c.default_link.mtu) > 5 ||
      static_cast<uint32_t>(c.active_mtu) < 1 ||
      static_cast<uint32_t>(c.active_mtu) > 5) {
    return InvalidArgument("mtu");
  }
  if (c.port_mtu.size() > static_cast<size_t>(c.nodes)) {
    return InvalidArgument("port_mtu names more ports than there are nodes");
  }
  for (transport::Mtu m : c.port_mtu) {
    if (static_cast<uint32_t>(m) < 1 || static_cast<uint32_t>(m) > 5) {
      return InvalidArgument("port_mtu");
    }
  }
  for (const PacketFault& f : c.faults.packet_faults) {
    if (!(f.probability >= 0.0 && f.probability <= 1.0)) {
      return InvalidArgument("fault probability outside [0, 1]");
    }
    if ((f.src_node >= 0 && bad_node(f.src_node)) ||
        (f.dst_node >= 0 && bad_node(f.dst_node))) {
      return InvalidArgument("fault names no node");
    }
  }
  if (c.qp_number_cycle > internal::kPsnMask - internal::kQpnBase) {
    return InvalidArgument("qp_number_cycle larger than the QP numbers");
  }
  for (const TimedFault& f : c.faults.timed_faults) {
    if (bad_node(f.node) || (f.peer_node >= 0 && bad_node(f.peer_node))) {
      return InvalidArgument("timed fault names no node");
    }
    if (f.peer_node >= 0) {
      bool listed = false;
      for (const SimLinkConfig& l : c.links) {
        if ((l.node_a == f.node && l.node_b == f.peer_node) ||
            (l.node_b == f.node && l.node_a == f.peer_node)) {
          listed = true;
        }
      }
      if (!listed)
        return InvalidArgument("a path fault needs that pair in `links`");
    }
  }
  if (c.personality != DevicePersonality::kRxe &&
      c.personality != DevicePersonality::kMlx5) {
    return InvalidArgument("unknown device personality");
  }
  if (c.max_qp_wr < 1 || c.max_sge < 1 || c.max_cqe < 1 || c.max_srq_wr < 1 ||
      c.max_inline_data > 4096 || c.poll_events_max < 1) {
    return InvalidArgument("device limits");
  }
  return Status::Ok();
}

std::unique_ptr<SimFabric> CreateSimFabric(const SimConfig& config) {
  if (!ValidateSimConfig(config).ok()) return nullptr;
  return std::make_unique<internal::FabricImpl>(config);
}

}  // namespace softfab::sim
