// Rendezvous READs at the core, on the simulator:
// - issue 11.1: a receive with more iovecs than the device takes SGEs in one
//   work request is read with several RDMA READs, each from where the
//   previous one's bytes end in the sender's buffer (simulated devices whose
//   max_sge is 1, 2 and 3; real ones report 30 or more, so only the simulator
//   reaches this path);
// - READs that wait for send queue room when their connection fails fail
//   with it, once each, and the peer can be connected anew.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/sim/internal/device.h"
#include "backends/sim/internal/qp.h"
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

// READs that wait for send queue room (four work requests each on a device
// of one SGE, three fit a queue of 12) when their connection fails: each
// fails once, its receive with an error entry, and the peer can be
// connected anew. They stayed queued: their receives never completed, and
// the connection was never made again (CanReconnect waited for them).
TEST(ReadsWaitingTest, ReadsWaitingForRoomFailWithTheirConnection) {
  sim::SimConfig config;
  config.max_sge = 1;
  core::EndpointAttr attr;
  attr.credits = 4;  // a send queue of 4 + 8 control work requests
  Cluster c(2, config, attr);
  ExpectDelivered(c, 0, 1, 8);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  // Rendezvous messages kept as unexpected at node 1.
  constexpr int kMessages = 6;
  const std::vector<uint8_t> msg = Pattern(16384, 4);
  iovec siov[kMessages];
  for (int i = 0; i < kMessages; ++i) {
    bool sent = false;
    for (int r = 0; r < 1000 && !sent; ++r) {
      sent = c[0].ep
                 ->Send(TSend(msg.data(), msg.size(), c[0].addr[1], 5, nullptr,
                              &siov[i]))
                 .ok();
      c.ProgressAll();
    }
    ASSERT_TRUE(sent) << i;
  }
  for (int r = 0; r < 1000; ++r) c[1].ep->Progress();
  // A send of node 1's first on the connection: flushed first when it
  // fails, it fails the connection while READs still wait.
  const uint64_t first = 3;
  iovec fiov;
  ASSERT_TRUE(
      c[1].ep
          ->Send(TSend(&first, sizeof first, c[1].addr[0], 8, nullptr, &fiov))
          .ok());
  // Each receive takes one at once: four READs of one SGE each, two fit
  // beside that send, the rest wait for room.
  std::vector<uint8_t> in(kMessages * msg.size());
  iovec riov[kMessages][core::Endpoint::kIovMax];
  int ctx[kMessages];
  for (int i = 0; i < kMessages; ++i) {
    for (size_t k = 0; k < core::Endpoint::kIovMax; ++k) {
      riov[i][k] = iovec{in.data() + i * msg.size() + k * (msg.size() / 4),
                         msg.size() / 4};
    }
    core::RecvArgs a;
    a.iov = riov[i];
    a.iov_count = core::Endpoint::kIovMax;
    a.tag = 5;
    a.tagged = true;
    a.context = &ctx[i];
    ASSERT_TRUE(c[1].ep->Recv(a).ok()) << i;
  }
  // Node 1's connection fails (its RC QP in error, as a QP_FATAL would).
  auto* dev = static_cast<sim::internal::DeviceImpl*>(c.fabric().device(1));
  sim::internal::QpImpl* rc = nullptr;
  for (auto& qp : dev->qps_) {
    if (qp != nullptr && qp->init_.qp_type == transport::QpType::kRc) {
      rc = qp.get();
    }
  }
  ASSERT_NE(rc, nullptr);
  // The send and two READs (four work requests each) fill the queue of 12:
  // the other READs wait for room.
  ASSERT_EQ(rc->sq_.tail - rc->sq_.head, 1u + 2 * 4);
  rc->ToError();
  // Every receive completes once, the ones whose READs never went out too.
  std::vector<int> done(kMessages, 0);
  int entries = 0;
  for (int r = 0; r < 100000 && entries < kMessages + 1; ++r) {
    c[1].ep->Progress();
    core::CqEntry e;
    int n = c[1].cq->Read(&e, 1);
    if (n == -core::CompletionQueue::kErrAvail) {
      core::CqErrEntry x;
      ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
      // A receive fails with its connection; the send fails too.
      EXPECT_EQ(x.err, EIO);
      e.op_context = x.op_context;
      n = 1;
    }
    if (n != 1) continue;
    ++entries;
    for (int i = 0; i < kMessages; ++i) done[i] += e.op_context == &ctx[i];
  }
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(done[i], 1) << i;
  EXPECT_EQ(entries, kMessages + 1);  // and the send's
  // And node 1 makes the connection anew: its next send is taken, or waits
  // for the new connection's credits; it is not refused as unreachable (it
  // was, for ever, while the READs stayed queued).
  const uint64_t v = 11;
  iovec viov;
  const Status sent =
      c[1].ep->Send(TSend(&v, sizeof v, c[1].addr[0], 9, nullptr, &viov));
  EXPECT_TRUE(sent.ok() || sent.code() == EAGAIN) << sent.message();
}

}  // namespace
}  // namespace softfab::testing
