// Scenario 10: messaging under a fault plan on the simulator. 1% of packets
// dropped, 1% duplicated, 2% held back (reordered), on every packet, the
// connection manager's datagrams included. Over 20 seeds every message must
// arrive exactly once with the right bytes, and every send must complete.
//
// A failure names its seed; SOFTFAB_FAULT_SEED=<n> (via --test_env) runs it
// alone.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/event_queue.h"
#include "tests/exactly_once_traffic.h"
#include "tests/messaging_harness.h"

namespace softfab::testing {
namespace {

sim::SimConfig FaultyConfig(uint64_t seed) {
  return PacketFaultConfig(seed, 0.01, 0.01, 0.02);
}

// Sets *digest to the fabric's digest at the end.
void RunSeed(uint64_t seed, uint64_t* digest) {
  SCOPED_TRACE("seed " + std::to_string(seed) +
               "; replay: bazel test //tests:fault_test "
               "--test_env=SOFTFAB_FAULT_SEED=" +
               std::to_string(seed));
  Cluster c(3, FaultyConfig(seed));
  // Nodes 0 and 2 each send 100 messages to node 1.
  ASSERT_EQ(RunExactlyOnceTraffic(c, seed, 100), "");
  const sim::SimStats st = c.fabric().stats();
  EXPECT_GT(st.packets_dropped, 0u) << "the fault plan dropped nothing";
  *digest = c.fabric().digest();
  ::testing::Test::RecordProperty("retransmits_seed_" + std::to_string(seed),
                                  std::to_string(st.retransmits));
  ::testing::Test::RecordProperty("digest_rdm_seed_" + std::to_string(seed),
                                  std::to_string(*digest));
}

class FaultTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FaultTest, EveryMessageExactlyOnceWithItsBytes) {
  const char* env = std::getenv("SOFTFAB_FAULT_SEED");
  uint64_t digest = 0;
  RunSeed(env ? std::strtoull(env, nullptr, 10) : GetParam(), &digest);
}

// The whole stack (core over the simulator, faults included) replays bit for
// bit: the same seed gives the same digest, other seeds give other digests.
TEST(FaultReplayTest, SameSeedSameDigestOtherSeedOtherDigest) {
  uint64_t a = 0, b = 0, other = 0;
  RunSeed(5, &a);
  RunSeed(5, &b);
  RunSeed(6, &other);
  EXPECT_NE(a, 0u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
}

INSTANTIATE_TEST_SUITE_P(TwentySeeds, FaultTest,
                         ::testing::Range<uint64_t>(1, 21));

// FI_EP_MSG under the same fault plan: the connection handshake (request,
// pending, reply, established), both directions of traffic and the shutdown
// handshake all survive lost, duplicated and reordered packets.
class MsgFaultTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(MsgFaultTest, ConnectTransferShutdown) {
  const char* env = std::getenv("SOFTFAB_FAULT_SEED");
  const uint64_t seed = env ? std::strtoull(env, nullptr, 10) : GetParam();
  SCOPED_TRACE("seed " + std::to_string(seed) +
               "; replay: bazel test //tests:fault_test "
               "--test_filter='*MsgFault*' --test_env=SOFTFAB_FAULT_SEED=" +
               std::to_string(seed));
  // Seeds above 100: no loss but 30% of packets duplicated, which stresses
  // the duplicate handling of every CM message.
  const bool heavy_dup = seed > 100;
  sim::SimConfig config = FaultyConfig(seed);
  if (heavy_dup) {
    sim::PacketFault dup;
    dup.kind = sim::PacketFaultKind::kDuplicate;
    dup.probability = 0.3;
    dup.delay_ns = 700;
    config.faults.packet_faults = {dup};
  }
  config.nodes = 2;
  auto fabric = sim::CreateSimFabric(config);
  ASSERT_NE(fabric, nullptr);
  transport::ProtectionDomain* pd[2];
  for (int i = 0; i < 2; ++i) {
    auto made = fabric->device(i)->AllocPd();
    ASSERT_TRUE(made.ok());
    pd[i] = *made;
  }
  core::EventQueue eq[2] = {core::EventQueue(64), core::EventQueue(64)};
  core::CompletionQueue cq[2] = {core::CompletionQueue(4096),
                                 core::CompletionQueue(4096)};
  std::unique_ptr<core::Endpoint> ep[2];
  auto listener = core::Endpoint::CreateListener(fabric->device(0), pd[0]);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE((*listener)->BindEq(&eq[0]).ok());
  ASSERT_TRUE((*listener)->Listen().ok());
  core::EndpointAttr attr;
  attr.type = core::EndpointType::kMsg;
  auto make = [&](int i) {
    auto made = core::Endpoint::Create(fabric->device(i), pd[i], attr);
    ASSERT_TRUE(made.ok());
    ep[i] = std::move(*made);
    ASSERT_TRUE(ep[i]->BindCq(&cq[i], core::kSend | core::kRecv).ok());
    ASSERT_TRUE(ep[i]->BindEq(&eq[i]).ok());
    ASSERT_TRUE(ep[i]->Enable().ok());
  };
  make(1);
  ASSERT_TRUE(ep[1]->Connect((*listener)->name(), "hi", 2).ok());
  // Waits for the next event at node i, driving both nodes.
  auto next_event = [&](int i) -> core::EqEvent {
    for (int r = 0; r < 200000; ++r) {
      auto e = eq[i].Read(false);
      if (e.ok()) return **e;
      EXPECT_EQ(e.status().code(), EAGAIN) << "error event at node " << i;
      if (e.status().code() != EAGAIN) break;
      for (int n = 0; n < 2; ++n) cq[n].Progress();
    }
    ADD_FAILURE() << "no event at node " << i;
    return core::EqEvent{};
  };
  const core::EqEvent req = next_event(0);
  ASSERT_EQ(req.type, core::kEqConnReq);
  ASSERT_NE(req.info, nullptr);
  make(0);
  ASSERT_TRUE(ep[0]->Accept(*req.info, "ok", 2).ok());
  const core::EqEvent c1 = next_event(1);
  ASSERT_EQ(c1.type, core::kEqConnected);
  ASSERT_EQ(std::string(c1.data.begin(), c1.data.end()), "ok");
  ASSERT_EQ(next_event(0).type, core::kEqConnected);

  // 100 messages each way, eager and rendezvous sizes.
  constexpr int kEach = 100;
  const size_t sizes[] = {8, 0, 1500, 20000, 64};
  struct Message {
    std::vector<uint8_t> out, in;
    iovec siov, riov;
    int received = 0, sent = 0;
  };
  std::vector<Message> msgs(2 * kEach);
  for (int k = 0; k < 2 * kEach; ++k) {
    Message& m = msgs[k];
    m.out = Bytes(sizes[k % 5], seed * 1000 + k);
    m.in.assign(m.out.size() + 4, 0xEE);
    const int to = k < kEach ? 1 : 0;
    ASSERT_TRUE(
        ep[to]->Recv(TRecv(m.in.data(), m.out.size(), k, 0, &m, &m.riov)).ok());
  }
  int got = 0, sent = 0;
  auto drain = [&]() {
    for (int n = 0; n < 2; ++n) {
      core::CqEntry e;
      const int r = cq[n].Read(&e, 1);
      if (r == 1) {
        auto* m = static_cast<Message*>(e.op_context);
        if (e.flags & core::kRecv) {
          ++m->received;
          ++got;
        } else {
          ++m->sent;
          ++sent;
        }
      } else if (r == -core::CompletionQueue::kErrAvail) {
        core::CqErrEntry x;
        ASSERT_TRUE(cq[n].ReadError(&x).ok());
        FAIL() << "error completion at node " << n << ": " << x.err;
      }
    }
  };
  for (int k = 0; k < 2 * kEach; ++k) {
    Message& m = msgs[k];
    const int from = k < kEach ? 0 : 1;
    Status st;
    for (int tries = 0; tries < 100000; ++tries) {
      st = ep[from]->Send(TSend(m.out.data(), m.out.size(), 0, k, &m, &m.siov));
      if (st.code() != EAGAIN) break;
      drain();
    }
    ASSERT_TRUE(st.ok()) << st.message();
  }
  for (int r = 0; r < 3000000 && (got < 2 * kEach || sent < 2 * kEach); ++r) {
    drain();
  }
  ASSERT_EQ(got, 2 * kEach);
  ASSERT_EQ(sent, 2 * kEach);
  for (const Message& m : msgs) {
    ASSERT_EQ(m.received, 1);
    ASSERT_EQ(m.sent, 1);
    if (!m.out.empty()) {
      ASSERT_EQ(std::memcmp(m.in.data(), m.out.data(), m.out.size()), 0);
    }
    for (size_t b = m.out.size(); b < m.in.size(); ++b) {
      ASSERT_EQ(m.in[b], 0xEE);
    }
  }
  // Shutdown reaches the peer even when datagrams are lost.
  ASSERT_TRUE(ep[1]->Shutdown().ok());
  const core::EqEvent down = next_event(0);
  EXPECT_EQ(down.type, core::kEqShutdown);
  EXPECT_EQ(
      ep[1]
          ->Send(TSend(msgs[0].out.data(), 8, 0, 1, nullptr, &msgs[0].siov))
          .code(),
      EHOSTUNREACH);
  // Both sides settle: the disconnect handshake ends and no CM traffic goes
  // on (an answer to an answer would bounce forever).
  for (int r = 0; r < 20000; ++r) {
    for (int n = 0; n < 2; ++n) cq[n].Progress();
  }
  const uint64_t sent_before = fabric->stats().packets_sent;
  for (int r = 0; r < 20000; ++r) {
    for (int n = 0; n < 2; ++n) cq[n].Progress();
  }
  EXPECT_EQ(fabric->stats().packets_sent, sent_before)
      << "traffic after shutdown settled; events pending "
      << fabric->pending_events();
  EXPECT_TRUE(eq[1].empty());
  if (!heavy_dup) EXPECT_GT(fabric->stats().packets_dropped, 0u);
  ::testing::Test::RecordProperty("digest_msg_seed_" + std::to_string(seed),
                                  std::to_string(fabric->digest()));
  // Endpoints go before the listener and the queues they are bound to.
  ep[0].reset();
  ep[1].reset();
}

INSTANTIATE_TEST_SUITE_P(TwentySeeds, MsgFaultTest,
                         ::testing::Range<uint64_t>(1, 21));
INSTANTIATE_TEST_SUITE_P(HeavyDuplication, MsgFaultTest,
                         ::testing::Range<uint64_t>(101, 111));

}  // namespace
}  // namespace softfab::testing
