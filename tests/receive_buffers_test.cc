// The receive buffers an endpoint shares among its peers (one shared receive
// queue) and the credits it grants them (core/wireup.cc GrantFor), on the
// simulator:
// - the credits granted never exceed the buffers: 32 peers that each send
//   as much as their credits allow, at once, into a receiver that does not
//   poll, meet no RNR NAK (every peer was granted 64 credits while buffers
//   stopped at 16 windows: the SRQ ran dry);
// - a buffer flushed by a QP that failed while a message arrived into it is
//   put back on the shared receive queue (it was dropped: the pool shrank by
//   one with every such failure);
// - the buffers of a batch of arrivals go back to the shared receive queue
//   together, one chain per poll batch, and every one of them goes back.
// A device's deferred reposts: core/deferred_reposts_test.cc.
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>
#include <vector>

#include "backends/sim/internal/device.h"
#include "backends/sim/internal/qp.h"
#include "backends/sim/internal/srq.h"
#include "backends/sim/sim_fabric.h"
#include "core/endpoint.h"
#include "tests/messaging_harness.h"
#include "tests/test_pattern.h"

namespace softfab::testing {
namespace {

// The receiver's shared receive queue on the simulated device: buffers
// posted there now.
uint32_t PostedBuffers(Cluster& c, int node) {
  auto* dev = static_cast<sim::internal::DeviceImpl*>(c.fabric().device(node));
  uint32_t n = 0;
  for (const auto& srq : dev->srqs_) {
    if (srq != nullptr) n += srq->ring_.count();
  }
  return n;
}

// Calls to post receives to the receiver's shared receive queues so far.
uint64_t SrqPostCalls(Cluster& c, int node) {
  auto* dev = static_cast<sim::internal::DeviceImpl*>(c.fabric().device(node));
  uint64_t n = 0;
  for (const auto& srq : dev->srqs_) {
    if (srq != nullptr) n += srq->post_calls_;
  }
  return n;
}

TEST(ReceiveBuffersTest, CreditsNeverExceedTheBuffersWhateverThePeers) {
  constexpr int kSenders = 32;
  constexpr size_t kSize = 2048;
  Cluster c(kSenders + 1);
  for (int i = 1; i <= kSenders; ++i) ExpectDelivered(c, i, 0, 8);  // connected
  for (int r = 0; r < 1000; ++r) c.ProgressAll();  // credits written back
  EXPECT_EQ(c[0].ep->stats().grants, static_cast<uint64_t>(kSenders));
  EXPECT_GT(c[0].ep->stats().grants_reduced, 0u);
  // Every sender sends what its credits allow, at once; the receiver does
  // not poll meanwhile, so nothing it holds is posted again.
  const uint64_t naks_before = c.fabric().stats().rnr_naks;
  std::vector<std::vector<uint8_t>> payload(kSenders + 1);
  std::vector<iovec> iov(kSenders + 1);
  std::vector<int> sent(kSenders + 1, 0);
  int total = 0;
  for (int i = 1; i <= kSenders; ++i) {
    payload[i] = Pattern(kSize, i);
    while (c[i].ep
               ->Send(TSend(payload[i].data(), kSize, c[i].addr[0],
                            static_cast<uint64_t>(i), nullptr, &iov[i]))
               .ok()) {
      ++sent[i];
      ++total;
    }
  }
  EXPECT_GT(total, 1024);  // more than 16 full windows
  for (int r = 0; r < 20000 && c.fabric().stats().rnr_naks == naks_before;
       ++r) {
    for (int i = 1; i <= kSenders; ++i) c[i].ep->Progress();
  }
  ASSERT_EQ(c.fabric().stats().rnr_naks, naks_before);
  // Then every message arrives whole, in order per sender.
  std::vector<uint8_t> in(kSize);
  std::vector<int> got(kSenders + 1, 0);
  iovec riov;
  for (int n = 0; n < total; ++n) {
    ASSERT_TRUE(
        c[0].ep->Recv(TRecv(in.data(), kSize, 0, ~uint64_t{0}, nullptr, &riov))
            .ok());
    core::CqEntry e;
    ASSERT_EQ(c.ReadOne(0, &e), 1) << "message " << n;
    ASSERT_GE(e.tag, 1u);
    ASSERT_LE(e.tag, static_cast<uint64_t>(kSenders));
    ++got[e.tag];
    EXPECT_EQ(in, payload[e.tag]);
  }
  for (int i = 1; i <= kSenders; ++i) EXPECT_EQ(got[i], sent[i]) << i;
}

TEST(ReceiveBuffersTest, ABufferAFailingQpFlushedIsPostedAgain) {
  sim::SimConfig config;
  // 1 Gb/s, 1024-byte packets: a 6 KiB message arrives over tens of us.
  config.default_link.bandwidth_bps = 1'000'000'000ull;
  config.active_mtu = transport::Mtu::k1024;
  config.default_link.mtu = transport::Mtu::k1024;
  Cluster c(2, config);
  ExpectDelivered(c, 1, 0, 8);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const uint32_t posted = PostedBuffers(c, 0);
  ASSERT_GT(posted, 0u);
  // A message of several packets; stop while it is arriving.
  const std::vector<uint8_t> out = Pattern(6000, 3);
  iovec siov;
  ASSERT_TRUE(
      c[1].ep
          ->Send(TSend(out.data(), out.size(), c[1].addr[0], 7, nullptr, &siov))
          .ok());
  auto* dev = static_cast<sim::internal::DeviceImpl*>(c.fabric().device(0));
  sim::internal::QpImpl* rc = nullptr;
  // One event at a time (a poll may run many).
  for (int r = 0; r < 100000 && rc == nullptr && c.fabric().Step(); ++r) {
    for (auto& qp : dev->qps_) {
      if (qp != nullptr && qp->resp_.recv_active) rc = qp.get();
    }
  }
  ASSERT_NE(rc, nullptr) << "the message never started arriving";
  EXPECT_EQ(PostedBuffers(c, 0), posted - 1);  // one taken, mid-message
  rc->ToError();  // the QP fails (a QP_FATAL, as the fault plan's kQpError)
  for (int r = 0; r < 1000; ++r) c[0].ep->Progress();
  EXPECT_EQ(c[0].ep->stats().bounce_flushed, 1u);
  EXPECT_EQ(PostedBuffers(c, 0), posted);
}

TEST(ReceiveBuffersTest, ABatchOfArrivalsGoesBackInOneChain) {
  constexpr int kMessages = 40;  // more than one poll batch (32)
  Cluster c(2);
  ExpectDelivered(c, 1, 0, 8);  // connected
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const uint32_t posted = PostedBuffers(c, 0);
  ASSERT_GE(posted, static_cast<uint32_t>(kMessages));
  // They all arrive while the receiver does not poll.
  std::vector<std::vector<uint8_t>> out(kMessages);
  std::vector<iovec> siov(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    out[i] = Pattern(64, i);
    ASSERT_TRUE(c[1].ep
                    ->Send(TSend(out[i].data(), out[i].size(), c[1].addr[0],
                                 static_cast<uint64_t>(i), nullptr, &siov[i]))
                    .ok())
        << i;
  }
  for (int r = 0; r < 20000 && PostedBuffers(c, 0) > posted - kMessages; ++r) {
    c[1].ep->Progress();
  }
  ASSERT_EQ(PostedBuffers(c, 0), posted - kMessages);
  // One progress takes them (as unexpected: no receive is posted) and posts
  // every buffer back, a poll batch at a time: two posts to the SRQ (32
  // buffers, then 8), not 40.
  const uint64_t chains = c[0].ep->stats().repost_chains;
  const uint64_t calls = SrqPostCalls(c, 0);
  c[0].ep->Progress();
  EXPECT_EQ(PostedBuffers(c, 0), posted);
  EXPECT_EQ(SrqPostCalls(c, 0), calls + 2);
  EXPECT_EQ(c[0].ep->stats().repost_chains, chains + 2);
  // Each arrived once, whole, and the buffers carry messages again.
  std::vector<uint8_t> in(64);
  iovec riov;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(c[0].ep
                    ->Recv(TRecv(in.data(), in.size(), static_cast<uint64_t>(i),
                                 0, nullptr, &riov))
                    .ok());
    core::CqEntry e;
    ASSERT_EQ(c.ReadOne(0, &e), 1) << "message " << i;
    EXPECT_EQ(e.tag, static_cast<uint64_t>(i));
    EXPECT_EQ(in, out[i]) << i;
  }
  core::CqEntry e;
  EXPECT_EQ(c[0].cq->Read(&e, 1), -EAGAIN);  // no message twice
  ExpectDelivered(c, 1, 0, 8);
  EXPECT_EQ(PostedBuffers(c, 0), posted);
}

}  // namespace
}  // namespace softfab::testing
