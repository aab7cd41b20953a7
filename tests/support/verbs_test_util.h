// Test helpers for the verbs backend's device tests: opening the device named
// by SOFTFAB_RXE_DEVICE (or the first one) or skipping with the reason,
// registered buffers, RC/UD queue pairs brought up on one device, and polling
// with a deadline (rxe under emulation is slow; every wait is bounded).
#ifndef SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_
#define SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sched.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/verbs/verbs_device.h"
#include "tests/support/qp_bringup.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs::testing {

namespace tp = ::softfab::transport;

inline uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Every wait in these tests gives up after this long.
inline constexpr uint64_t kWaitMs = 20'000;

// The device the tests use: SOFTFAB_RXE_DEVICE, or else the first one.
inline VerbsOptions TestOptions() {
  VerbsOptions o;
  if (const char* name = std::getenv("SOFTFAB_RXE_DEVICE")) {
    o.device_name = name;
  }
  return o;
}

// Retry and timer settings of an RC connection in the tests (the MTU, PSNs
// and READ limits are the fixture's: see ConnectRc).
using ::softfab::testing::RcParams;

// A fixture holding an opened device. Without one: skipped with the reason,
// unless SOFTFAB_RXE_DEVICE names a device, which must then open.
class VerbsTest : public ::testing::Test {
 public:
  void SetUp() override {
    std::string diag;
    auto dev = OpenVerbsDevice(TestOptions(), &diag);
    if (!dev.ok()) {
      if (std::getenv("SOFTFAB_RXE_DEVICE") != nullptr) {
        FAIL() << "SOFTFAB_RXE_DEVICE is set but did not open: "
               << dev.status().message() << ": " << diag;
      }
      GTEST_SKIP() << "no RDMA device to test on (" << dev.status().message()
                   << ": " << diag << ")";
    }
    device_ = std::move(*dev);
    auto pd = device_->AllocPd();
    ASSERT_TRUE(pd.ok()) << pd.status().message();
    pd_ = *pd;
    ASSERT_TRUE(device_->QueryPort(1, &port_).ok());
    ASSERT_TRUE(device_->QueryGid(1, 0, &gid_).ok());
  }

  // Soft-RoCE, whose answers differ from hardware in the README's quirks.
  bool IsRxe() const {
    tp::DeviceAttr attr;
    return device_->QueryDevice(&attr).ok() && attr.vendor_id == 0xffffff;
  }

  // A zeroed buffer registered with `access`; lives as long as the fixture.
  struct Buffer {
    std::vector<uint8_t> bytes;
    tp::MemoryRegion* mr = nullptr;
    uint64_t addr() const { return reinterpret_cast<uint64_t>(bytes.data()); }
    tp::Sge Sge(uint32_t offset, uint32_t length) const {
      return tp::Sge{addr() + offset, length, mr->lkey()};
    }
  };
  Buffer* Reg(size_t size, uint32_t access = tp::kAccessAll) {
    auto b = std::make_unique<Buffer>();
    b->bytes.assign(size, 0);
    auto mr = pd_->RegMr(b->bytes.data(), size, access);
    EXPECT_TRUE(mr.ok()) << mr.status().message();
    if (!mr.ok()) return nullptr;
    b->mr = *mr;
    buffers_.push_back(std::move(b));
    return buffers_.back().get();
  }

  tp::CompletionQueue* Cq(int32_t cqe = 64) {
    auto cq = device_->CreateCq(cqe);
    EXPECT_TRUE(cq.ok()) << cq.status().message();
    return cq.ok() ? *cq : nullptr;
  }

  tp::QueuePair* Qp(tp::QpType type, tp::CompletionQueue* cq,
                    tp::SharedReceiveQueue* srq = nullptr,
                    uint32_t inline_bytes = 0) {
    tp::QpInitAttr init;
    init.send_cq = cq;
    init.recv_cq = cq;
    init.srq = srq;
    init.qp_type = type;
    init.cap.max_send_wr = 16;
    init.cap.max_recv_wr = srq ? 0 : 16;
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = srq ? 0 : 2;
    init.cap.max_inline_data = inline_bytes;
    auto qp = pd_->CreateQp(init);
    EXPECT_TRUE(qp.ok()) << qp.status().message();
    return qp.ok() ? *qp : nullptr;
  }

  // The address of this device's own port (loopback).
  tp::AhAttr SelfAddress() const { return tp::SelfAddress(gid_, port_.lid); }

  // RESET -> INIT for an RC QP, remote reads and writes allowed.
  Status ToInit(tp::QueuePair* qp) {
    return ::softfab::testing::ToInit(qp, kRcAccess);
  }

