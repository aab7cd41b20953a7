// Field-by-field translation between core/transport.h and libibverbs: work
// requests, work completions, address vectors, QP attributes, async events.
//
// The transport's enums and flag bits carry the libibverbs values (checked by
// the static_asserts below), so most fields copy straight across. What is not
// a copy:
// - Ports and GIDs. The transport's device has one port (1) and a one-entry
//   GID table (index 0); PortMap names the physical port and GID index that
//   were selected when the device was opened. Port 1 (or 0, "unset", in an
//   address) becomes the physical port, GID index 0 becomes the selected one,
//   and queries map them back. On Ethernet (RoCE) every address carries a GRH,
//   so is_global is forced on.
// - Argument checks that the transport promises (EINVAL, nothing posted) but a
//   provider would skip, mask silently, or crash on: unknown opcodes, flags and
//   mask bits, null SGE lists and address handles, out-of-range retry and timer
//   fields, inline data over the QP's limit. They cost a few compares per work
//   request and make every provider answer as the simulator does.
// - Error completions carry only wr_id, status, qp_num and vendor_err
//   (ibv_poll_cq(3) leaves the rest undefined), so the rest stays zero.
// The hot-path functions (work requests and completions) are inline here.
#ifndef SOFTFAB_BACKENDS_VERBS_INTERNAL_TRANSLATE_H_
#define SOFTFAB_BACKENDS_VERBS_INTERNAL_TRANSLATE_H_

#include <infiniband/verbs.h>

#include <cstdint>

#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs::internal {

namespace tp = ::softfab::transport;

// ------------------------------------------------- the values are libibverbs'

static_assert(static_cast<int>(tp::QpState::kReset) == IBV_QPS_RESET);
static_assert(static_cast<int>(tp::QpState::kError) == IBV_QPS_ERR);
static_assert(static_cast<int>(tp::QpState::kSqe) == IBV_QPS_SQE);
static_assert(static_cast<int>(tp::QpType::kRc) == IBV_QPT_RC);
static_assert(static_cast<int>(tp::QpType::kUd) == IBV_QPT_UD);
static_assert(static_cast<int>(tp::Mtu::k256) == IBV_MTU_256);
static_assert(static_cast<int>(tp::Mtu::k4096) == IBV_MTU_4096);
static_assert(static_cast<int>(tp::PortState::kActive) == IBV_PORT_ACTIVE);
static_assert(tp::kAccessLocalWrite == IBV_ACCESS_LOCAL_WRITE);
static_assert(tp::kAccessRemoteWrite == IBV_ACCESS_REMOTE_WRITE);
static_assert(tp::kAccessRemoteRead == IBV_ACCESS_REMOTE_READ);
static_assert(tp::kAccessRemoteAtomic == IBV_ACCESS_REMOTE_ATOMIC);
static_assert(static_cast<int>(tp::WrOpcode::kRdmaWrite) == IBV_WR_RDMA_WRITE);
static_assert(static_cast<int>(tp::WrOpcode::kRdmaWriteWithImm) ==
              IBV_WR_RDMA_WRITE_WITH_IMM);
static_assert(static_cast<int>(tp::WrOpcode::kSend) == IBV_WR_SEND);
static_assert(static_cast<int>(tp::WrOpcode::kSendWithImm) ==
              IBV_WR_SEND_WITH_IMM);
static_assert(static_cast<int>(tp::WrOpcode::kRdmaRead) == IBV_WR_RDMA_READ);
static_assert(tp::kSendFence == IBV_SEND_FENCE);
static_assert(tp::kSendSignaled == IBV_SEND_SIGNALED);
static_assert(tp::kSendSolicited == IBV_SEND_SOLICITED);
static_assert(tp::kSendInline == IBV_SEND_INLINE);
static_assert(static_cast<int>(tp::WcStatus::kRemAccessErr) ==
              IBV_WC_REM_ACCESS_ERR);
static_assert(static_cast<int>(tp::WcStatus::kRnrRetryExcErr) ==
              IBV_WC_RNR_RETRY_EXC_ERR);
static_assert(static_cast<int>(tp::WcStatus::kGeneralErr) ==
              IBV_WC_GENERAL_ERR);
static_assert(static_cast<int>(tp::WcOpcode::kRdmaRead) == IBV_WC_RDMA_READ);
static_assert(static_cast<int>(tp::WcOpcode::kRecv) == IBV_WC_RECV);
static_assert(static_cast<int>(tp::WcOpcode::kRecvRdmaWithImm) ==
              IBV_WC_RECV_RDMA_WITH_IMM);
