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
//   together, one chain per poll batch, and every one of them goes back;
// - deferred (EndpointAttr::defer_reposts, a device's way), buffers go back
//   in chains across progress calls, one per credit write-back in a
//   ping-pong, and every one before its credit: senders that spend all
//   their credits at once never meet a missing buffer.
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

// Deferred reposts (a device's way; the simulator's runs keep posting at once
// for their digests): the buffers go back in one chain per credit write-back
// (a quarter of the grant), not one post per message, and each before the
// credit that lets the peer fill it again.
TEST(ReceiveBuffersTest, DeferredRepostsGoBackInChainsBeforeTheirCredits) {
  core::EndpointAttr attr;
  attr.credits = 16;  // write-backs of 4
  attr.defer_reposts = true;
  Cluster c(2, {}, attr);
  // Four messages: their credits are written back, so all the buffers are
  // on the shared receive queue.
  for (int i = 0; i < 4; ++i) ExpectDelivered(c, 1, 0, 8);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const uint32_t posted = PostedBuffers(c, 0);
  ASSERT_GT(posted, 0u);
  const uint64_t naks_before = c.fabric().stats().rnr_naks;
  constexpr int kSize = 64;
  std::vector<uint8_t> in(kSize);
  iovec siov, riov;
  // One message at a time: its buffer goes back with three others.
  constexpr int kOneByOne = 400;
  const uint64_t calls = SrqPostCalls(c, 0);
  for (int i = 0; i < kOneByOne; ++i) {
    const std::vector<uint8_t> out = Pattern(kSize, i);
    ASSERT_TRUE(c[0].ep
                    ->Recv(TRecv(in.data(), kSize, static_cast<uint64_t>(i), 0,
                                 nullptr, &riov))
                    .ok());
    ASSERT_TRUE(c[1].ep
                    ->Send(TSend(out.data(), kSize, c[1].addr[0],
                                 static_cast<uint64_t>(i), nullptr, &siov))
                    .ok())
        << i;
    // A buffer waits for it (else an RNR wait, here for ever).
    ASSERT_GT(PostedBuffers(c, 0), 0u) << i;
    core::CqEntry e;
    ASSERT_EQ(c.ReadOne(0, &e, 2000), 1) << "message " << i;
    ASSERT_EQ(c.ReadOne(1, &e, 2000), 1) << "send " << i;
    ASSERT_EQ(in, out) << i;
    ASSERT_EQ(c.fabric().stats().rnr_naks, naks_before) << i;
    // Never more off the shared receive queue than one write-back's worth.
    ASSERT_GT(PostedBuffers(c, 0) + 4, posted) << i;
  }
  EXPECT_LE(SrqPostCalls(c, 0) - calls, uint64_t{kOneByOne / 4 + 1});
  // Bursts: the sender spends every credit it has at once, while the
  // receiver does not poll; its buffers must all be there.
  std::vector<std::vector<uint8_t>> payload(64);
  std::vector<iovec> iov(payload.size());
  for (int round = 0; round < 40; ++round) {
    size_t sent = 0;
    while (sent < payload.size()) {
      payload[sent] = Pattern(kSize, round * 64 + static_cast<int>(sent));
      if (!c[1].ep
               ->Send(TSend(payload[sent].data(), kSize, c[1].addr[0], 5,
                            nullptr, &iov[sent]))
               .ok()) {
        break;
      }
      ++sent;
    }
    ASSERT_GE(sent, 4u) << round;
    // Nothing ran yet: a buffer waits for every message spent.
    ASSERT_GE(PostedBuffers(c, 0), sent) << round;
    for (int r = 0; r < 2000; ++r) c[1].ep->Progress();
    ASSERT_EQ(c.fabric().stats().rnr_naks, naks_before) << "round " << round;
    for (size_t n = 0; n < sent; ++n) {
      ASSERT_TRUE(
          c[0].ep->Recv(TRecv(in.data(), kSize, 5, 0, nullptr, &riov)).ok());
      core::CqEntry e;
      ASSERT_EQ(c.ReadOne(0, &e), 1) << "round " << round << " message " << n;
      ASSERT_EQ(in, payload[n]) << "round " << round << " message " << n;
    }
    core::CqEntry e;
    while (c[1].cq->Read(&e, 1) == 1) {
    }
  }
  EXPECT_EQ(c.fabric().stats().rnr_naks, naks_before);
  EXPECT_GT(PostedBuffers(c, 0) + 4, posted);
  EXPECT_LE(PostedBuffers(c, 0), posted);
}

// Write-backs rarer than a chain is long (a grant of 256 writes back every
// 64): the chain goes when full, 32 buffers at a time.
TEST(ReceiveBuffersTest, ADeferredChainGoesWhenFull) {
  core::EndpointAttr attr;
  attr.credits = 256;
  attr.defer_reposts = true;
  Cluster c(2, {}, attr);
  ExpectDelivered(c, 1, 0, 8);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const uint32_t posted = PostedBuffers(c, 0);  // all but that one's
  ASSERT_GT(posted, 0u);
  const uint64_t calls = SrqPostCalls(c, 0);
  constexpr int kMessages = 200;
  std::vector<uint8_t> in(8);
  iovec siov, riov;
  for (int i = 0; i < kMessages; ++i) {
    const std::vector<uint8_t> out = Pattern(8, i);
    ASSERT_TRUE(c[0].ep->Recv(TRecv(in.data(), 8, 1, 0, nullptr, &riov)).ok());
    ASSERT_TRUE(
        c[1].ep->Send(TSend(out.data(), 8, c[1].addr[0], 1, nullptr, &siov))
            .ok());
    core::CqEntry e;
    ASSERT_EQ(c.ReadOne(0, &e), 1) << "message " << i;
    ASSERT_EQ(c.ReadOne(1, &e), 1) << "send " << i;
    ASSERT_EQ(in, out) << i;
    ASSERT_GT(PostedBuffers(c, 0) + 32, posted) << i;
  }
  // 201 buffers freed: a chain of 32 at a time (a write-back posts one too).
  EXPECT_LE(SrqPostCalls(c, 0) - calls, uint64_t{kMessages / 32 + 2});
  EXPECT_GT(SrqPostCalls(c, 0) - calls, uint64_t{kMessages / 64});
}

}  // namespace
}  // namespace softfab::testing
