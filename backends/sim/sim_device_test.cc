// Tests of the simulated fabric's configuration and device: config validation,
// device and port queries and limits, MR registration checks, and refcounted
// destruction (Destroy is EBUSY while an object is in use).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(SimConfigTest, RejectsBadConfigs) {
  SimConfig c = TwoNodes();
  EXPECT_TRUE(ValidateSimConfig(c).ok());
  c.nodes = 0;
  EXPECT_EQ(ValidateSimConfig(c).code(), EINVAL);
  EXPECT_EQ(CreateSimFabric(c), nullptr);
  c = TwoNodes();
  c.links.push_back(SimLinkConfig{0, 5});
  EXPECT_EQ(ValidateSimConfig(c).code(), EINVAL);
  c = TwoNodes();
  c.faults.packet_faults.push_back(PacketFault{});
  c.faults.packet_faults.back().probability = 1.5;
  EXPECT_EQ(ValidateSimConfig(c).code(), EINVAL);
}

TEST(SimDeviceTest, QueriesAndLimits) {
  auto f = CreateSimFabric(TwoNodes());
  ASSERT_EQ(f->num_devices(), 2);
  EXPECT_EQ(f->device(2), nullptr);
  tp::DeviceAttr da;
  ASSERT_TRUE(f->device(0)->QueryDevice(&da).ok());
  EXPECT_EQ(da.max_qp_wr, 16384);
  EXPECT_EQ(da.phys_port_cnt, 1);
  tp::PortAttr pa;
  EXPECT_EQ(f->device(1)->QueryPort(2, &pa).code(), EINVAL);
  ASSERT_TRUE(f->device(1)->QueryPort(1, &pa).ok());
  EXPECT_EQ(pa.lid, 2);
  EXPECT_EQ(pa.state, tp::PortState::kActive);
  tp::Gid g;
  ASSERT_TRUE(f->device(1)->QueryGid(1, 0, &g).ok());
  EXPECT_EQ(g.raw[10], 0xff);
  EXPECT_EQ(g.raw[15], 1);
  EXPECT_EQ(f->device(0)->CreateCq(0).status().code(), EINVAL);
  EXPECT_EQ(f->device(0)->CreateCq(da.max_cqe + 1).status().code(), EINVAL);
}

TEST(SimDeviceTest, RegMrValidatesAndDestroyIsRefcounted) {
  auto f = CreateSimFabric(TwoNodes());
  tp::ProtectionDomain* pd = Must(f->device(0)->AllocPd());
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(pd->RegMr(nullptr, 64, 0).status().code(), EINVAL);
  EXPECT_EQ(pd->RegMr(buf.data(), 0, 0).status().code(), EINVAL);
  EXPECT_EQ(pd->RegMr(buf.data(), 64, 1u << 9).status().code(), EINVAL);
  EXPECT_EQ(pd->RegMr(buf.data(), 64, tp::kAccessRemoteWrite).status().code(),
            EINVAL);
  tp::MemoryRegion* mr = Must(pd->RegMr(buf.data(), 64, tp::kAccessLocalWrite));
  EXPECT_EQ(mr->addr(), reinterpret_cast<uint64_t>(buf.data()));
  EXPECT_NE(mr->lkey(), mr->rkey());
  EXPECT_EQ(pd->Destroy().code(), EBUSY);
  ASSERT_TRUE(mr->Destroy().ok());
  EXPECT_TRUE(pd->Destroy().ok());
}

TEST(DestroyTest, BusyWhileReferenced) {
  RcPair p(TwoNodes());
  EXPECT_EQ(p.a.scq->Destroy().code(), EBUSY);
  EXPECT_EQ(p.a.pd->Destroy().code(), EBUSY);
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1).ok());
  ASSERT_TRUE(p.qa->Destroy().ok());
  p.f->RunUntilIdle();  // in-flight packets for the gone QP are dropped
                        // harmlessly
  EXPECT_TRUE(p.a.scq->Destroy().ok());
}

}  // namespace
}  // namespace softfab::sim::testing
