// Tests of the public sfv_* C API: the ported ping-pong (busy-polling and
// event-driven, on the simulator and on a real device), argument validation
// (errors as ibv_* returns them, no side effects) and the verbs semantics seen
// through the C layer, each case on both backends (SfvApiTest/Sim and
// SfvApiTest/Device; see tests/support/sfv_test_util.h). Completion channels
// and the device list are in verbs_channel_test.cc, rxe's quirks in
// verbs_quirks_test.cc.
#include "api/softfab/verbs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "tests/support/pingpong.h"
#include "tests/support/sfv_test_util.h"

namespace softfab::sfv_testing {
namespace {

sfv_sim_config Config(int nodes = 2, uint64_t seed = 1) {
  sfv_sim_config c;
  std::memset(&c, 0, sizeof(c));
  c.nodes = nodes;
  c.master_seed = seed;
  return c;
}

pp_options Options(int iters, int size, bool use_event, int timeout_ms = 0) {
  pp_options o;
  std::memset(&o, 0, sizeof(o));
  o.iters = iters;
  o.size = size;
  o.use_event = use_event ? 1 : 0;
  o.timeout_ms = timeout_ms;
  return o;
}

TEST(SfvPingPongTest, RawVerbsPingPongRunsOnTheSimulator) {
  sfv_sim_config c = Config();
  sfv_sim_fabric* f = sfv_sim_fabric_create(&c);
  ASSERT_NE(f, nullptr);
  pp_result r;
  ASSERT_EQ(sfv_pingpong_run(f, 1000, 4096, &r), 0);
  EXPECT_EQ(r.round_trips, 1000);
  EXPECT_TRUE(r.bytes_ok);
  // At least two 1 us hops per round trip.
  EXPECT_GT(r.virtual_ns, 1000u * 2000u);
  sfv_sim_fabric_destroy(f);
}

TEST(SfvPingPongTest, EventDrivenOnTheSimulatorTakesAnEventPerMessage) {
  sfv_sim_config c = Config();
  sfv_sim_fabric* f = sfv_sim_fabric_create(&c);
  ASSERT_NE(f, nullptr);
  const pp_options o = Options(200, 4096, true);
  pp_result r;
  ASSERT_EQ(sfv_pingpong_run_sim(f, &o, &r), 0) << sfv_last_error();
  EXPECT_EQ(r.round_trips, 200);
  EXPECT_TRUE(r.bytes_ok);
  // Every message is awaited through an event on each side: at least one per
  // round trip and side (a send and a receive may share one).
  EXPECT_GE(r.cq_events, 2u * 200u);
  sfv_sim_fabric_destroy(f);
}

TEST(SfvPingPongTest, SurvivesLossAndReplaysBitForBit) {
  uint64_t digests[2];
  for (int run = 0; run < 2; ++run) {
    sfv_sim_config c = Config(2, 77);
    c.drop_probability = 0.05;
    c.duplicate_probability = 0.02;
    c.reorder_probability = 0.02;
    c.reorder_delay_ns = 5000;
    sfv_sim_fabric* f = sfv_sim_fabric_create(&c);
    ASSERT_NE(f, nullptr);
    pp_result r;
    ASSERT_EQ(sfv_pingpong_run(f, 300, 2000, &r), 0) << "replay: seed 77";
    EXPECT_EQ(r.round_trips, 300);
    digests[run] = sfv_sim_digest(f);
    sfv_sim_fabric_destroy(f);
  }
  EXPECT_EQ(digests[0], digests[1]);
}

// The ping-pong on the real device the suites use; skipped without one.
class SfvDevicePingPongTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    int n = 0;
    sfv_device** list = sfv_get_device_list(&n);
    ASSERT_NE(list, nullptr);
    sfv_free_device_list(list);
    if (n == 0 && RequestedDevice() == nullptr) {
      GTEST_SKIP() << "no RDMA device to test on (" << sfv_last_error() << ")";
    }
  }
};

