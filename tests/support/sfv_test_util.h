// Test fixture for the sfv_* suites that run on both backends: two sides, each
// a context with a PD, a CQ and a registered buffer, on two nodes of a
// simulated fabric or as two contexts of one real device (the one named by
// SOFTFAB_VERBS_DEVICE or SOFTFAB_RXE_DEVICE, else the first listed). Without
// a device the real instance skips with the reason (never a pass); with one of
// those variables set, failing to open it fails. Every wait is bounded (rxe
// under emulation is slow), and on the simulator a wait ends as soon as the
// fabric has nothing left to run.
#ifndef SOFTFAB_TESTS_SUPPORT_SFV_TEST_UTIL_H_
#define SOFTFAB_TESTS_SUPPORT_SFV_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/softfab/verbs.h"

namespace softfab::sfv_testing {

// kSimMlx5: the simulator with the mlx5 personality (sfv_sim_config's
// personality), for the cases where ConnectX answers unlike rxe.
enum class Backend { kSim, kDevice, kSimMlx5 };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::kSim:
      return "Sim";
    case Backend::kSimMlx5:
      return "SimMlx5";
    case Backend::kDevice:
      break;
  }
  return "Device";
}

// The real device the tests use, or null for the first listed.
inline const char* RequestedDevice() {
  if (const char* name = std::getenv("SOFTFAB_VERBS_DEVICE")) return name;
  return std::getenv("SOFTFAB_RXE_DEVICE");
}

inline uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Every wait on a real device gives up after this long.
inline constexpr uint64_t kWaitMs = 20'000;

// Stores an arbitrary int into a C enum field, as a C caller could (a C++ cast
// to an out-of-range enum value would itself be undefined).
template <typename E>
void SetRaw(E* field, int v) {
  std::memcpy(field, &v, sizeof(v));
}

// A zeroed work request of one SGE.
inline sfv_send_wr OneSgeWr(uint64_t wr_id, sfv_wr_opcode opcode,
                            sfv_sge* sge) {
  sfv_send_wr wr;
  std::memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  return wr;
}

// Which answer a quirk test expects.
enum class Flavour { kSim, kRxe, kOtherDevice };

class SfvBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  struct Side {
    sfv_context* ctx = nullptr;
    sfv_pd* pd = nullptr;
    sfv_cq* cq = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(8192);
    sfv_mr* mr = nullptr;
    sfv_port_attr port{};
    sfv_gid gid{};
  };

  void SetUp() override {
    if (sim()) {
      sfv_sim_config c;
      std::memset(&c, 0, sizeof(c));
      c.nodes = 2;
      c.master_seed = 1;
      if (GetParam() == Backend::kSimMlx5) {
        c.personality = SFV_SIM_PERSONALITY_MLX5;
      }
      fabric_ = sfv_sim_fabric_create(&c);
      ASSERT_NE(fabric_, nullptr);
      int n = 0;
      list_ = sfv_sim_get_device_list(fabric_, &n);
      ASSERT_EQ(n, 2);
      ASSERT_EQ(list_[2], nullptr);
      devices_[0] = list_[0];
      devices_[1] = list_[1];
    } else {
      int n = 0;
      list_ = sfv_get_device_list(&n);
      ASSERT_NE(list_, nullptr) << sfv_last_error();
      const char* want = RequestedDevice();
      sfv_device* found = n > 0 && want == nullptr ? list_[0] : nullptr;
      for (int i = 0; want != nullptr && i < n; ++i) {
        if (std::strcmp(sfv_get_device_name(list_[i]), want) == 0) {
          found = list_[i];
        }
      }
      if (found == nullptr) {
        if (want != nullptr) {
          FAIL() << "device " << want << " (from SOFTFAB_VERBS_DEVICE or "
                 << "SOFTFAB_RXE_DEVICE) is not listed: " << sfv_last_error();
        }
        GTEST_SKIP() << "no RDMA device to test on (" << sfv_last_error()
                     << ")";
      }
      devices_[0] = devices_[1] = found;
    }
    for (int i = 0; i < 2; ++i) {
      Side& s = s_[i];
      s.ctx = sfv_open_device(devices_[i]);
      ASSERT_NE(s.ctx, nullptr) << sfv_last_error();
      s.pd = sfv_alloc_pd(s.ctx);
      ASSERT_NE(s.pd, nullptr) << sfv_last_error();
      s.cq = sfv_create_cq(s.ctx, 64, nullptr, nullptr, 0);
      ASSERT_NE(s.cq, nullptr) << sfv_last_error();
      s.mr = sfv_reg_mr(s.pd, s.buf.data(), s.buf.size(),
                        SFV_ACCESS_LOCAL_WRITE | SFV_ACCESS_REMOTE_WRITE |
                            SFV_ACCESS_REMOTE_READ);
      ASSERT_NE(s.mr, nullptr) << sfv_last_error();
      ASSERT_EQ(sfv_query_port(s.ctx, 1, &s.port), 0);
      ASSERT_EQ(sfv_query_gid(s.ctx, 1, 0, &s.gid), 0);
    }
    sfv_device_attr attr;
    ASSERT_EQ(sfv_query_device(s_[0].ctx, &attr), 0);
    flavour_ = sim()                        ? Flavour::kSim
               : attr.vendor_id == 0xffffff ? Flavour::kRxe
                                            : Flavour::kOtherDevice;
  }

  // Releases what the test left, in dependency order; on a real device that
  // is the only cleanup, so every step must succeed.
  void TearDown() override {
    for (sfv_qp* qp : qps_) EXPECT_EQ(sfv_destroy_qp(qp), 0);
    for (sfv_srq* srq : srqs_) EXPECT_EQ(sfv_destroy_srq(srq), 0);
    for (sfv_ah* ah : ahs_) EXPECT_EQ(sfv_destroy_ah(ah), 0);
    for (sfv_cq* cq : cqs_) EXPECT_EQ(sfv_destroy_cq(cq), 0);
    for (sfv_comp_channel* ch : channels_) {
      EXPECT_EQ(sfv_destroy_comp_channel(ch), 0);
    }
    for (Side& s : s_) {
      if (s.mr != nullptr) {
        EXPECT_EQ(sfv_dereg_mr(s.mr), 0);
      }
      if (s.cq != nullptr) {
        EXPECT_EQ(sfv_destroy_cq(s.cq), 0);
      }
      if (s.pd != nullptr) {
        EXPECT_EQ(sfv_dealloc_pd(s.pd), 0);
      }
      if (s.ctx != nullptr) {
        EXPECT_EQ(sfv_close_device(s.ctx), 0);
      }
    }
    sfv_free_device_list(list_);
    if (fabric_ != nullptr) sfv_sim_fabric_destroy(fabric_);
  }

  bool sim() const { return GetParam() != Backend::kDevice; }
  Flavour flavour() const { return flavour_; }

  // Tracked objects: TearDown destroys them unless a test did (through
  // Forget).
  sfv_qp* Qp(int side, sfv_srq* srq = nullptr, sfv_qp_type type = SFV_QPT_RC,
             sfv_cq* cq = nullptr, uint32_t max_inline_data = 0) {
    sfv_qp_init_attr a;
    std::memset(&a, 0, sizeof(a));
    a.send_cq = cq != nullptr ? cq : s_[side].cq;
    a.recv_cq = a.send_cq;
    a.srq = srq;
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = srq ? 0 : 16;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = srq ? 0 : 1;
    a.cap.max_inline_data = max_inline_data;
    a.qp_type = type;
    a.sq_sig_all = 1;
    sfv_qp* qp = sfv_create_qp(s_[side].pd, &a);
    EXPECT_NE(qp, nullptr) << sfv_last_error();
    if (qp != nullptr) qps_.push_back(qp);
    return qp;
  }
  sfv_srq* Srq(int side, uint32_t max_wr) {
    sfv_srq_init_attr si;
    std::memset(&si, 0, sizeof(si));
    si.attr.max_wr = max_wr;
    si.attr.max_sge = 1;
    sfv_srq* srq = sfv_create_srq(s_[side].pd, &si);
    EXPECT_NE(srq, nullptr) << sfv_last_error();
    if (srq != nullptr) srqs_.push_back(srq);
    return srq;
  }
  sfv_ah* Ah(int side, int peer) {
    sfv_ah_attr ah = Address(peer);
    sfv_ah* h = sfv_create_ah(s_[side].pd, &ah);
    EXPECT_NE(h, nullptr) << sfv_last_error();
    if (h != nullptr) ahs_.push_back(h);
    return h;
  }
  sfv_comp_channel* Channel(int side) {
    sfv_comp_channel* ch = sfv_create_comp_channel(s_[side].ctx);
    EXPECT_NE(ch, nullptr) << sfv_last_error();
    if (ch != nullptr) channels_.push_back(ch);
    return ch;
  }
  sfv_cq* Cq(int side, int cqe, sfv_comp_channel* channel = nullptr,
             void* cq_context = nullptr) {
    sfv_cq* cq = sfv_create_cq(s_[side].ctx, cqe, cq_context, channel, 0);
    EXPECT_NE(cq, nullptr) << sfv_last_error();
    if (cq != nullptr) cqs_.push_back(cq);
    return cq;
  }
  void Forget(sfv_qp* qp) { Erase(&qps_, qp); }
  void Forget(sfv_srq* srq) { Erase(&srqs_, srq); }
  void Forget(sfv_ah* ah) { Erase(&ahs_, ah); }
  void Forget(sfv_cq* cq) { Erase(&cqs_, cq); }
  void Forget(sfv_comp_channel* ch) { Erase(&channels_, ch); }

  // The address of `peer`'s port: its LID and GID (RoCE needs the GRH).
  sfv_ah_attr Address(int peer) const {
    sfv_ah_attr ah;
    std::memset(&ah, 0, sizeof(ah));
    ah.is_global = 1;
    ah.grh.dgid = s_[peer].gid;
    ah.grh.hop_limit = 1;
    ah.dlid = s_[peer].port.lid;
    ah.port_num = 1;
    return ah;
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

  // RESET -> RTS towards the QP `peer_qpn` of side `peer`.
  void Connect(sfv_qp* q, int peer, uint32_t peer_qpn, uint8_t rnr_retry = 7) {
    ASSERT_EQ(ToInit(q), 0);
    sfv_qp_attr a;
    std::memset(&a, 0, sizeof(a));
    a.qp_state = SFV_QPS_RTR;
    a.path_mtu = SFV_MTU_1024;
    a.dest_qp_num = peer_qpn;
    a.min_rnr_timer = 1;
    a.max_dest_rd_atomic = 1;
    a.ah_attr = Address(peer);
    ASSERT_EQ(
        sfv_modify_qp(q, &a,
                      SFV_QP_STATE | SFV_QP_AV | SFV_QP_PATH_MTU |
                          SFV_QP_DEST_QPN | SFV_QP_RQ_PSN |
                          SFV_QP_MAX_DEST_RD_ATOMIC | SFV_QP_MIN_RNR_TIMER),
        0);
    a.qp_state = SFV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = rnr_retry;
    a.max_rd_atomic = 1;
    ASSERT_EQ(sfv_modify_qp(q, &a,
                            SFV_QP_STATE | SFV_QP_TIMEOUT | SFV_QP_RETRY_CNT |
                                SFV_QP_RNR_RETRY | SFV_QP_SQ_PSN |
                                SFV_QP_MAX_QP_RD_ATOMIC),
              0);
    EXPECT_EQ(q->state, SFV_QPS_RTS);
  }
  // Two RC QPs, a on side 0 and b on side 1 (on `srq_b` if given), connected.
  void ConnectedPair(sfv_qp** a, sfv_qp** b, sfv_srq* srq_b = nullptr) {
    *a = Qp(0);
    *b = Qp(1, srq_b);
    ASSERT_NE(*a, nullptr);
    ASSERT_NE(*b, nullptr);
    Connect(*a, 1, (*b)->qp_num);
    Connect(*b, 0, (*a)->qp_num);
  }

  // Two UD QPs, a on side 0 and b on side 1, in RTS, and an address handle
  // on side 0 for side 1's port.
  void UdPair(sfv_qp** a, sfv_qp** b, sfv_ah** to_b) {
    *a = Qp(0, nullptr, SFV_QPT_UD);
    *b = Qp(1, nullptr, SFV_QPT_UD);
    ASSERT_NE(*a, nullptr);
    ASSERT_NE(*b, nullptr);
    for (sfv_qp* q : {*a, *b}) {
      ASSERT_EQ(ToInit(q), 0);
      sfv_qp_attr x;
      std::memset(&x, 0, sizeof(x));
      x.qp_state = SFV_QPS_RTR;
      ASSERT_EQ(sfv_modify_qp(q, &x, SFV_QP_STATE), 0);
      x.qp_state = SFV_QPS_RTS;
      ASSERT_EQ(sfv_modify_qp(q, &x, SFV_QP_STATE | SFV_QP_SQ_PSN), 0);
    }
    *to_b = Ah(0, 1);
    ASSERT_NE(*to_b, nullptr);
  }
  // A UD send of `len` bytes from side 0's buffer to QP `remote_qpn`.
  int SendUd(sfv_qp* qp, sfv_ah* ah, uint32_t remote_qpn, uint32_t len) {
    sfv_sge sge{reinterpret_cast<uintptr_t>(s_[0].buf.data()), len,
                s_[0].mr->lkey};
    sfv_send_wr wr = OneSgeWr(0, SFV_WR_SEND, &sge);
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = remote_qpn;
    wr.wr.ud.remote_qkey = 0x1234;
    sfv_send_wr* bad = nullptr;
    return sfv_post_send(qp, &wr, &bad);
  }

  // A send of `len` bytes from side 0's buffer at offset 0.
  int Send(sfv_qp* qp, uint64_t wr_id, uint32_t len, unsigned flags = 0,
           uint32_t lkey_override = 0) {
    sfv_sge sge{reinterpret_cast<uintptr_t>(s_[0].buf.data()), len,
                lkey_override != 0 ? lkey_override : s_[0].mr->lkey};
    sfv_send_wr wr = OneSgeWr(wr_id, SFV_WR_SEND, &sge);
    wr.send_flags = flags;
    sfv_send_wr* bad = nullptr;
    return sfv_post_send(qp, &wr, &bad);
  }
  // A receive of `len` bytes into side `side`'s buffer at `offset`.
  int Recv(sfv_qp* qp, int side, uint64_t wr_id, uint32_t offset,
           uint32_t len) {
    sfv_sge sge{reinterpret_cast<uintptr_t>(s_[side].buf.data() + offset), len,
                s_[side].mr->lkey};
    sfv_recv_wr wr;
    std::memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    sfv_recv_wr* bad = nullptr;
    return sfv_post_recv(qp, &wr, &bad);
  }

  // Runs the simulated fabric until it has nothing left (no-op on a device,
  // whose hardware runs by itself).
  void Drive() {
    if (fabric_ != nullptr) sfv_sim_run_until_idle(fabric_, 1u << 24);
  }
  // One completion from `cq`: 1, or 0 if none came (on the simulator: the
  // fabric ran out of events; on a device: kWaitMs passed).
  int PollOne(sfv_cq* cq, sfv_wc* wc) {
    const uint64_t deadline = NowMs() + kWaitMs;
    while (true) {
      const int n = sfv_poll_cq(cq, 1, wc);
      if (n != 0) return n;
      if (fabric_ != nullptr) {
        if (sfv_sim_run_until_idle(fabric_, 1) == 0) return 0;
      } else if (NowMs() > deadline) {
        return 0;
      }
    }
  }
  // True if `cq` stays empty: on the simulator once the fabric is idle, on a
  // device for `wait_ms`.
  bool StaysEmpty(sfv_cq* cq, uint64_t wait_ms) {
    sfv_wc wc;
    Drive();
    const uint64_t deadline = NowMs() + (fabric_ != nullptr ? 0 : wait_ms);
    do {
      if (sfv_poll_cq(cq, 1, &wc) != 0) return false;
    } while (NowMs() < deadline);
    return true;
  }
  // The next async event of side `side`'s context: 0, or -1 if none came
  // (on the simulator: the fabric ran out of events; on a device: wait_ms
  // passed).
  int WaitAsyncEvent(int side, sfv_async_event* ev,
                     uint64_t wait_ms = kWaitMs) {
    const uint64_t deadline = NowMs() + wait_ms;
    while (true) {
      if (sfv_get_async_event(s_[side].ctx, ev) == 0) return 0;
      if (errno != EAGAIN) return -1;
      if (fabric_ != nullptr) {
        if (sfv_sim_run_until_idle(fabric_, 1) == 0) return -1;
      } else if (NowMs() > deadline) {
        return -1;
      }
    }
  }

  sfv_sim_fabric* fabric_ = nullptr;
  sfv_device** list_ = nullptr;
  sfv_device* devices_[2] = {nullptr, nullptr};
  Side s_[2];
  Flavour flavour_ = Flavour::kSim;

 private:
  template <typename T>
  static void Erase(std::vector<T*>* list, T* object) {
    list->erase(std::remove(list->begin(), list->end(), object), list->end());
  }

  std::vector<sfv_qp*> qps_;
  std::vector<sfv_srq*> srqs_;
  std::vector<sfv_ah*> ahs_;
  std::vector<sfv_cq*> cqs_;
  std::vector<sfv_comp_channel*> channels_;
};

}  // namespace softfab::sfv_testing

#endif  // SOFTFAB_TESTS_SUPPORT_SFV_TEST_UTIL_H_
