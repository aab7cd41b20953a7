// Rendezvous READs at the core, on the simulator (issue 11.1): a receive with
// more iovecs than the device takes SGEs in one work request is read with
// several RDMA READs, each from where the previous one's bytes end in the
// sender's buffer (simulated devices whose max_sge is 1, 2 and 3; real ones
// report 30 or more, so only the simulator reaches this path).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "tests/messaging_harness.h"
#include "tests/test_pattern.h"

namespace softfab::testing {
namespace {

class ReadSplitTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(ReadSplitTest, EveryIovecGetsItsPart) {
  sim::SimConfig config;
  config.max_sge = GetParam();
  Cluster c(2, config);
  const std::vector<uint8_t> msg = Pattern(50000, 3);
  // Four iovecs of uneven sizes, the last one larger than what is left.
  const size_t lens[core::Endpoint::kIovMax] = {33, 7000, 1, 60000};
  std::vector<uint8_t> in(33 + 7000 + 1 + 60000, 0xEE);
  iovec riov[core::Endpoint::kIovMax];
  size_t at = 0;
  for (size_t i = 0; i < core::Endpoint::kIovMax; ++i) {
    riov[i] = iovec{in.data() + at, lens[i]};
    at += lens[i];
  }
  core::RecvArgs r;
  r.iov = riov;
  r.iov_count = core::Endpoint::kIovMax;
  r.tag = 5;
  r.tagged = true;
  int rctx = 0;
  r.context = &rctx;
  ASSERT_TRUE(c[1].ep->Recv(r).ok());
  iovec siov;
  ASSERT_TRUE(
      c[0].ep
          ->Send(TSend(msg.data(), msg.size(), c[0].addr[1], 5, &rctx, &siov))
          .ok());
  core::CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1) << "max_sge " << GetParam();
  EXPECT_EQ(e.len, msg.size());
  EXPECT_EQ(std::memcmp(in.data(), msg.data(), msg.size()), 0);
  EXPECT_EQ(in[msg.size()], 0xEE);  // Nothing past the message.
  ASSERT_EQ(c.ReadOne(0, &e), 1);
}

INSTANTIATE_TEST_SUITE_P(MaxSge, ReadSplitTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace softfab::testing
