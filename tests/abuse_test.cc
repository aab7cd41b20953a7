// Bounded memory under abuse (issue 13), on the simulator: a peer that
// ignores its credits beside an honest one, a flood of connection requests
// from 10,000 names in no address vector, and completion queues the
// application never reads. The misbehaving peer is a fuzz::RawPeer: softfab's
// protocol spoken by hand over raw verbs-shaped QPs.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/endpoint.h"
#include "core/wire.h"
#include "tests/messaging_harness.h"
#include "tests/support/raw_peer.h"

namespace softfab::testing {
namespace {

// Sends `count` copies of a tagged eager message nobody posted a receive for,
// without waiting for credits, letting the fabric run after each.
void Flood(sim::SimFabric& fabric, fuzz::RawPeer& peer, int count) {
  wire::Header h;
  h.op = wire::Op::kEager;
  h.flags = wire::kTagged;
  h.length = 512;
  h.tag = 0xBAD;
  wire::Encode(h, peer.buffer() + 4096);  // Past the credit word.
  for (int i = 0; i < count; ++i) {
    (void)peer.Send(4096, wire::kHeaderBytes + 512);
    fabric.RunUntilIdle();
    peer.PollSends();
  }
}

// A peer that ignores credits cannot make the receiver keep more than its
// bound (2 x credits messages per peer); the excess is dropped and counted,
// and the honest peer's messages on the same endpoint all arrive, intact.
TEST(AbuseTest, CreditIgnoringPeerBesideAnHonestOne) {
  core::EndpointAttr attr;
  attr.credits = 16;
  Cluster c(3, {}, attr);  // 0: honest sender, 1: receiver, 2: attacker.
  core::Endpoint* victim = c[1].ep.get();
  fuzz::RawPeer peer(c.fabric().device(2));
  ASSERT_TRUE(peer.ok());
  wire::CmMessage reply;
  ASSERT_TRUE(
      peer.Handshake(
              victim->name(), 16, [&] { victim->Progress(); }, 100, &reply)
          .ok());
  constexpr int kHonest = 200;
  std::vector<std::vector<uint8_t>> out(kHonest), in(kHonest);
  std::vector<iovec> siov(kHonest), riov(kHonest);
  for (int k = 0; k < kHonest; ++k) {
    out[k].assign(100 + k, static_cast<uint8_t>(k));
    in[k].assign(out[k].size(), 0);
    ASSERT_TRUE(victim
                    ->Recv(TRecv(in[k].data(), in[k].size(), 1000 + k, 0,
                                 &in[k], &riov[k]))
                    .ok());
  }
  int sent = 0, received = 0, accepted = 0;
  for (int round = 0; round < 100000 && received < kHonest; ++round) {
    if (accepted < kHonest &&
        c[0].ep
            ->Send(TSend(out[accepted].data(), out[accepted].size(),
                         c[0].addr[1], 1000 + accepted, &out[accepted],
                         &siov[accepted]))
            .ok()) {
      ++accepted;
    }
    if (round % 4 == 0) Flood(c.fabric(), peer, 5);
    core::CqEntry e;
    while (c[0].cq->Read(&e, 1) == 1) ++sent;
    while (c[1].cq->Read(&e, 1) == 1) ++received;
    ASSERT_LE(victim->stats().unexpected_held, 2u * attr.credits);
  }
  EXPECT_EQ(received, kHonest);
  for (int k = 0; k < kHonest; ++k) EXPECT_EQ(in[k], out[k]) << k;
  EXPECT_GT(victim->stats().overrun_dropped, 0u);
  EXPECT_EQ(victim->stats().unexpected_held, 2u * attr.credits);
}

// 10,000 connection requests from names in no address vector: the endpoint
// takes at most peers_max of them (each costs a peer entry and an RC QP; the
// receive buffers are capped apart from that), and then refuses new peers
// with ENOMEM, saying why.
TEST(AbuseTest, ConnectionRequestFloodStopsAtPeersMax) {
  core::EndpointAttr attr;
  attr.peers_max = 256;
  Cluster c(3, {}, attr);
  core::Endpoint* victim = c[1].ep.get();
  fuzz::RawPeer peer(c.fabric().device(2));
  ASSERT_TRUE(peer.ok());
  int replies = 0;
  for (uint32_t i = 0; i < 10000; ++i) {
    wire::CmMessage m = peer.Cm(wire::CmType::kRequest, i + 1, 64);
    m.from.lid = static_cast<uint16_t>(i + 1);  // 10,000 different names.
    uint8_t bytes[wire::kCmMaxBytes];
    wire::EncodeCm(m, bytes);
    ASSERT_TRUE(peer.SendCm(victim->name(), bytes, wire::CmSize(m)).ok());
    victim->Progress();
    wire::CmMessage answer;
    while (peer.ReceiveCm(&answer))
      replies += answer.type == wire::CmType::kReply;
  }
  for (int i = 0; i < 100; ++i) {
    victim->Progress();
    wire::CmMessage answer;
    while (peer.ReceiveCm(&answer))
      replies += answer.type == wire::CmType::kReply;
  }
  EXPECT_GT(replies, 0);
  EXPECT_LE(replies, static_cast<int>(attr.peers_max));
  // The table is full: a send to a peer it has not met yet says so.
  iovec iov;
  uint8_t byte = 1;
  const Status s =
      victim->Send(TSend(&byte, 1, c[1].addr[0], 1, nullptr, &iov));
  EXPECT_EQ(s.code(), ENOMEM) << s.message();
}

// A CQ the application never reads: posts fail with EAGAIN once every entry
// is written or promised, and nothing is lost or overwritten: each accepted
// operation's entry is there when the application reads at last.
TEST(AbuseTest, UnreadCqGivesEagainAndLosesNothing) {
  constexpr size_t kCq = 16;
  Cluster c(2, {}, {}, kCq);
  std::vector<uint8_t> payload(64, 7);
  std::vector<std::vector<uint8_t>> in(64, std::vector<uint8_t>(64));
  std::vector<iovec> siov(64), riov(64);
  int sends = 0, recvs = 0;
  Status last;
  for (int i = 0; i < 64; ++i) {
    last = c[1].ep->Recv(TRecv(in[i].data(), 64, 5, 0, &in[i], &riov[i]));
    if (!last.ok()) break;
    ++recvs;
  }
  EXPECT_EQ(last.code(), EAGAIN);
  EXPECT_EQ(recvs, static_cast<int>(kCq));
  for (int i = 0; i < 64; ++i) {
    last = c[0].ep->Send(
        TSend(payload.data(), 64, c[0].addr[1], 5, &siov[i], &siov[i]));
    if (!last.ok()) break;
    ++sends;
    for (int k = 0; k < 50; ++k) c.ProgressAll();  // Never read the CQs.
  }
  EXPECT_EQ(last.code(), EAGAIN);
  EXPECT_EQ(sends, static_cast<int>(kCq));
  for (int k = 0; k < 2000; ++k) c.ProgressAll();
  // Everything is there, once.
  core::CqEntry e[kCq + 1];
  EXPECT_EQ(c[0].cq->Read(e, kCq + 1), static_cast<int>(kCq));
  EXPECT_EQ(c[1].cq->Read(e, kCq + 1), static_cast<int>(kCq));
  for (int i = 0; i < recvs; ++i) EXPECT_EQ(in[i], payload) << i;
  EXPECT_EQ(c[0].cq->Read(e, 1), -EAGAIN);
  EXPECT_EQ(c[1].cq->Read(e, 1), -EAGAIN);
  // And the endpoints work on once read.
  EXPECT_TRUE(
      c[0].ep
          ->Send(TSend(payload.data(), 64, c[0].addr[1], 6, nullptr, &siov[0]))
          .ok());
}

}  // namespace
}  // namespace softfab::testing
