// Test helpers for the verbs backend's own tests (device selection, queries
// through the port/GID mapping, teardown): the device named by
// SOFTFAB_RXE_DEVICE (or the first one) opened, or the test skipped with the
// reason. What every backend must do, on the data path and the control path,
// is checked by tests/transport/ on the simulator and on a device.
#ifndef SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_
#define SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "backends/verbs/verbs_device.h"
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
    ASSERT_TRUE(device_->QueryPort(1, &port_).ok());
    ASSERT_TRUE(device_->QueryGid(1, 0, &gid_).ok());
  }

  tp::CompletionQueue* Cq(int32_t cqe = 64) {
    auto cq = device_->CreateCq(cqe);
    EXPECT_TRUE(cq.ok()) << cq.status().message();
    return cq.ok() ? *cq : nullptr;
  }

  // The address of this device's own port (loopback).
  tp::AhAttr SelfAddress() const { return tp::SelfAddress(gid_, port_.lid); }

  std::unique_ptr<VerbsDevice> device_;
  tp::PortAttr port_;
  tp::Gid gid_{};
};

}  // namespace softfab::verbs::testing

#endif  // SOFTFAB_TESTS_SUPPORT_VERBS_TEST_UTIL_H_
