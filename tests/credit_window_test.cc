// An endpoint's credit window must fit the device's shared receive queue.
// The bounce buffers are posted one window at a time, so a window deeper
// than the SRQ used to post none: every SEND met an empty SRQ and was
// answered with RNR NAKs for ever (found by the incast study scenario).
// Such a window is now refused when the endpoint is created, with a reason;
// a window exactly as deep as the SRQ works.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "backends/sim/sim_fabric.h"
#include "core/endpoint.h"
#include "tests/messaging_harness.h"

namespace softfab {
namespace {

TEST(CreditWindowTest, WindowDeeperThanTheSrqIsRefused) {
  sim::SimConfig config;
  config.nodes = 1;
  config.max_srq_wr = 64;
  auto fabric = sim::CreateSimFabric(config);
  ASSERT_NE(fabric, nullptr);
  auto pd = fabric->device(0)->AllocPd();
  ASSERT_TRUE(pd.ok());
  core::EndpointAttr attr;
  attr.credits = 65;
  auto ep = core::Endpoint::Create(fabric->device(0), *pd, attr);
  ASSERT_FALSE(ep.ok());
  EXPECT_EQ(ep.status().code(), EINVAL);
  EXPECT_NE(std::string(ep.status().message()).find("max_srq_wr"),
            std::string::npos)
      << ep.status().message();
}

TEST(CreditWindowTest, WindowAsDeepAsTheSrqCarriesMessages) {
  sim::SimConfig config;
  config.max_srq_wr = 64;
  core::EndpointAttr attr;
  attr.credits = 64;
  testing::Cluster c(2, config, attr);
  uint8_t out[64] = {7};
  uint8_t in[64] = {};
  iovec siov, riov;
  int sctx = 0, rctx = 0;
  ASSERT_TRUE(
      c[1].ep->Recv(testing::TRecv(in, sizeof in, 5, 0, &rctx, &riov)).ok());
  ASSERT_TRUE(
      c[0].ep
          ->Send(testing::TSend(out, sizeof out, c[0].addr[1], 5, &sctx, &siov))
          .ok());
  core::CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.len, sizeof out);
  EXPECT_EQ(in[0], 7);
}

}  // namespace
}  // namespace softfab
