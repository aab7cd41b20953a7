// Control-path translations between core/transport.h and libibverbs:
// addresses, QP attributes, port states and async events (see translate.h).
#include "backends/verbs/internal/translate.h"

#include <cstring>

namespace softfab::verbs::internal {

tp::PortState ToPortState(int ibv_state) {
  if (ibv_state == IBV_PORT_ACTIVE_DEFER) return tp::PortState::kActive;
  if (ibv_state < IBV_PORT_NOP || ibv_state > IBV_PORT_ACTIVE) {
    return tp::PortState::kNop;
  }
  return static_cast<tp::PortState>(ibv_state);
}

Status ToIbvAhAttr(const tp::AhAttr& in, const PortMap& map, ibv_ah_attr* out) {
  if (in.port_num != 0 && in.port_num != 1) {
    return InvalidArgument("the device has port 1 only");
  }
  *out = ibv_ah_attr{};
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->port_num = map.physical_port;
  out->is_global = (in.is_global || map.ethernet) ? 1 : 0;
  if (out->is_global) {
    if (in.grh.sgid_index != 0) {
      return InvalidArgument("the GID table has index 0 only");
    }
    std::memcpy(out->grh.dgid.raw, in.grh.dgid.raw, sizeof(out->grh.dgid.raw));
    out->grh.flow_label = in.grh.flow_label;
    out->grh.sgid_index = map.gid_index;
    out->grh.hop_limit = in.grh.hop_limit;
    out->grh.traffic_class = in.grh.traffic_class;
  }
  return Status::Ok();
}

namespace {

// A physical port number as the transport names it: the selected port is 1;
// 0 (unset) and any other port stay as they are.
uint8_t TransportPort(uint8_t physical, const PortMap& map) {
  return physical == map.physical_port ? 1 : physical;
}

}  // namespace

void FromIbvAhAttr(const ibv_ah_attr& in, const PortMap& map, tp::AhAttr* out) {
  *out = tp::AhAttr{};
  out->dlid = in.dlid;
  out->sl = in.sl;
  out->src_path_bits = in.src_path_bits;
  out->static_rate = in.static_rate;
  out->is_global = in.is_global;
  out->port_num = TransportPort(in.port_num, map);
  if (in.is_global) {
    std::memcpy(out->grh.dgid.raw, in.grh.dgid.raw, sizeof(out->grh.dgid.raw));
    out->grh.flow_label = in.grh.flow_label;
    out->grh.sgid_index =
        in.grh.sgid_index == map.gid_index ? 0 : in.grh.sgid_index;
    out->grh.hop_limit = in.grh.hop_limit;
    out->grh.traffic_class = in.grh.traffic_class;
  }
}

Status ToIbvQpAttr(const tp::QpAttr& in, uint32_t mask, const PortMap& map,
                   ibv_qp_attr* out) {
  *out = ibv_qp_attr{};
  if (mask & ~tp::kQpAttrMaskAll) {
    return InvalidArgument("unknown attribute mask bits");
  }
  if (mask & (tp::kQpAltPath | tp::kQpPathMigState)) {
    return InvalidArgument("alternate paths are not modelled");
  }
  if (mask & tp::kQpState) {
    if (static_cast<int>(in.qp_state) >= tp::kQpStateCount) {
      return InvalidArgument("unknown qp_state");
    }
    out->qp_state = static_cast<ibv_qp_state>(in.qp_state);
  }
  if (mask & tp::kQpCurState) {
    if (static_cast<int>(in.cur_qp_state) >= tp::kQpStateCount) {
      return InvalidArgument("unknown cur_qp_state");
    }
    out->cur_qp_state = static_cast<ibv_qp_state>(in.cur_qp_state);
  }
  if (mask & tp::kQpEnSqdAsyncNotify) {
    out->en_sqd_async_notify = in.en_sqd_async_notify;
  }
  if (mask & tp::kQpAccessFlags) {
    if (in.qp_access_flags & ~tp::kAccessAll) {
      return InvalidArgument("unknown access flags");
    }
    out->qp_access_flags = in.qp_access_flags;
  }
  if (mask & tp::kQpPkeyIndex) out->pkey_index = in.pkey_index;
  if (mask & tp::kQpPort) {
    if (in.port_num != 1) return InvalidArgument("bad port");
    out->port_num = map.physical_port;
  }
  if (mask & tp::kQpQkey) out->qkey = in.qkey;
  if (mask & tp::kQpAv) {
    if (Status s = ToIbvAhAttr(in.ah_attr, map, &out->ah_attr); !s.ok()) {
      return s;
    }
  }
  if (mask & tp::kQpPathMtu) {
    const auto mtu = static_cast<uint32_t>(in.path_mtu);
    if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) {
      return InvalidArgument("bad path_mtu");
    }
    out->path_mtu = static_cast<ibv_mtu>(mtu);
  }
  if (mask & tp::kQpTimeout) {
    if (in.timeout > 31) return InvalidArgument("timeout > 31");
    out->timeout = in.timeout;
  }
  if (mask & tp::kQpRetryCnt) {
    if (in.retry_cnt > 7) return InvalidArgument("retry_cnt > 7");
    out->retry_cnt = in.retry_cnt;
  }
  if (mask & tp::kQpRnrRetry) {
    if (in.rnr_retry > 7) return InvalidArgument("rnr_retry > 7");
    out->rnr_retry = in.rnr_retry;
  }
  if (mask & tp::kQpRqPsn) out->rq_psn = in.rq_psn;
  if (mask & tp::kQpMaxQpRdAtomic) out->max_rd_atomic = in.max_rd_atomic;
  if (mask & tp::kQpMinRnrTimer) {
    if (in.min_rnr_timer > 31) return InvalidArgument("min_rnr_timer > 31");
    out->min_rnr_timer = in.min_rnr_timer;
  }
  if (mask & tp::kQpSqPsn) out->sq_psn = in.sq_psn;
  if (mask & tp::kQpMaxDestRdAtomic) {
    out->max_dest_rd_atomic = in.max_dest_rd_atomic;
  }
  if (mask & tp::kQpCap) {
    out->cap.max_send_wr = in.cap.max_send_wr;
    out->cap.max_recv_wr = in.cap.max_recv_wr;
    out->cap.max_send_sge = in.cap.max_send_sge;
    out->cap.max_recv_sge = in.cap.max_recv_sge;
    out->cap.max_inline_data = in.cap.max_inline_data;
  }
  if (mask & tp::kQpDestQpn) {
    if (in.dest_qp_num > 0xFFFFFF) {
      return InvalidArgument("dest_qp_num beyond 24 bits");
    }
    out->dest_qp_num = in.dest_qp_num;
  }
  return Status::Ok();
}

