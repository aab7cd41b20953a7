// Test helpers for the verbs backend's control-path tests: opening the device
// named by SOFTFAB_RXE_DEVICE (or the first one) or skipping with the reason,
// registered buffers, CQs, QPs and SRQs on its PD. The data path, which needs
// connected QPs, is checked on every backend by tests/transport/.
#ifndef SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_
#define SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_

#include <gtest/gtest.h>

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

// The device the tests use: SOFTFAB_RXE_DEVICE, or else the first one.
inline VerbsOptions TestOptions() {
  VerbsOptions o;
  if (const char* name = std::getenv("SOFTFAB_RXE_DEVICE")) {
    o.device_name = name;
  }
  return o;
}

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

  // An SRQ of `max_wr` one-SGE requests on the fixture's PD.
  tp::SharedReceiveQueue* Srq(uint32_t max_wr) {
    tp::SrqAttr sa;
    sa.max_wr = max_wr;
    sa.max_sge = 1;
    auto srq = pd_->CreateSrq(sa);
    EXPECT_TRUE(srq.ok()) << srq.status().message();
    return srq.ok() ? *srq : nullptr;
  }

  Status PostRecv(tp::QueuePair* qp, uint64_t wr_id, const tp::Sge& sge) {
    tp::RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const tp::RecvWr* bad = nullptr;
    return qp->PostRecv(&wr, &bad);
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
