// Tests of the public sfv_* C API: the ported ping-pong, argument validation
// (errors as ibv_* returns them, no side effects), and the verbs semantics seen
// through the C layer.
#include "api/softfab/verbs.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "api/pingpong.h"

namespace {

// Stores an arbitrary int into a C enum field, as a C caller could (a C++ cast
// to an out-of-range enum value would itself be undefined).
template <typename E>
void SetRaw(E* field, int v) {
  std::memcpy(field, &v, sizeof(v));
}

sfv_sim_config Config(int nodes = 2, uint64_t seed = 1) {
  sfv_sim_config c;
  std::memset(&c, 0, sizeof(c));
  c.nodes = nodes;
  c.master_seed = seed;
  return c;
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

// A two-node setup through the C API.
struct Side {
  sfv_context* ctx = nullptr;
  sfv_pd* pd = nullptr;
  sfv_cq* cq = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(8192);
  sfv_mr* mr = nullptr;
};

class SfvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sfv_sim_config c = Config();
    f_ = sfv_sim_fabric_create(&c);
    ASSERT_NE(f_, nullptr);
    int n = 0;
    list_ = sfv_sim_get_device_list(f_, &n);
    ASSERT_EQ(n, 2);
    ASSERT_EQ(list_[2], nullptr);
    for (int i = 0; i < 2; ++i) {
      s_[i].ctx = sfv_open_device(list_[i]);
      ASSERT_NE(s_[i].ctx, nullptr);
      s_[i].pd = sfv_alloc_pd(s_[i].ctx);
      s_[i].cq = sfv_create_cq(s_[i].ctx, 64, nullptr, nullptr, 0);
      s_[i].mr = sfv_reg_mr(s_[i].pd, s_[i].buf.data(), s_[i].buf.size(),
                            SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE |
                                SFV_ACCESS_REMOTE_READ);
      ASSERT_NE(s_[i].mr, nullptr);
    }
  }
  void TearDown() override {
    sfv_free_device_list(list_);
    sfv_sim_fabric_destroy(f_);
  }

  sfv_qp* Qp(int side, sfv_srq* srq = nullptr, sfv_qp_type type = SFV_QPT_RC) {
    sfv_qp_init_attr a;
    std::memset(&a, 0, sizeof(a));
    a.send_cq = s_[side].cq;
    a.recv_cq = s_[side].cq;
    a.srq = srq;
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = srq ? 0 : 16;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = srq ? 0 : 1;
    a.qp_type = type;
    a.sq_sig_all = 1;
    return sfv_create_qp(s_[side].pd, &a);
  }

  static int ToInit(sfv_qp* qp) {
    sfv_qp_attr a;
    std::memset(&a, 0, sizeof(a));
    a.qp_state = SFV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = SFV_ACCESS_REMOTE_WRITE | SFV_ACCESS_REMOTE_READ;
    a.qkey = 0x1234;
    const int key =
        qp->qp_type == SFV_QPT_RC ? SFV_QP_ACCESS_FLAGS : SFV_QP_QKEY;
    return sfv_modify_qp(qp, &a,
                         SFV_QP_STATE | SFV_QP_PKEY_INDEX | SFV_QP_PORT | key);
  }

  static void Connect(sfv_qp* q, int peer_lid, uint32_t peer_qpn) {
    ASSERT_EQ(ToInit(q), 0);
    sfv_qp_attr a;
    std::memset(&a, 0, sizeof(a));
    a.qp_state = SFV_QPS_RTR;
    a.path_mtu = SFV_MTU_1024;
    a.dest_qp_num = peer_qpn;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = static_cast<uint16_t>(peer_lid);
    a.ah_attr.port_num = 1;
    ASSERT_EQ(
        sfv_modify_qp(q, &a,
                      SFV_QP_STATE | SFV_QP_AV | SFV_QP_PATH_MTU |
                          SFV_QP_DEST_QPN | SFV_QP_RQ_PSN |
                          SFV_QP_MAX_DEST_RD_ATOMIC | SFV_QP_MIN_RNR_TIMER),
        0);
    a.qp_state = SFV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    ASSERT_EQ(sfv_modify_qp(q, &a,
                            SFV_QP_STATE | SFV_QP_TIMEOUT | SFV_QP_RETRY_CNT |
                                SFV_QP_RNR_RETRY | SFV_QP_SQ_PSN |
                                SFV_QP_MAX_QP_RD_ATOMIC),
              0);
    EXPECT_EQ(q->state, SFV_QPS_RTS);
  }

  int Send(sfv_qp* qp, uint64_t wr_id, uint32_t len) {
    sfv_sge sge{reinterpret_cast<uintptr_t>(s_[0].buf.data()), len,
                s_[0].mr->lkey};
    sfv_send_wr wr;
    std::memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = SFV_WR_SEND;
    sfv_send_wr* bad = nullptr;
    return sfv_post_send(qp, &wr, &bad);
  }

