// Tests of UD (sim_wire.cc, sim_requester.cc) that only the simulator can
// run: buffers too small and an oversized send that moves the QP to SQE (the
// mlx5 personality's; rxe's, the default, are in sim_personality_test.cc), no
// retries and the Q_Key check under a drop, and duplicates (issue 3, item 5).
// The GRH with its poisoned first 20 bytes is checked in tests/transport/.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(UdTest, BufferTooSmallIsLocLenErr) {
  UdPair u(TwoNodes(7, DevicePersonality::kMlx5));
  tp::Sge rs = u.b.Sge(0, 40 + 99);
  ASSERT_TRUE(PostRecv(u.qb, 5, &rs, 1).ok());
  ASSERT_TRUE(u.Send(1, 100).ok());
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kLocLenErr);
  EXPECT_EQ(r[0].byte_len, 0u);
  EXPECT_EQ(u.b.buf[0], 0);  // nothing written
}

TEST(UdTest, UnreliableNoRetriesAndQkeyChecked) {
  SimConfig c = TwoNodes();
  PacketFault drop{PacketFaultKind::kDrop, 1.0};
  drop.count_max = 1;  // only the first packet
  c.faults.packet_faults.push_back(drop);
  UdPair u(c);
  for (int i = 0; i < 3; ++i) {
    tp::Sge rs = u.b.Sge(i * 256, 256);
    ASSERT_TRUE(PostRecv(u.qb, i, &rs, 1).ok());
  }
  ASSERT_TRUE(u.Send(1, 8).ok());          // dropped, never retried
  ASSERT_TRUE(u.Send(2, 8, 0x2222).ok());  // wrong Q_Key: discarded
  ASSERT_TRUE(u.Send(3, 8).ok());          // delivered
  auto s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 3u);
  for (auto& wc : s) EXPECT_EQ(wc.status, tp::WcStatus::kSuccess);
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 0u);
  EXPECT_EQ(u.f->stats().retransmits, 0u);
}

TEST(UdTest, DuplicatedDatagramsArriveTwice) {
  // UD has no sequence numbers: a duplicated packet is a second message.
  SimConfig c = TwoNodes();
  PacketFault dup{PacketFaultKind::kDuplicate, 1.0};
  dup.delay_ns = 500;
  c.faults.packet_faults.push_back(dup);
  UdPair u(c);
  for (int i = 0; i < 4; ++i) {
    tp::Sge rs = u.b.Sge(i * 256, 256);
    ASSERT_TRUE(PostRecv(u.qb, i, &rs, 1).ok());
  }
  std::memcpy(u.a.buf.data(), "twice", 5);
  ASSERT_TRUE(u.Send(1, 5).ok());
  // The payload left with the packet: reusing the buffer changes nothing.
  std::memset(u.a.buf.data(), 0, 5);
  auto r = Drain(u.f.get(), u.b.rcq);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(std::memcmp(&u.b.buf[40], "twice", 5), 0);
  EXPECT_EQ(std::memcmp(&u.b.buf[256 + 40], "twice", 5), 0);
}

TEST(UdTest, OversizedSendGoesToSqeAndRecovers) {
  SimConfig c = TwoNodes(7, DevicePersonality::kMlx5);
  c.active_mtu = tp::Mtu::k1024;
  UdPair u(c);
  ASSERT_TRUE(u.Send(1, 2000).ok());
  auto s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kLocLenErr);
  EXPECT_EQ(u.qa->state(), tp::QpState::kSqe);
  ASSERT_TRUE(u.Send(2, 8).ok());
  s = Drain(u.f.get(), u.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kWrFlushErr);
  tp::QpAttr a;
  a.qp_state = tp::QpState::kRts;
  ASSERT_TRUE(u.qa->Modify(a, tp::kQpState).ok());
  tp::Sge rs = u.b.Sge(0, 256);
  ASSERT_TRUE(PostRecv(u.qb, 9, &rs, 1).ok());
  ASSERT_TRUE(u.Send(3, 8).ok());
  EXPECT_EQ(Drain(u.f.get(), u.b.rcq).size(), 1u);
}

}  // namespace
}  // namespace softfab::sim::testing
