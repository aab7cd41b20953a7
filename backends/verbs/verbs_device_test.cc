// Device tests of what only the verbs backend has: opening and selection
// errors, queries through the port/GID mapping, the locked-memory warning,
// device teardown with live objects. They need a real device (rxe in the VM
// harness) and skip without one. Argument checks, EBUSY and the QP state rules
// every backend shares are in tests/transport/objects_conformance_test.cc.
#include "backends/verbs/verbs_device.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/verbs/internal/selection.h"
#include "tests/support/verbs_test_util.h"
#include "transport/transport.h"

namespace softfab::verbs::testing {
namespace {

// Runs without a device too: the answer is ENODEV either way, and the
// diagnostic names what was found (or says there is nothing).
TEST(OpenVerbsDevice, UnknownNameIsNoDeviceAndSaysWhatExists) {
  VerbsOptions o;
  o.device_name = "softfab_no_such_device";
  std::string diag;
  auto dev = OpenVerbsDevice(o, &diag);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), ENODEV);
  const bool listed = diag.find(
                          "no RDMA device named softfab_no_such_device; "
                          "found: ") != std::string::npos;
  const bool none = diag.find("no RDMA device") != std::string::npos &&
                    diag.find("rdma link add") != std::string::npos;
  EXPECT_TRUE(listed || none) << diag;
}

using DeviceTest = VerbsTest;

TEST_F(DeviceTest, QueriesAnswerForTheSelectedPortAndGid) {
  tp::DeviceAttr attr;
  ASSERT_TRUE(device_->QueryDevice(&attr).ok());
  EXPECT_EQ(attr.phys_port_cnt, 1);
  EXPECT_GT(attr.max_qp_wr, 0);
  EXPECT_GT(attr.max_inline_data, 0u);
  EXPECT_EQ(port_.state, tp::PortState::kActive);
  EXPECT_EQ(port_.gid_tbl_len, 1);
  EXPECT_EQ(port_.link_layer, device_->link_layer());
  tp::PortAttr other;
  EXPECT_EQ(device_->QueryPort(2, &other).code(), EINVAL);
  tp::Gid g;
  EXPECT_EQ(device_->QueryGid(1, 1, &g).code(), EINVAL);

  std::string diag;
  const std::vector<VerbsDeviceInfo> all = ListVerbsDevices(&diag);
  const VerbsGidInfo* selected = nullptr;
  for (const VerbsDeviceInfo& d : all) {
    if (d.name != device_->name()) continue;
    EXPECT_EQ(d.node_guid, attr.node_guid);
    for (const VerbsPortInfo& p : d.ports) {
      if (p.port_num != device_->physical_port()) continue;
      EXPECT_EQ(p.state, tp::PortState::kActive);
      std::printf("%s port %d active_mtu %u, GID table: %s\n", d.name.c_str(),
                  p.port_num, tp::MtuBytes(p.active_mtu),
                  internal::DescribeGids(p).c_str());
      for (const VerbsGidInfo& e : p.gids) {
        if (e.index == device_->gid_index()) selected = &e;
      }
    }
  }
  ASSERT_NE(selected, nullptr) << "the selected GID is not listed; " << diag;
  EXPECT_EQ(0, std::memcmp(selected->gid.raw, gid_.raw, 16))
      << FormatGid(selected->gid) << " vs " << FormatGid(gid_);
  if (device_->link_layer() == IBV_LINK_LAYER_ETHERNET) {
    EXPECT_EQ(selected->type, VerbsGidType::kRoceV2);
  }
  std::printf("device %s port %d gid %d %s (%s), max_inline_data %u\n",
              device_->name(), device_->physical_port(), device_->gid_index(),
              FormatGid(gid_).c_str(),
              selected->type == VerbsGidType::kRoceV2 ? "RoCEv2" : "other",
              attr.max_inline_data);
}

TEST_F(DeviceTest, BadGidIndexAndPortAreInvalidWithTheTable) {
  VerbsOptions o = TestOptions();
  o.device_name = device_->name();
  o.gid_index = 250;
  std::string diag;
  auto dev = OpenVerbsDevice(o, &diag);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), EINVAL);
  EXPECT_NE(diag.find("no valid GID at index 250; valid entries: "),
            std::string::npos)
      << diag;
  EXPECT_NE(diag.find(FormatGid(gid_)), std::string::npos) << diag;

  o.gid_index = -1;
  o.port = 9;
  dev = OpenVerbsDevice(o, &diag);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), EINVAL);
  EXPECT_NE(diag.find("no port 9"), std::string::npos) << diag;

  o.port = device_->physical_port();
  o.gid_index = device_->gid_index();
  dev = OpenVerbsDevice(o, &diag);
  ASSERT_TRUE(dev.ok()) << diag;
}

TEST_F(DeviceTest, OpeningWarnsAboutASmallLockedMemoryLimit) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 1u << 20;  // lowering the soft limit is always allowed
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &small), 0);
  VerbsOptions o = TestOptions();
  o.device_name = device_->name();
  std::string diag;
  auto dev = OpenVerbsDevice(o, &diag);
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &saved), 0);
  ASSERT_TRUE(dev.ok()) << diag;
  EXPECT_NE(diag.find("RLIMIT_MEMLOCK is 1024 KiB"), std::string::npos) << diag;
  EXPECT_NE(diag.find("ulimit -l unlimited"), std::string::npos) << diag;
}

TEST_F(DeviceTest, ClosingTheDeviceReleasesLiveObjects) {
  std::string diag;
  VerbsOptions o = TestOptions();
  o.device_name = device_->name();
  auto dev = OpenVerbsDevice(o, &diag);
  ASSERT_TRUE(dev.ok()) << diag;
  auto pd = (*dev)->AllocPd();
  ASSERT_TRUE(pd.ok());
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE((*pd)->RegMr(buf.data(), buf.size(), tp::kAccessAll).ok());
  auto ch = (*dev)->CreateCompChannel();
  ASSERT_TRUE(ch.ok());
  auto cq = (*dev)->CreateCqOnChannel(16, *ch);
  ASSERT_TRUE(cq.ok());
  tp::SrqAttr sa;
  sa.max_wr = 4;
  sa.max_sge = 1;
  auto srq = (*pd)->CreateSrq(sa);
  ASSERT_TRUE(srq.ok());
  tp::QpInitAttr init;
  init.send_cq = *cq;
  init.recv_cq = *cq;
  init.srq = *srq;
  init.cap.max_send_wr = 4;
  ASSERT_TRUE((*pd)->CreateQp(init).ok());
  ASSERT_TRUE((*pd)->CreateAh(SelfAddress()).ok());
  // Objects of one device are refused by another.
  init.send_cq = Cq();
  init.recv_cq = init.send_cq;
  init.srq = nullptr;
  init.cap.max_recv_wr = 4;
  EXPECT_EQ((*pd)->CreateQp(init).status().code(), EINVAL);
  EXPECT_EQ(device_->CreateCqOnChannel(4, *ch).status().code(), EINVAL);
  dev->reset();  // must release everything without error or leak
}

}  // namespace
}  // namespace softfab::verbs::testing
