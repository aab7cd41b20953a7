// Transport conformance, UD: a datagram lands after the 40-byte GRH area with
// its immediate data and source QP, and one with a wrong Q_Key is dropped
// silently (the sender still completes). Per backend (see
// transport_fixture.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "tests/transport/transport_fixture.h"

namespace softfab::transport_testing {
namespace {

using UdConformance = TransportTest;

TEST_P(UdConformance, DatagramArrivesAfterTheGrhAndAWrongQkeyIsDropped) {
  tp::QueuePair* qa = UdQp(0);
  tp::QueuePair* qb = UdQp(1);
  ASSERT_NE(qa, nullptr);
  ASSERT_NE(qb, nullptr);
  tp::AddressHandle* ah = Must(s_[0].pd->CreateAh(Address(1)));
  ASSERT_NE(ah, nullptr);
  Side& a = s_[0];
  Side& b = s_[1];
  for (int i = 0; i < 200; ++i) a.buf[i] = static_cast<uint8_t>(i + 1);
  tp::Sge rs = b.Sge(0, 40 + 512);
  ASSERT_TRUE(PostRecv(qb, 30, &rs, 1).ok());
  const tp::Sge ss = a.Sge(0, 200);
  ASSERT_TRUE(PostUdSend(qa, 31, ss, ah, qb->qp_num(),
                         ::softfab::testing::kTestQkey, 0x0badf00d)
                  .ok());
  auto r = PollN(b.rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].wr_id, 30u);
  EXPECT_EQ(r[0].byte_len, 40u + 200u);
  EXPECT_EQ(r[0].wc_flags & tp::kWcGrh, tp::kWcGrh);
  EXPECT_EQ(r[0].wc_flags & tp::kWcWithImm, tp::kWcWithImm);
  EXPECT_EQ(r[0].imm_data, 0x0badf00du);
  EXPECT_EQ(r[0].src_qp, qa->qp_num());
  EXPECT_EQ(std::memcmp(&b.buf[40], a.buf.data(), 200), 0);
  if (sim()) {
    // What the GRH area holds is the device's choice; the simulator's: the
    // first 20 bytes poisoned, then the IPv4 header from node 0 to node 1.
    for (int i = 0; i < 20; ++i) EXPECT_EQ(b.buf[i], 0xa5) << i;
    EXPECT_EQ(b.buf[20], 0x45);
    EXPECT_EQ(b.buf[20 + 12], 10);  // source 10.0.0.0
    EXPECT_EQ(b.buf[20 + 19], 1);   // destination 10.0.0.1
  } else {
    std::printf("GRH area as received:");
    for (int i = 0; i < 40; ++i) std::printf(" %02x", b.buf[i]);
    std::printf("\n");
  }
  EXPECT_EQ(PollN(a.scq, 1).size(), 1u);
  // A wrong Q_Key is dropped silently: the sender completes, nothing arrives.
  ASSERT_TRUE(PostRecv(qb, 32, &rs, 1).ok());
  ASSERT_TRUE(
      PostUdSend(qa, 33, ss, ah, qb->qp_num(), 0x9999, 0x0badf00d).ok());
  auto s = PollN(a.scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 33u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_TRUE(IsEmpty(b.rcq));
}

// The AH's GRH traffic class is the datagram's IP TOS byte (RoCEv2), which a
// RoCE device shows in the receiver's GRH area: the class softfab's paths
// travel in (a fabric's traffic_class) reaches the wire.
TEST_P(UdConformance, TheTrafficClassIsTheIpHeadersTos) {
  tp::QueuePair* qa = UdQp(0);
  tp::QueuePair* qb = UdQp(1);
  ASSERT_NE(qa, nullptr);
  ASSERT_NE(qb, nullptr);
  tp::AhAttr address = Address(1);
  ASSERT_EQ(address.is_global, 1);
  address.grh.traffic_class = 26 << 2;  // DSCP 26
  tp::AddressHandle* ah = Must(s_[0].pd->CreateAh(address));
  ASSERT_NE(ah, nullptr);
  Side& a = s_[0];
  Side& b = s_[1];
  tp::Sge rs = b.Sge(0, 40 + 64);
  ASSERT_TRUE(PostRecv(qb, 40, &rs, 1).ok());
  const tp::Sge ss = a.Sge(0, 64);
  ASSERT_TRUE(
      PostUdSend(qa, 41, ss, ah, qb->qp_num(), ::softfab::testing::kTestQkey, 0)
          .ok());
  auto r = PollN(b.rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].status, tp::WcStatus::kSuccess);
  ASSERT_EQ(r[0].wc_flags & tp::kWcGrh, tp::kWcGrh);
  // RoCEv2 over IPv4: the IPv4 header in the last 20 bytes of the area.
  EXPECT_EQ(b.buf[20], 0x45);
  EXPECT_EQ(b.buf[21], 26 << 2);
  EXPECT_EQ(PollN(a.scq, 1).size(), 1u);
}

SOFTFAB_INSTANTIATE_PER_TRANSPORT(UdConformance);

}  // namespace
}  // namespace softfab::transport_testing