  sfv_sim_fabric* f_ = nullptr;
  sfv_device** list_ = nullptr;
  Side s_[2];
};

TEST_F(SfvTest, CreateCallsReturnNullAndErrno) {
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
  EXPECT_EQ(sfv_open_device(nullptr), nullptr);
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
  sfv_ah_attr ah;
  std::memset(&ah, 0, sizeof(ah));
  ah.dlid = 77;  // no such port
  errno = 0;
  EXPECT_EQ(sfv_create_ah(s_[0].pd, &ah), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(SfvTest, PostAndModifyReturnErrnoAndChangeNothing) {
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
  sfv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = SFV_WR_SEND;
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
  // Query reflects what was set.
  sfv_qp_attr q;
  sfv_qp_init_attr qi;
  ASSERT_EQ(sfv_query_qp(qp, &q, SFV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, SFV_QPS_INIT);
  EXPECT_EQ(q.port_num, 1);
  EXPECT_EQ(qi.send_cq, s_[0].cq);
  EXPECT_EQ(qi.cap.max_send_wr, 16u);
  // Busy objects refuse to go.
  EXPECT_EQ(sfv_dealloc_pd(s_[0].pd), EBUSY);
  EXPECT_EQ(sfv_destroy_cq(s_[0].cq), EBUSY);
  EXPECT_EQ(sfv_close_device(s_[0].ctx), EBUSY);
  EXPECT_EQ(sfv_destroy_qp(qp), 0);
  EXPECT_EQ(sfv_destroy_cq(s_[0].cq), 0);
  EXPECT_EQ(sfv_dereg_mr(s_[0].mr), 0);
  EXPECT_EQ(sfv_dealloc_pd(s_[0].pd), 0);
  EXPECT_EQ(sfv_close_device(s_[0].ctx), 0);
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

TEST_F(SfvTest, SendRecvErrorFlushAndQueryThroughCApi) {
  sfv_qp* a = Qp(0);
  sfv_qp* b = Qp(1);
  Connect(a, 2, b->qp_num);
  Connect(b, 1, a->qp_num);
  sfv_sge rs{reinterpret_cast<uintptr_t>(s_[1].buf.data()), 64, s_[1].mr->lkey};
  sfv_recv_wr rwr;
  std::memset(&rwr, 0, sizeof(rwr));
  rwr.wr_id = 9;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  sfv_recv_wr* rbad;
  ASSERT_EQ(sfv_post_recv(b, &rwr, &rbad), 0);
  std::memcpy(s_[0].buf.data(), "hello", 6);
  ASSERT_EQ(Send(a, 1, 6), 0);
  sfv_wc wc;
  ASSERT_EQ(sfv_poll_cq(s_[1].cq, 1, &wc), 1);  // busy poll runs the fabric
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, SFV_WC_RECV);
  EXPECT_EQ(wc.byte_len, 6u);
  EXPECT_EQ(wc.src_qp, a->qp_num);
  EXPECT_STREQ(reinterpret_cast<char*>(s_[1].buf.data()), "hello");
  ASSERT_EQ(sfv_poll_cq(s_[0].cq, 1, &wc), 1);
  EXPECT_EQ(wc.opcode, SFV_WC_SEND);
  // Move a to ERROR: a later send flushes.
  sfv_qp_attr e;
  std::memset(&e, 0, sizeof(e));
  e.qp_state = SFV_QPS_ERR;
  ASSERT_EQ(sfv_modify_qp(a, &e, SFV_QP_STATE), 0);
  EXPECT_EQ(a->state, SFV_QPS_ERR);
  ASSERT_EQ(Send(a, 2, 6), 0);
  ASSERT_EQ(sfv_poll_cq(s_[0].cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.qp_num, a->qp_num);
}

TEST_F(SfvTest, SrqListBadWrAndLimitEvent) {
  sfv_srq_init_attr si;
  std::memset(&si, 0, sizeof(si));
  si.attr.max_wr = 4;
  si.attr.max_sge = 1;
  sfv_srq* srq = sfv_create_srq(s_[1].pd, &si);
  ASSERT_NE(srq, nullptr);
  sfv_sge one{reinterpret_cast<uintptr_t>(s_[1].buf.data()), 64,
              s_[1].mr->lkey};
  sfv_sge two[2] = {one, one};
  sfv_recv_wr w[3];
  std::memset(w, 0, sizeof(w));
  for (int i = 0; i < 3; ++i) {
    w[i].wr_id = 10 + i;
    w[i].sg_list = i == 1 ? two : &one;
    w[i].num_sge = i == 1 ? 2 : 1;
    w[i].next = i < 2 ? &w[i + 1] : nullptr;
  }
  sfv_recv_wr* bad = nullptr;
  EXPECT_EQ(sfv_post_srq_recv(srq, &w[0], &bad), EINVAL);
  EXPECT_EQ(bad, &w[1]);
  EXPECT_EQ(sfv_post_srq_recv(srq, &w[0], nullptr), EINVAL);
  // w[0] is posted (1). Three more fill it (4); the next is ENOMEM.
  w[1].num_sge = 1;
  w[1].sg_list = &one;
  w[2].next = nullptr;
  ASSERT_EQ(sfv_post_srq_recv(srq, &w[1], &bad), 0);  // 3
  sfv_recv_wr extra[2];
  std::memset(extra, 0, sizeof(extra));
  extra[0].sg_list = extra[1].sg_list = &one;
  extra[0].num_sge = extra[1].num_sge = 1;
  extra[0].wr_id = 20;
  extra[1].wr_id = 21;
  extra[0].next = &extra[1];
  EXPECT_EQ(sfv_post_srq_recv(srq, &extra[0], &bad), ENOMEM);
  EXPECT_EQ(bad, &extra[1]);
  // Arm the limit at 4 (count is 4): the first message takes one, 3 < 4 fires.
  sfv_srq_attr la;
  la.max_wr = 0;
  la.max_sge = 0;
  la.srq_limit = 4;
  ASSERT_EQ(sfv_modify_srq(srq, &la, SFV_SRQ_LIMIT), 0);
  sfv_qp* a = Qp(0);
  sfv_qp* b = Qp(1, srq);
  ASSERT_NE(b, nullptr);
  Connect(a, 2, b->qp_num);
  Connect(b, 1, a->qp_num);
  ASSERT_EQ(Send(a, 1, 8), 0);
  sfv_wc wc;
  ASSERT_EQ(sfv_poll_cq(s_[1].cq, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 10u);  // the head
  sfv_async_event ev;
  ASSERT_EQ(sfv_get_async_event(s_[1].ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, SFV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  sfv_ack_async_event(&ev);
  sfv_srq_attr q;
  ASSERT_EQ(sfv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.srq_limit, 0u);
  EXPECT_EQ(sfv_destroy_srq(srq), EBUSY);
  // b to ERROR: LAST_WQE_REACHED names the QP.
  sfv_qp_attr e;
  std::memset(&e, 0, sizeof(e));
  e.qp_state = SFV_QPS_ERR;
  ASSERT_EQ(sfv_modify_qp(b, &e, SFV_QP_STATE), 0);
  ASSERT_EQ(sfv_get_async_event(s_[1].ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, SFV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(ev.element.qp, b);
}

TEST_F(SfvTest, UdThroughCApiHasGrhAtFortyBytes) {
  sfv_qp* a = Qp(0, nullptr, SFV_QPT_UD);
  sfv_qp* b = Qp(1, nullptr, SFV_QPT_UD);
  for (sfv_qp* q : {a, b}) {
    ASSERT_EQ(ToInit(q), 0);
    sfv_qp_attr x;
    std::memset(&x, 0, sizeof(x));
    x.qp_state = SFV_QPS_RTR;
    ASSERT_EQ(sfv_modify_qp(q, &x, SFV_QP_STATE), 0);
    x.qp_state = SFV_QPS_RTS;
    ASSERT_EQ(sfv_modify_qp(q, &x, SFV_QP_STATE | SFV_QP_SQ_PSN), 0);
  }
  sfv_ah_attr ah;
  std::memset(&ah, 0, sizeof(ah));
  ah.is_global = 1;
  ah.port_num = 1;
  ASSERT_EQ(sfv_query_gid(s_[1].ctx, 1, 0, &ah.grh.dgid), 0);
  sfv_ah* h = sfv_create_ah(s_[0].pd, &ah);
  ASSERT_NE(h, nullptr);
  sfv_sge rs{reinterpret_cast<uintptr_t>(s_[1].buf.data()), 40 + 16,
             s_[1].mr->lkey};
  sfv_recv_wr rwr;
  std::memset(&rwr, 0, sizeof(rwr));
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  sfv_recv_wr* rbad;
  ASSERT_EQ(sfv_post_recv(b, &rwr, &rbad), 0);
  std::memcpy(s_[0].buf.data(), "0123456789abcdef", 16);
  sfv_sge ss{reinterpret_cast<uintptr_t>(s_[0].buf.data()), 16, s_[0].mr->lkey};
  sfv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.sg_list = &ss;
  wr.num_sge = 1;
  wr.opcode = SFV_WR_SEND;
  wr.wr.ud.ah = h;
  wr.wr.ud.remote_qpn = b->qp_num;
  wr.wr.ud.remote_qkey = 0x1234;
  sfv_send_wr* bad;
  ASSERT_EQ(sfv_post_send(a, &wr, &bad), 0);
  sfv_wc wc;
  ASSERT_EQ(sfv_poll_cq(s_[1].cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, 56u);
  EXPECT_EQ(wc.wc_flags & SFV_WC_GRH, static_cast<unsigned>(SFV_WC_GRH));
  EXPECT_EQ(std::memcmp(s_[1].buf.data() + 40, "0123456789abcdef", 16), 0);
  EXPECT_EQ(s_[1].buf[0], 0xa5);
  EXPECT_EQ(sfv_destroy_ah(h), 0);
}

}  // namespace
