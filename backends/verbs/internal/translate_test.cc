// Host tests of the verbs backend's field translation (internal/translate.h):
// completions, addresses, QP attributes, work requests and async events,
// without a device.
#include "backends/verbs/internal/translate.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace softfab::verbs::internal {
namespace {

PortMap RoceMap() {
  PortMap m;
  m.physical_port = 2;
  m.gid_index = 3;
  m.ethernet = true;
  return m;
}

TEST(TranslateWc, SuccessCopiesEveryFieldAndKeepsModelledFlags) {
  ibv_wc in{};
  in.wr_id = 0x1234'5678'9abc'def0ull;
  in.status = IBV_WC_SUCCESS;
  in.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  in.vendor_err = 7;
  in.byte_len = 4096;
  in.imm_data = 0xdeadbeef;
  in.qp_num = 0x11;
  in.src_qp = 0x22;
  in.wc_flags = IBV_WC_GRH | IBV_WC_WITH_IMM | IBV_WC_IP_CSUM_OK;
  in.pkey_index = 3;
  in.slid = 9;
  in.sl = 2;
  in.dlid_path_bits = 1;
  tp::WorkCompletion out;
  ToWorkCompletion(in, &out);
  EXPECT_EQ(out.wr_id, in.wr_id);
  EXPECT_EQ(out.status, tp::WcStatus::kSuccess);
  EXPECT_EQ(out.opcode, tp::WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(out.vendor_err, 7u);
  EXPECT_EQ(out.byte_len, 4096u);
  EXPECT_EQ(out.imm_data, 0xdeadbeefu);
  EXPECT_EQ(out.qp_num, 0x11u);
  EXPECT_EQ(out.src_qp, 0x22u);
  EXPECT_EQ(out.wc_flags, tp::kWcGrh | tp::kWcWithImm);
  EXPECT_EQ(out.pkey_index, 3);
  EXPECT_EQ(out.slid, 9);
  EXPECT_EQ(out.sl, 2);
  EXPECT_EQ(out.dlid_path_bits, 1);
}

TEST(TranslateWc, ImmediateOnlyWithTheFlag) {
  ibv_wc in{};
  in.opcode = IBV_WC_RECV;
  in.imm_data = 0x55;  // stale bits: no IBV_WC_WITH_IMM
  tp::WorkCompletion out;
  ToWorkCompletion(in, &out);
  EXPECT_EQ(out.imm_data, 0u);
  EXPECT_EQ(out.opcode, tp::WcOpcode::kRecv);
}

TEST(TranslateWc, ErrorCarriesOnlyIdStatusQpAndVendorError) {
  ibv_wc in{};
  in.wr_id = 5;
  in.status = IBV_WC_WR_FLUSH_ERR;
  in.opcode = IBV_WC_RDMA_READ;  // undefined for errors
  in.vendor_err = 0x244;
  in.byte_len = 77;
  in.qp_num = 0x33;
  in.src_qp = 0x44;
  in.wc_flags = IBV_WC_GRH;
  tp::WorkCompletion out;
  ToWorkCompletion(in, &out);
  EXPECT_EQ(out.wr_id, 5u);
  EXPECT_EQ(out.status, tp::WcStatus::kWrFlushErr);
  EXPECT_EQ(out.vendor_err, 0x244u);
  EXPECT_EQ(out.qp_num, 0x33u);
  EXPECT_EQ(out.opcode, tp::WcOpcode::kSend);
  EXPECT_EQ(out.byte_len, 0u);
  EXPECT_EQ(out.src_qp, 0u);
  EXPECT_EQ(out.wc_flags, 0u);
}

TEST(TranslateWc, StatusesBeyondTheTransportsAreGeneralErrors) {
  ibv_wc in{};
  in.status = static_cast<ibv_wc_status>(IBV_WC_GENERAL_ERR + 1);
  tp::WorkCompletion out;
  ToWorkCompletion(in, &out);
  EXPECT_EQ(out.status, tp::WcStatus::kGeneralErr);
}

TEST(TranslateAh, PortAndGidIndexMapToTheSelection) {
  tp::AhAttr in;
  in.is_global = 1;
  in.port_num = 1;
  in.grh.hop_limit = 64;
  in.grh.traffic_class = 5;
  in.grh.flow_label = 0x12345;
  in.grh.dgid.raw[15] = 9;
  in.sl = 1;
  in.static_rate = 2;
  ibv_ah_attr out{};
  ASSERT_TRUE(ToIbvAhAttr(in, RoceMap(), &out).ok());
  EXPECT_EQ(out.port_num, 2);
  EXPECT_EQ(out.is_global, 1);
  EXPECT_EQ(out.grh.sgid_index, 3);
  EXPECT_EQ(out.grh.hop_limit, 64);
  EXPECT_EQ(out.grh.traffic_class, 5);
  EXPECT_EQ(out.grh.flow_label, 0x12345u);
  EXPECT_EQ(out.grh.dgid.raw[15], 9);
  EXPECT_EQ(out.sl, 1);
  EXPECT_EQ(out.static_rate, 2);

  tp::AhAttr back;
  FromIbvAhAttr(out, RoceMap(), &back);
  EXPECT_EQ(back.port_num, 1);
  EXPECT_EQ(back.grh.sgid_index, 0);
  EXPECT_EQ(back.grh.dgid.raw[15], 9);
  EXPECT_EQ(back.is_global, 1);
}

TEST(TranslateAh, UnsetPortMeansTheSelectedOne) {
  tp::AhAttr in;
  in.is_global = 1;
  in.port_num = 0;
  ibv_ah_attr out{};
  ASSERT_TRUE(ToIbvAhAttr(in, RoceMap(), &out).ok());
  EXPECT_EQ(out.port_num, 2);
}

TEST(TranslateAh, RoceForcesTheGrhInfinibandDoesNot) {
  tp::AhAttr in;
  in.dlid = 7;
  ibv_ah_attr out{};
  ASSERT_TRUE(ToIbvAhAttr(in, RoceMap(), &out).ok());
  EXPECT_EQ(out.is_global, 1);
  EXPECT_EQ(out.grh.sgid_index, 3);
  PortMap ib = RoceMap();
  ib.ethernet = false;
  ASSERT_TRUE(ToIbvAhAttr(in, ib, &out).ok());
  EXPECT_EQ(out.is_global, 0);
  EXPECT_EQ(out.dlid, 7);
  EXPECT_EQ(out.grh.sgid_index, 0);
}

TEST(TranslateAh, OtherPortsAndGidIndicesAreInvalid) {
  tp::AhAttr in;
  in.is_global = 1;
  in.port_num = 2;
  ibv_ah_attr out{};
  EXPECT_EQ(ToIbvAhAttr(in, RoceMap(), &out).code(), EINVAL);
  in.port_num = 1;
  in.grh.sgid_index = 1;
  EXPECT_EQ(ToIbvAhAttr(in, RoceMap(), &out).code(), EINVAL);
}

TEST(TranslateQpAttr, OnlyMaskedFieldsAreCopied) {
  tp::QpAttr in;
  in.qp_state = tp::QpState::kRtr;
  in.path_mtu = tp::Mtu::k1024;
  in.dest_qp_num = 0x123;
  in.rq_psn = 0x456;
  in.max_dest_rd_atomic = 4;
  in.min_rnr_timer = 12;
  in.ah_attr.is_global = 1;
  in.ah_attr.port_num = 1;
  in.sq_psn = 0x999;  // not in the mask
  in.timeout = 14;    // not in the mask
  in.qkey = 0x11111;  // not in the mask
  const uint32_t mask = tp::kQpState | tp::kQpAv | tp::kQpPathMtu |
                        tp::kQpDestQpn | tp::kQpRqPsn | tp::kQpMaxDestRdAtomic |
                        tp::kQpMinRnrTimer;
  ibv_qp_attr out{};
  ASSERT_TRUE(ToIbvQpAttr(in, mask, RoceMap(), &out).ok());
  EXPECT_EQ(out.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(out.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(out.dest_qp_num, 0x123u);
  EXPECT_EQ(out.rq_psn, 0x456u);
  EXPECT_EQ(out.max_dest_rd_atomic, 4);
  EXPECT_EQ(out.min_rnr_timer, 12);
  EXPECT_EQ(out.ah_attr.port_num, 2);
  EXPECT_EQ(out.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(out.sq_psn, 0u);
  EXPECT_EQ(out.timeout, 0);
  EXPECT_EQ(out.qkey, 0u);
}

TEST(TranslateQpAttr, RtsAndInitFields) {
  tp::QpAttr in;
  in.qp_state = tp::QpState::kRts;
  in.sq_psn = 0xabcdef;
  in.timeout = 31;
  in.retry_cnt = 7;
  in.rnr_retry = 7;
  in.max_rd_atomic = 2;
  in.port_num = 1;
  in.pkey_index = 0;
  in.qkey = 0x1111;
  in.qp_access_flags = tp::kAccessRemoteWrite | tp::kAccessRemoteRead;
  in.cap.max_send_wr = 8;
  in.cap.max_inline_data = 64;
  in.en_sqd_async_notify = 1;
  ibv_qp_attr out{};
  ASSERT_TRUE(
      ToIbvQpAttr(in,
                  tp::kQpState | tp::kQpSqPsn | tp::kQpTimeout |
                      tp::kQpRetryCnt | tp::kQpRnrRetry | tp::kQpMaxQpRdAtomic |
                      tp::kQpPort | tp::kQpPkeyIndex | tp::kQpQkey |
                      tp::kQpAccessFlags | tp::kQpCap | tp::kQpEnSqdAsyncNotify,
                  RoceMap(), &out)
          .ok());
  EXPECT_EQ(out.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(out.sq_psn, 0xabcdefu);
  EXPECT_EQ(out.timeout, 31);
  EXPECT_EQ(out.retry_cnt, 7);
  EXPECT_EQ(out.rnr_retry, 7);
  EXPECT_EQ(out.max_rd_atomic, 2);
  EXPECT_EQ(out.port_num, 2);
  EXPECT_EQ(out.qkey, 0x1111u);
  EXPECT_EQ(out.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_REMOTE_WRITE |
                                                       IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(out.cap.max_send_wr, 8u);
  EXPECT_EQ(out.cap.max_inline_data, 64u);
  EXPECT_EQ(out.en_sqd_async_notify, 1);
}

TEST(TranslateQpAttr, OutOfRangeValuesAndUnmodelledBitsAreInvalid) {
  const PortMap map = RoceMap();
  ibv_qp_attr out{};
  auto code = [&](const tp::QpAttr& a, uint32_t mask) {
    return ToIbvQpAttr(a, mask, map, &out).code();
  };
  tp::QpAttr a;
  EXPECT_EQ(code(a, 1u << 21), EINVAL);
  EXPECT_EQ(code(a, tp::kQpAltPath), EINVAL);
  EXPECT_EQ(code(a, tp::kQpPathMigState), EINVAL);
  a.timeout = 32;
  EXPECT_EQ(code(a, tp::kQpTimeout), EINVAL);
  a = {};
  a.retry_cnt = 8;
  EXPECT_EQ(code(a, tp::kQpRetryCnt), EINVAL);
  a = {};
  a.rnr_retry = 8;
  EXPECT_EQ(code(a, tp::kQpRnrRetry), EINVAL);
  a = {};
  a.min_rnr_timer = 32;
  EXPECT_EQ(code(a, tp::kQpMinRnrTimer), EINVAL);
  a = {};
  a.path_mtu = static_cast<tp::Mtu>(0);
  EXPECT_EQ(code(a, tp::kQpPathMtu), EINVAL);
  a.path_mtu = static_cast<tp::Mtu>(6);
  EXPECT_EQ(code(a, tp::kQpPathMtu), EINVAL);
  a = {};
  a.qp_state = static_cast<tp::QpState>(7);
  EXPECT_EQ(code(a, tp::kQpState), EINVAL);
  a = {};
  a.dest_qp_num = 1u << 24;
  EXPECT_EQ(code(a, tp::kQpDestQpn), EINVAL);
  a = {};
  a.qp_access_flags = 1u << 4;
  EXPECT_EQ(code(a, tp::kQpAccessFlags), EINVAL);
  a = {};
  a.port_num = 2;
  EXPECT_EQ(code(a, tp::kQpPort), EINVAL);
  // The same values outside the mask are not looked at.
  a.timeout = 40;
  EXPECT_EQ(code(a, tp::kQpState), 0);
}

TEST(TranslateQpAttr, QueryMapsThePortBack) {
  ibv_qp_attr in{};
  in.qp_state = IBV_QPS_RTS;
  in.cur_qp_state = IBV_QPS_RTS;
  in.port_num = 2;
  in.ah_attr.port_num = 2;
  in.ah_attr.is_global = 1;
  in.ah_attr.grh.sgid_index = 3;
  in.path_mtu = IBV_MTU_4096;
  in.timeout = 14;
  in.rnr_retry = 7;
  in.sq_draining = 1;
  tp::QpAttr out;
  FromIbvQpAttr(in, RoceMap(), &out);
  EXPECT_EQ(out.qp_state, tp::QpState::kRts);
  EXPECT_EQ(out.port_num, 1);
  EXPECT_EQ(out.ah_attr.port_num, 1);
  EXPECT_EQ(out.ah_attr.grh.sgid_index, 0);
  EXPECT_EQ(out.path_mtu, tp::Mtu::k4096);
  EXPECT_EQ(out.timeout, 14);
  EXPECT_EQ(out.rnr_retry, 7);
  EXPECT_EQ(out.sq_draining, 1);
  in.port_num = 0;  // a RESET QP has none yet
  FromIbvQpAttr(in, RoceMap(), &out);
  EXPECT_EQ(out.port_num, 0);
}

ibv_ah* const kFakeAh = reinterpret_cast<ibv_ah*>(0x1000);
const tp::AddressHandle* const kOurAh =
    reinterpret_cast<const tp::AddressHandle*>(0x2000);

ibv_ah* Resolve(const tp::AddressHandle* ah) {
  return ah == kOurAh ? kFakeAh : nullptr;
}

TEST(TranslateSendWr, RcFieldsAndSges) {
  tp::Sge sg[2] = {{0x1000, 10, 0x77}, {0x2000, 20, 0x88}};
  tp::SendWr in;
  in.wr_id = 42;
  in.sg_list = sg;
  in.num_sge = 2;
  in.opcode = tp::WrOpcode::kRdmaWriteWithImm;
  in.send_flags = tp::kSendSignaled | tp::kSendFence;
  in.imm_data = 0x01020304;
  in.rdma.remote_addr = 0xabc000;
  in.rdma.rkey = 0x99;
  SendQueueLimits lim{4, 0, false};
  ibv_sge sges[4];
  ibv_send_wr out;
  // Whatever was there before (a batch's slot reused): every field a
  // provider reads for this opcode is written, the rest of the union too.
  std::memset(&out, 0xa5, sizeof out);
  ASSERT_TRUE(ToIbvSendWr(in, lim, Resolve, sges, &out).ok());
  EXPECT_EQ(out.wr.atomic.swap, 0u);
  EXPECT_EQ(out.qp_type.xrc.remote_srqn, 0u);
  EXPECT_EQ(out.wr_id, 42u);
  EXPECT_EQ(out.sg_list, sges);
  EXPECT_EQ(out.num_sge, 2);
  EXPECT_EQ(out.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(out.send_flags,
            static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_FENCE));
  EXPECT_EQ(out.imm_data, 0x01020304u);  // raw bits, not byte-swapped
  EXPECT_EQ(out.wr.rdma.remote_addr, 0xabc000u);
  EXPECT_EQ(out.wr.rdma.rkey, 0x99u);
  EXPECT_EQ(out.next, nullptr);
  EXPECT_EQ(sges[1].addr, 0x2000u);
  EXPECT_EQ(sges[1].length, 20u);
  EXPECT_EQ(sges[1].lkey, 0x88u);
}

TEST(TranslateSendWr, UdNeedsAnAddressHandleOfThisPd) {
  tp::SendWr in;
  in.opcode = tp::WrOpcode::kSend;
  in.ud.remote_qpn = 0x55;
  in.ud.remote_qkey = 0x1111;
  SendQueueLimits lim{1, 0, true};
  ibv_sge sges[1];
  ibv_send_wr out{};
  EXPECT_EQ(ToIbvSendWr(in, lim, Resolve, sges, &out).code(), EINVAL);
  in.ud.ah = reinterpret_cast<tp::AddressHandle*>(0x3000);  // foreign
  EXPECT_EQ(ToIbvSendWr(in, lim, Resolve, sges, &out).code(), EINVAL);
  in.ud.ah = const_cast<tp::AddressHandle*>(kOurAh);
  std::memset(&out, 0xa5, sizeof out);
  ASSERT_TRUE(ToIbvSendWr(in, lim, Resolve, sges, &out).ok());
  EXPECT_EQ(out.next, nullptr);
  EXPECT_EQ(out.send_flags, 0u);
  EXPECT_EQ(out.imm_data, 0u);
  EXPECT_EQ(out.wr.ud.ah, kFakeAh);
  EXPECT_EQ(out.wr.ud.remote_qpn, 0x55u);
  EXPECT_EQ(out.wr.ud.remote_qkey, 0x1111u);
  EXPECT_EQ(out.num_sge, 0);
  EXPECT_EQ(out.sg_list, nullptr);
  in.opcode = tp::WrOpcode::kRdmaWrite;
  EXPECT_EQ(ToIbvSendWr(in, lim, Resolve, sges, &out).code(), EINVAL);
}

TEST(TranslateSendWr, MalformedRequestsAreInvalid) {
  tp::Sge sg[2] = {{0x1000, 64, 1}, {0x2000, 0, 1}};
  SendQueueLimits lim{2, 64, false};
  ibv_sge sges[2];
  ibv_send_wr out{};
  auto code = [&](const tp::SendWr& wr) {
    return ToIbvSendWr(wr, lim, Resolve, sges, &out).code();
  };
  tp::SendWr in;
  in.sg_list = sg;
  in.num_sge = 1;
  in.send_flags = tp::kSendInline;
  EXPECT_EQ(code(in), 0);  // 64 bytes inline: exactly the limit
  sg[0].length = 65;
  EXPECT_EQ(code(in), EINVAL);
  sg[0].length = 64;
  in.opcode = tp::WrOpcode::kRdmaRead;
  EXPECT_EQ(code(in), EINVAL);  // inline READ
  in.opcode = static_cast<tp::WrOpcode>(5);
  in.send_flags = 0;
  EXPECT_EQ(code(in), EINVAL);
  in.opcode = tp::WrOpcode::kSend;
  in.send_flags = 1u << 4;
  EXPECT_EQ(code(in), EINVAL);
  in.send_flags = 0;
  in.num_sge = 3;
  EXPECT_EQ(code(in), EINVAL);
  in.num_sge = -1;
  EXPECT_EQ(code(in), EINVAL);
  in.num_sge = 1;
  in.sg_list = nullptr;
  EXPECT_EQ(code(in), EINVAL);
  // A zero length is 2^31 bytes: with another SGE the message is too long.
  in.sg_list = sg;
  in.num_sge = 2;
  EXPECT_EQ(code(in), EINVAL);
  in.sg_list = &sg[1];
  in.num_sge = 1;
  EXPECT_EQ(code(in), 0);
}

TEST(TranslateRecvWr, FieldsAndChecks) {
  tp::Sge sg[1] = {{0x5000, 100, 0x66}};
  tp::RecvWr in;
  in.wr_id = 9;
  in.sg_list = sg;
  in.num_sge = 1;
  ibv_sge sges[1];
  ibv_recv_wr out{};
  ASSERT_TRUE(ToIbvRecvWr(in, 1, sges, &out).ok());
  EXPECT_EQ(out.wr_id, 9u);
  EXPECT_EQ(out.num_sge, 1);
  EXPECT_EQ(out.sg_list[0].addr, 0x5000u);
  EXPECT_EQ(out.sg_list[0].lkey, 0x66u);
  EXPECT_EQ(ToIbvRecvWr(in, 0, sges, &out).code(), EINVAL);
  in.sg_list = nullptr;
  EXPECT_EQ(ToIbvRecvWr(in, 1, sges, &out).code(), EINVAL);
  in.num_sge = 0;  // a zero-length receive
  EXPECT_TRUE(ToIbvRecvWr(in, 1, sges, &out).ok());
}

TEST(TranslateAsyncEvent, ObjectsBecomeNumbersAndPortsAreMapped) {
  ibv_qp qp{};
  qp.qp_num = 0x77;
  ibv_cq cq{};
  cq.handle = 5;
  ibv_srq srq{};
  srq.handle = 6;
  tp::AsyncEvent out;
  ibv_async_event ev{};
  ev.event_type = IBV_EVENT_QP_LAST_WQE_REACHED;
  ev.element.qp = &qp;
  ASSERT_TRUE(ToAsyncEvent(ev, RoceMap(), 123, &out));
  EXPECT_EQ(out.event_type, tp::AsyncEventType::kQpLastWqeReached);
  EXPECT_EQ(out.qp_num, 0x77u);
  EXPECT_EQ(out.time_ns, 123u);
  ev.event_type = IBV_EVENT_CQ_ERR;
  ev.element.cq = &cq;
  ASSERT_TRUE(ToAsyncEvent(ev, RoceMap(), 0, &out));
  EXPECT_EQ(out.cq_handle, 5u);
  ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
  ev.element.srq = &srq;
  ASSERT_TRUE(ToAsyncEvent(ev, RoceMap(), 0, &out));
  EXPECT_EQ(out.event_type, tp::AsyncEventType::kSrqLimitReached);
  EXPECT_EQ(out.srq_handle, 6u);
  ev.event_type = IBV_EVENT_PORT_ERR;
  ev.element.port_num = 2;
  ASSERT_TRUE(ToAsyncEvent(ev, RoceMap(), 0, &out));
  EXPECT_EQ(out.port_num, 1);
  ev.element.port_num = 1;  // not the selected port
  EXPECT_FALSE(ToAsyncEvent(ev, RoceMap(), 0, &out));
  ev.event_type = IBV_EVENT_WQ_FATAL;
  EXPECT_FALSE(ToAsyncEvent(ev, RoceMap(), 0, &out));
}

TEST(TranslatePortState, ActiveDeferIsActive) {
  EXPECT_EQ(ToPortState(IBV_PORT_ACTIVE_DEFER), tp::PortState::kActive);
  EXPECT_EQ(ToPortState(IBV_PORT_DOWN), tp::PortState::kDown);
  EXPECT_EQ(ToPortState(IBV_PORT_ARMED), tp::PortState::kArmed);
}

}  // namespace
}  // namespace softfab::verbs::internal