static_assert(tp::kWcGrh == IBV_WC_GRH);
static_assert(tp::kWcWithImm == IBV_WC_WITH_IMM);
static_assert(tp::kQpState == IBV_QP_STATE);
static_assert(tp::kQpAv == IBV_QP_AV);
static_assert(tp::kQpMinRnrTimer == IBV_QP_MIN_RNR_TIMER);
static_assert(tp::kQpDestQpn == IBV_QP_DEST_QPN);
static_assert(tp::kSrqMaxWr == IBV_SRQ_MAX_WR);
static_assert(tp::kSrqLimit == IBV_SRQ_LIMIT);
static_assert(static_cast<int>(tp::AsyncEventType::kSrqLimitReached) ==
              IBV_EVENT_SRQ_LIMIT_REACHED);
static_assert(static_cast<int>(tp::AsyncEventType::kGidChange) ==
              IBV_EVENT_GID_CHANGE);
static_assert(sizeof(tp::Gid) == sizeof(ibv_gid));

// The bytes one SGE stands for: length 0 means 2^31 (as in ibv_sge).
inline constexpr uint64_t kSgeZeroLengthBytes = 1ull << 31;

// Where the transport's port 1 and GID index 0 live on the hardware.
struct PortMap {
  uint8_t physical_port = 1;
  uint8_t gid_index = 0;
  bool ethernet = true;  // RoCE: every address needs a GRH.
};

// ------------------------------------------------------------ control path

// ibv_port_state to the transport's (ACTIVE_DEFER counts as ACTIVE).
tp::PortState ToPortState(int ibv_state);

// An address (for ibv_create_ah or a QP's primary path). EINVAL for a port
// other than 0/1 or an sgid_index other than 0.
Status ToIbvAhAttr(const tp::AhAttr& in, const PortMap& map, ibv_ah_attr* out);
void FromIbvAhAttr(const ibv_ah_attr& in, const PortMap& map, tp::AhAttr* out);

// The fields of `in` named by `mask` (the ibv mask is the same bits). EINVAL,
// with *out unspecified, for unknown mask bits, alternate paths (the transport
// has no fields for them), or a value out of its range.
Status ToIbvQpAttr(const tp::QpAttr& in, uint32_t mask, const PortMap& map,
                   ibv_qp_attr* out);
void FromIbvQpAttr(const ibv_qp_attr& in, const PortMap& map, tp::QpAttr* out);

// Translates an async event; false when the transport has no such event or it
// concerns a port other than the selected one (the caller acks and skips it).
// Reads the event's QP/CQ/SRQ, which stay valid until the event is acked.
bool ToAsyncEvent(const ibv_async_event& in, const PortMap& map,
                  uint64_t now_ns, tp::AsyncEvent* out);

// ---------------------------------------------------------------- data path

inline void ToWorkCompletion(const ibv_wc& in, tp::WorkCompletion* out) {
  tp::WorkCompletion wc;
  wc.wr_id = in.wr_id;
  wc.status = in.status <= IBV_WC_GENERAL_ERR
                  ? static_cast<tp::WcStatus>(in.status)
                  : tp::WcStatus::kGeneralErr;
  wc.vendor_err = in.vendor_err;
  wc.qp_num = in.qp_num;
  if (in.status == IBV_WC_SUCCESS) {
    wc.opcode = static_cast<tp::WcOpcode>(in.opcode);
    wc.byte_len = in.byte_len;
    wc.wc_flags = in.wc_flags & (tp::kWcGrh | tp::kWcWithImm);
    if (in.wc_flags & IBV_WC_WITH_IMM) wc.imm_data = in.imm_data;
    wc.src_qp = in.src_qp;
    wc.pkey_index = in.pkey_index;
    wc.slid = in.slid;
    wc.sl = in.sl;
    wc.dlid_path_bits = in.dlid_path_bits;
  }
  *out = wc;
}

// What a QP's send queue accepts, from the capabilities ibv_create_qp granted.
struct SendQueueLimits {
  uint32_t max_sge = 0;
  uint32_t max_inline = 0;
  bool ud = false;
};