TEST_P(SfvDevicePingPongTest, RunsOnADevice) {
  const pp_options o = Options(200, 4096, GetParam(), 60'000);
  pp_result r;
  ASSERT_EQ(sfv_pingpong_run_device(RequestedDevice(), &o, &r), 0)
      << sfv_last_error();
  EXPECT_EQ(r.round_trips, 200);
  EXPECT_TRUE(r.bytes_ok);
  EXPECT_EQ(r.virtual_ns, 0u);
  if (GetParam()) {
    EXPECT_GE(r.cq_events, 2u * 200u);
  } else {
    EXPECT_EQ(r.cq_events, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, SfvDevicePingPongTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "EventDriven" : "BusyPolling";
                         });

TEST(SfvSimTest, BadFabricConfigsAreNullAndEinval) {
  errno = 0;
  EXPECT_EQ(sfv_sim_fabric_create(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  sfv_sim_config bad = Config(0);
  errno = 0;
  EXPECT_EQ(sfv_sim_fabric_create(&bad), nullptr);
  EXPECT_EQ(errno, EINVAL);
  bad = Config();
  bad.drop_probability = 2.0;
  EXPECT_EQ(sfv_sim_fabric_create(&bad), nullptr);
  bad = Config();
  SetRaw(&bad.mtu, 9);
  EXPECT_EQ(sfv_sim_fabric_create(&bad), nullptr);
  errno = 0;
  EXPECT_EQ(sfv_sim_get_device_list(nullptr, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

class SfvApiTest : public SfvBackendTest {};
INSTANTIATE_TEST_SUITE_P(Backends, SfvApiTest,
                         ::testing::Values(Backend::kSim, Backend::kDevice),
                         BackendName);

TEST_P(SfvApiTest, CreateCallsReturnNullAndErrno) {
  errno = 0;
  EXPECT_EQ(sfv_open_device(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STRNE(sfv_last_error(), "");
  EXPECT_EQ(sfv_alloc_pd(nullptr), nullptr);
  errno = 0;
  EXPECT_EQ(sfv_reg_mr(nullptr, s_[0].buf.data(), 8, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(sfv_reg_mr(s_[0].pd, nullptr, 8, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  // An unknown access flag.
  EXPECT_EQ(sfv_reg_mr(s_[0].pd, s_[0].buf.data(), 8, 1 << 20), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(sfv_reg_mr(s_[0].pd, s_[0].buf.data(), 8, SFV_ACCESS_REMOTE_WRITE),
            nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(sfv_create_cq(s_[0].ctx, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(sfv_create_cq(s_[0].ctx, 8, nullptr, nullptr,
                          s_[0].ctx->num_comp_vectors),
            nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(sfv_last_error(), "comp_vector out of range");
  sfv_qp_init_attr qa;
  std::memset(&qa, 0, sizeof(qa));
  qa.send_cq = s_[1].cq;  // a CQ of another context
  qa.recv_cq = s_[0].cq;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
  qa.qp_type = SFV_QPT_RC;
  errno = 0;
  EXPECT_EQ(sfv_create_qp(s_[0].pd, &qa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  qa.send_cq = s_[0].cq;
  qa.qp_type = SFV_QPT_UC;
  errno = 0;
  EXPECT_EQ(sfv_create_qp(s_[0].pd, &qa), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  qa.qp_type = SFV_QPT_RC;
  qa.cap.max_send_wr = 1u << 30;
  errno = 0;
  EXPECT_EQ(sfv_create_qp(s_[0].pd, &qa), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(SfvApiTest, PostAndModifyReturnErrnoAndChangeNothing) {
  sfv_qp* qp = Qp(0);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->state, SFV_QPS_RESET);
  sfv_qp_attr a;
  std::memset(&a, 0, sizeof(a));
  a.qp_state = SFV_QPS_RTR;
  EXPECT_EQ(sfv_modify_qp(qp, &a, SFV_QP_STATE), EINVAL);
  EXPECT_EQ(qp->state, SFV_QPS_RESET);
  SetRaw(&a.qp_state, 42);
  EXPECT_EQ(sfv_modify_qp(qp, &a, SFV_QP_STATE), EINVAL);
  EXPECT_EQ(sfv_modify_qp(nullptr, &a, SFV_QP_STATE), EINVAL);
  EXPECT_EQ(sfv_modify_qp(qp, nullptr, SFV_QP_STATE), EINVAL);
  // post_send in RESET: EINVAL, bad_wr names the WR.
  sfv_sge sge{reinterpret_cast<uintptr_t>(s_[0].buf.data()), 8, s_[0].mr->lkey};
  sfv_send_wr wr = OneSgeWr(0, SFV_WR_SEND, &sge);
  sfv_send_wr* bad = nullptr;
  EXPECT_EQ(sfv_post_send(qp, &wr, nullptr), EINVAL);
  EXPECT_EQ(sfv_post_send(qp, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  sfv_recv_wr rwr;
  std::memset(&rwr, 0, sizeof(rwr));
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  sfv_recv_wr* rbad = nullptr;
  EXPECT_EQ(sfv_post_recv(qp, &rwr, &rbad), EINVAL);  // RESET
  EXPECT_EQ(rbad, &rwr);
  ASSERT_EQ(ToInit(qp), 0);
  EXPECT_EQ(qp->state, SFV_QPS_INIT);
  rwr.num_sge = 2;  // > max_recv_sge
  EXPECT_EQ(sfv_post_recv(qp, &rwr, &rbad), EINVAL);
  rwr.num_sge = 1;
  EXPECT_EQ(sfv_post_recv(qp, &rwr, &rbad), 0);
  EXPECT_EQ(rbad, nullptr);
  // Query reflects what was set (the granted sizes: verbs_quirks_test.cc).
  sfv_qp_attr q;
  sfv_qp_init_attr qi;
  ASSERT_EQ(sfv_query_qp(qp, &q, SFV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, SFV_QPS_INIT);
  EXPECT_EQ(q.port_num, 1);
  EXPECT_EQ(qi.send_cq, s_[0].cq);
  EXPECT_GE(qi.cap.max_send_wr, 16u);
  // Busy objects refuse to go.
  EXPECT_EQ(sfv_dealloc_pd(s_[0].pd), EBUSY);
  EXPECT_EQ(sfv_destroy_cq(s_[0].cq), EBUSY);
  EXPECT_EQ(sfv_close_device(s_[0].ctx), EBUSY);
  EXPECT_EQ(sfv_destroy_qp(qp), 0);
  Forget(qp);
  EXPECT_EQ(sfv_destroy_cq(s_[0].cq), 0);
  s_[0].cq = nullptr;
  EXPECT_EQ(sfv_dereg_mr(s_[0].mr), 0);
  s_[0].mr = nullptr;
  EXPECT_EQ(sfv_dealloc_pd(s_[0].pd), 0);
  s_[0].pd = nullptr;
  EXPECT_EQ(sfv_close_device(s_[0].ctx), 0);
  s_[0].ctx = nullptr;
  // Polling and events with bad arguments.
  sfv_wc wc;
  EXPECT_EQ(sfv_poll_cq(nullptr, 1, &wc), -EINVAL);
  EXPECT_EQ(sfv_poll_cq(s_[1].cq, -1, &wc), -EINVAL);
  EXPECT_EQ(sfv_poll_cq(s_[1].cq, 1, nullptr), -EINVAL);
  sfv_async_event ev;
  errno = 0;
  EXPECT_EQ(sfv_get_async_event(s_[1].ctx, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_STREQ(sfv_wc_status_str(SFV_WC_WR_FLUSH_ERR),
               "Work Request Flushed Error");
}

TEST_P(SfvApiTest, SendRecvErrorFlushAndQueryThroughCApi) {
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ConnectedPair(&a, &b));
  ASSERT_EQ(Recv(b, 1, 9, 0, 64), 0);
  std::memcpy(s_[0].buf.data(), "hello", 6);
  ASSERT_EQ(Send(a, 1, 6), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, SFV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.byte_len, 6u);  // src_qp on RC: verbs_quirks_test.cc
  EXPECT_STREQ(reinterpret_cast<char*>(s_[1].buf.data()), "hello");
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, SFV_WC_SEND);
  // Move a to ERROR: a later send flushes.
  sfv_qp_attr e;
  std::memset(&e, 0, sizeof(e));
  e.qp_state = SFV_QPS_ERR;
  ASSERT_EQ(sfv_modify_qp(a, &e, SFV_QP_STATE), 0);
  EXPECT_EQ(a->state, SFV_QPS_ERR);
  ASSERT_EQ(Send(a, 2, 6), 0);
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.qp_num, a->qp_num);
  sfv_qp_attr q;
  ASSERT_EQ(sfv_query_qp(a, &q, SFV_QP_STATE, nullptr), 0);
  EXPECT_EQ(q.qp_state, SFV_QPS_ERR);
}

TEST_P(SfvApiTest, RdmaWriteWithImmAndReadMoveTheBytes) {
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ConnectedPair(&a, &b));
  ASSERT_EQ(Recv(b, 1, 5, 0, 64), 0);  // taken by the immediate, unwritten
  for (int i = 0; i < 256; ++i) s_[0].buf[i] = static_cast<uint8_t>(i);
  sfv_sge sge{reinterpret_cast<uintptr_t>(s_[0].buf.data()), 256,
              s_[0].mr->lkey};
  sfv_send_wr wr = OneSgeWr(1, SFV_WR_RDMA_WRITE_WITH_IMM, &sge);
  wr.imm_data = 0xabcd1234;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(s_[1].buf.data()) + 1024;
  wr.wr.rdma.rkey = s_[1].mr->rkey;
  sfv_send_wr* bad = nullptr;
  ASSERT_EQ(sfv_post_send(a, &wr, &bad), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, SFV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.wr_id, 5u);
  EXPECT_EQ(wc.imm_data, 0xabcd1234u);
  EXPECT_NE(wc.wc_flags & SFV_WC_WITH_IMM, 0u);
  EXPECT_EQ(wc.byte_len, 256u);
  EXPECT_EQ(std::memcmp(s_[1].buf.data() + 1024, s_[0].buf.data(), 256), 0);
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.opcode, SFV_WC_RDMA_WRITE);
  // Read it back into side 0's buffer at 4096.
  sge.addr = reinterpret_cast<uintptr_t>(s_[0].buf.data()) + 4096;
  wr.wr_id = 2;
  wr.opcode = SFV_WR_RDMA_READ;
  ASSERT_EQ(sfv_post_send(a, &wr, &bad), 0);
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, SFV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, 256u);
  EXPECT_EQ(std::memcmp(s_[0].buf.data() + 4096, s_[0].buf.data(), 256), 0);
}

TEST_P(SfvApiTest, SrqListBadWrAndLimitEvent) {
  sfv_srq* srq = Srq(1, 4);
  ASSERT_NE(srq, nullptr);
  sfv_srq_attr granted;
  ASSERT_EQ(sfv_query_srq(srq, &granted), 0);
  ASSERT_GE(granted.max_wr, 4u);  // exactly: verbs_quirks_test.cc
  sfv_sge one{reinterpret_cast<uintptr_t>(s_[1].buf.data()), 64,
              s_[1].mr->lkey};
  sfv_sge two[2] = {one, one};
  std::vector<sfv_recv_wr> w(granted.max_wr + 1);
  for (size_t i = 0; i < w.size(); ++i) {
    std::memset(&w[i], 0, sizeof(w[i]));
    w[i].wr_id = 10 + i;
    w[i].sg_list = &one;
    w[i].num_sge = 1;
    w[i].next = i + 1 < w.size() ? &w[i + 1] : nullptr;
  }
  // The second has too many SGEs: the first stays posted.
  w[1].sg_list = two;
  w[1].num_sge = 2;
  sfv_recv_wr* bad = nullptr;
  EXPECT_EQ(sfv_post_srq_recv(srq, &w[0], &bad), EINVAL);
  EXPECT_EQ(bad, &w[1]);
  EXPECT_EQ(sfv_post_srq_recv(srq, &w[0], nullptr), EINVAL);
  // One is posted; the rest fill it but the last, which is ENOMEM.
  w[1].sg_list = &one;
  w[1].num_sge = 1;
  EXPECT_EQ(sfv_post_srq_recv(srq, &w[1], &bad), ENOMEM);
  EXPECT_EQ(bad, &w.back());
  // Arm the limit at the count: the first message takes one and fires it.
  sfv_srq_attr la;
  la.max_wr = 0;
  la.max_sge = 0;
  la.srq_limit = granted.max_wr;
  ASSERT_EQ(sfv_modify_srq(srq, &la, SFV_SRQ_LIMIT), 0);
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ConnectedPair(&a, &b, srq));
  ASSERT_EQ(Send(a, 1, 8), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 10u);  // the head
  sfv_async_event ev;
  ASSERT_EQ(WaitAsyncEvent(1, &ev), 0);
  EXPECT_EQ(ev.event_type, SFV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  sfv_ack_async_event(&ev);
  sfv_srq_attr q;
  ASSERT_EQ(sfv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u);
  EXPECT_EQ(sfv_destroy_srq(srq), EBUSY);
  // What moving b to ERROR raises: verbs_quirks_test.cc.
}

TEST_P(SfvApiTest, UdThroughCApiHasTheGrhSpaceBeforeThePayload) {
  sfv_qp* a;
  sfv_qp* b;
  sfv_ah* h;
  ASSERT_NO_FATAL_FAILURE(UdPair(&a, &b, &h));
  ASSERT_EQ(Recv(b, 1, 3, 0, 40 + 16), 0);
  std::memcpy(s_[0].buf.data(), "0123456789abcdef", 16);
  ASSERT_EQ(SendUd(a, h, b->qp_num, 16), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, 56u);
  EXPECT_EQ(wc.src_qp, a->qp_num);
  EXPECT_EQ(wc.wc_flags & SFV_WC_GRH, static_cast<unsigned>(SFV_WC_GRH));
  EXPECT_EQ(std::memcmp(s_[1].buf.data() + 40, "0123456789abcdef", 16), 0);
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
}

TEST_P(SfvApiTest, InlineSendsUpToTheGrantedSize) {
  sfv_qp* a = Qp(0, nullptr, SFV_QPT_RC, nullptr, 64);
  sfv_qp* b = Qp(1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NO_FATAL_FAILURE(Connect(a, 1, b->qp_num));
  ASSERT_NO_FATAL_FAILURE(Connect(b, 0, a->qp_num));
  sfv_qp_attr attr;
  sfv_qp_init_attr init;
  ASSERT_EQ(sfv_query_qp(a, &attr, SFV_QP_CAP, &init), 0);
  const uint32_t granted = init.cap.max_inline_data;
  ASSERT_GE(granted, 64u);
  ASSERT_LE(granted, 4096u);
  ASSERT_EQ(Recv(b, 1, 4, 0, 4096), 0);
  // From unregistered memory, with no key: the bytes are copied at post.
  std::vector<uint8_t> bytes(granted + 1, 0x3c);
  sfv_sge sge{reinterpret_cast<uintptr_t>(bytes.data()), granted, 0};
  sfv_send_wr wr = OneSgeWr(1, SFV_WR_SEND, &sge);
  wr.send_flags = SFV_SEND_INLINE;
  sfv_send_wr* bad = nullptr;
  ASSERT_EQ(sfv_post_send(a, &wr, &bad), 0);
  std::fill(bytes.begin(), bytes.end(), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, granted);
  EXPECT_EQ(s_[1].buf[0], 0x3c);
  EXPECT_EQ(s_[1].buf[granted - 1], 0x3c);
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  // One byte over what the QP was granted is refused at post.
  sge.length = granted + 1;
  EXPECT_EQ(sfv_post_send(a, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
}

TEST_P(SfvApiTest, RdmaWriteWithABadRkeyIsARemoteAccessError) {
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ConnectedPair(&a, &b));
  sfv_sge sge{reinterpret_cast<uintptr_t>(s_[0].buf.data()), 64,
              s_[0].mr->lkey};
  sfv_send_wr wr = OneSgeWr(8, SFV_WR_RDMA_WRITE, &sge);
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(s_[1].buf.data());
  wr.wr.rdma.rkey = s_[1].mr->rkey ^ 0x5a5a00;
  sfv_send_wr* bad = nullptr;
  ASSERT_EQ(sfv_post_send(a, &wr, &bad), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);
  EXPECT_EQ(wc.wr_id, 8u);
  EXPECT_EQ(wc.status, SFV_WC_REM_ACCESS_ERR) << sfv_wc_status_str(wc.status);
  sfv_qp_attr q;
  ASSERT_EQ(sfv_query_qp(a, &q, SFV_QP_STATE, nullptr), 0);
  EXPECT_EQ(q.qp_state, SFV_QPS_ERR);
}

}  // namespace
}  // namespace softfab::sfv_testing