void FromIbvQpAttr(const ibv_qp_attr& in, const PortMap& map, tp::QpAttr* out) {
  *out = tp::QpAttr{};
  out->qp_state = static_cast<tp::QpState>(in.qp_state);
  out->cur_qp_state = static_cast<tp::QpState>(in.cur_qp_state);
  out->path_mtu = static_cast<tp::Mtu>(in.path_mtu);
  out->qkey = in.qkey;
  out->rq_psn = in.rq_psn;
  out->sq_psn = in.sq_psn;
  out->dest_qp_num = in.dest_qp_num;
  out->qp_access_flags = in.qp_access_flags;
  out->cap.max_send_wr = in.cap.max_send_wr;
  out->cap.max_recv_wr = in.cap.max_recv_wr;
  out->cap.max_send_sge = in.cap.max_send_sge;
  out->cap.max_recv_sge = in.cap.max_recv_sge;
  out->cap.max_inline_data = in.cap.max_inline_data;
  FromIbvAhAttr(in.ah_attr, map, &out->ah_attr);
  out->pkey_index = in.pkey_index;
  out->en_sqd_async_notify = in.en_sqd_async_notify;
  out->sq_draining = in.sq_draining;
  out->max_rd_atomic = in.max_rd_atomic;
  out->max_dest_rd_atomic = in.max_dest_rd_atomic;
  out->min_rnr_timer = in.min_rnr_timer;
  out->port_num = TransportPort(in.port_num, map);
  out->timeout = in.timeout;
  out->retry_cnt = in.retry_cnt;
  out->rnr_retry = in.rnr_retry;
}

bool ToAsyncEvent(const ibv_async_event& in, const PortMap& map,
                  uint64_t now_ns, tp::AsyncEvent* out) {
  *out = tp::AsyncEvent{};
  out->time_ns = now_ns;
  switch (in.event_type) {
    case IBV_EVENT_CQ_ERR:
      out->cq_handle = in.element.cq->handle;
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      out->qp_num = in.element.qp->qp_num;
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      out->srq_handle = in.element.srq->handle;
      break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE:
      if (in.element.port_num != map.physical_port) return false;
      out->port_num = 1;
      break;
    case IBV_EVENT_DEVICE_FATAL:
      break;
    default:  // WQ_FATAL and newer: nothing in the transport stands for them.
      return false;
  }
  out->event_type = static_cast<tp::AsyncEventType>(in.event_type);
  return true;
}

}  // namespace softfab::verbs::internal