// Checks one send request and writes its ibv form into *out, its SGEs into
// `sges` (room for limits.max_sge). `resolve_ah(const tp::AddressHandle*)`
// returns the ibv_ah of a non-null handle, or nullptr when it belongs to
// another protection domain. out->next is left null.
template <typename ResolveAh>
Status ToIbvSendWr(const tp::SendWr& in, const SendQueueLimits& limits,
                   ResolveAh&& resolve_ah, ibv_sge* sges, ibv_send_wr* out) {
  if (static_cast<uint32_t>(in.opcode) >
      static_cast<uint32_t>(tp::WrOpcode::kRdmaRead)) {
    return InvalidArgument("unknown opcode");
  }
  if (limits.ud && in.opcode != tp::WrOpcode::kSend &&
      in.opcode != tp::WrOpcode::kSendWithImm) {
    return InvalidArgument("UD supports SEND and SEND_WITH_IMM only");
  }
  if (in.send_flags & ~tp::kSendFlagsAll) {
    return InvalidArgument("unknown send flags");
  }
  if (in.num_sge < 0 || static_cast<uint32_t>(in.num_sge) > limits.max_sge) {
    return InvalidArgument("num_sge exceeds max_send_sge");
  }
  if (in.num_sge > 0 && in.sg_list == nullptr) {
    return InvalidArgument("sg_list is null");
  }
  uint64_t total = 0;
  for (int32_t i = 0; i < in.num_sge; ++i) {
    const tp::Sge& s = in.sg_list[i];
    total += s.length == 0 ? kSgeZeroLengthBytes : s.length;
    sges[i].addr = s.addr;
    sges[i].length = s.length;
    sges[i].lkey = s.lkey;
  }
  if (in.send_flags & tp::kSendInline) {
    if (in.opcode == tp::WrOpcode::kRdmaRead) {
      return InvalidArgument("INLINE with RDMA_READ");
    }
    if (total > limits.max_inline) {
      return InvalidArgument("inline data exceeds max_inline_data");
    }
  }
  if (total > kSgeZeroLengthBytes) {
    return InvalidArgument("message longer than 2^31");
  }
  // Every field a provider reads for these opcodes (SEND, WRITE, READ, with
  // or without immediate data) on RC and UD is set; the bind_mw / tso union,
  // read only for IBV_WR_BIND_MW and IBV_WR_TSO, is not (zeroing all 128
  // bytes cost a device round trip 38 instructions by callgrind).
  out->wr_id = in.wr_id;
  out->next = nullptr;
  out->sg_list = in.num_sge > 0 ? sges : nullptr;
  out->num_sge = in.num_sge;
  out->opcode = static_cast<ibv_wr_opcode>(in.opcode);
  out->send_flags = in.send_flags;
  out->imm_data = in.imm_data;  // opaque bits, passed through unchanged.
  out->wr = {};
  out->qp_type.xrc.remote_srqn = 0;
  if (limits.ud) {
    if (in.ud.ah == nullptr) {
      return InvalidArgument("UD send without an address handle");
    }
    ibv_ah* ah = resolve_ah(in.ud.ah);
    if (ah == nullptr) return InvalidArgument("address handle from another PD");
    out->wr.ud.ah = ah;
    out->wr.ud.remote_qpn = in.ud.remote_qpn;
    out->wr.ud.remote_qkey = in.ud.remote_qkey;
  } else {
    out->wr.rdma.remote_addr = in.rdma.remote_addr;
    out->wr.rdma.rkey = in.rdma.rkey;
  }
  return Status::Ok();
}

// Checks one receive request (for a QP or an SRQ) and writes its ibv form.
inline Status ToIbvRecvWr(const tp::RecvWr& in, uint32_t max_sge, ibv_sge* sges,
                          ibv_recv_wr* out) {
  if (in.num_sge < 0 || static_cast<uint32_t>(in.num_sge) > max_sge) {
    return InvalidArgument("num_sge exceeds max_recv_sge");
  }
  if (in.num_sge > 0 && in.sg_list == nullptr) {
    return InvalidArgument("sg_list is null");
  }
  for (int32_t i = 0; i < in.num_sge; ++i) {
    sges[i].addr = in.sg_list[i].addr;
    sges[i].length = in.sg_list[i].length;
    sges[i].lkey = in.sg_list[i].lkey;
  }
  *out = ibv_recv_wr{};
  out->wr_id = in.wr_id;
  out->sg_list = in.num_sge > 0 ? sges : nullptr;
  out->num_sge = in.num_sge;
  return Status::Ok();
}

}  // namespace softfab::verbs::internal

#endif  // SOFTFAB_BACKENDS_VERBS_INTERNAL_TRANSLATE_H_