  // RESET -> INIT -> RTR -> RTS towards `peer` on this device, at the port's
  // MTU with one READ outstanding each way; `params` gives retries and timers.
  void ConnectRc(tp::QueuePair* qp, const tp::QueuePair* peer,
                 const RcParams& params) {
    RcParams p = params;
    p.mtu = port_.active_mtu;
    p.Psn(0x100);
    p.max_rd_atomic = p.max_dest_rd_atomic = 1;
    p.access = kRcAccess;
    const Status s =
        ::softfab::testing::ConnectRc(qp, SelfAddress(), peer->qp_num(), p);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // An SRQ of `max_wr` one-SGE requests on the fixture's PD.
  tp::SharedReceiveQueue* Srq(uint32_t max_wr) {
    tp::SrqAttr sa;
    sa.max_wr = max_wr;
    sa.max_sge = 1;
    auto srq = pd_->CreateSrq(sa);
    EXPECT_TRUE(srq.ok()) << srq.status().message();
    return srq.ok() ? *srq : nullptr;
  }

  // An RDMA request at `offset` into `remote` (its rkey).
  static tp::SendWr Rdma(uint64_t wr_id, tp::WrOpcode opcode,
                         const Buffer& remote, uint32_t offset) {
    tp::SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = opcode;
    wr.rdma.remote_addr = remote.addr() + offset;
    wr.rdma.rkey = remote.mr->rkey();
    return wr;
  }

  // Two RC QPs on a new CQ, connected to each other (b on `srq_b` if given).
  // On failure the test has a fatal failure and the QPs may be null.
  struct RcLoop {
    tp::CompletionQueue* cq = nullptr;
    tp::QueuePair* a = nullptr;
    tp::QueuePair* b = nullptr;
  };
  RcLoop RcPair(const RcParams& params = {},
                tp::SharedReceiveQueue* srq_b = nullptr) {
    RcLoop l;
    l.cq = Cq();
    l.a = Qp(tp::QpType::kRc, l.cq);
    l.b = Qp(tp::QpType::kRc, l.cq, srq_b);
    if (l.a == nullptr || l.b == nullptr) {
      ADD_FAILURE() << "could not create the RC pair";
      return RcLoop{};
    }
    ConnectRc(l.a, l.b, params);
    ConnectRc(l.b, l.a, params);
    return l;
  }

  // RESET -> INIT -> RTR -> RTS for a UD QP.
  void BringUpUd(tp::QueuePair* qp, uint32_t qkey) {
    const Status s = ::softfab::testing::UdToRts(qp, qkey, /*sq_psn=*/0);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // Polls `cq` until `n` completions arrived or kWaitMs passed.
  std::vector<tp::WorkCompletion> PollN(tp::CompletionQueue* cq, int n) {
    std::vector<tp::WorkCompletion> out;
    const uint64_t deadline = NowMs() + kWaitMs;
    while (static_cast<int>(out.size()) < n && NowMs() < deadline) {
      tp::WorkCompletion wc[8];
      const int got = cq->Poll(8, wc);
      EXPECT_GE(got, 0);
      if (got < 0) break;
      out.insert(out.end(), wc, wc + got);
      if (got == 0) sched_yield();
    }
    return out;
  }

  // The completion for `wr_id` among `wcs`, or nullptr.
  static const tp::WorkCompletion* Find(
      const std::vector<tp::WorkCompletion>& wcs, uint64_t wr_id) {
    for (const tp::WorkCompletion& wc : wcs) {
      if (wc.wr_id == wr_id) return &wc;
    }
    return nullptr;
  }

  Status PostRecv(tp::QueuePair* qp, uint64_t wr_id, const tp::Sge& sge) {
    tp::RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const tp::RecvWr* bad = nullptr;
    return qp->PostRecv(&wr, &bad);
  }

  // A signaled plain SEND of `sge`.
  Status PostSend(tp::QueuePair* qp, uint64_t wr_id, const tp::Sge* sge) {
    tp::SendWr wr;
    wr.wr_id = wr_id;
    return PostSend(qp, wr, sge);
  }

  Status PostSend(tp::QueuePair* qp, tp::SendWr wr, const tp::Sge* sge) {
    wr.sg_list = sge;
    wr.num_sge = sge != nullptr ? 1 : 0;
    wr.send_flags |= tp::kSendSignaled;
    const tp::SendWr* bad = nullptr;
    return qp->PostSend(&wr, &bad);
  }

  // The remote access an RC QP of these tests grants.
  static constexpr uint32_t kRcAccess =
      tp::kAccessRemoteWrite | tp::kAccessRemoteRead;

  // Declared first so that the device (and its MRs) goes before the memory.
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::unique_ptr<VerbsDevice> device_;
  tp::ProtectionDomain* pd_ = nullptr;
  tp::PortAttr port_;
  tp::Gid gid_{};
};

}  // namespace softfab::verbs::testing

#endif  // SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_
