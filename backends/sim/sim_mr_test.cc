// Tests of SGE rules and memory protection (sim_pd_mr.cc): length 0 = 2^31,
// num_sge 0, too many SGEs, a full send queue, deregistered lkeys,
// remote accesses outside a region or without access rights (issue 3, items 6
// and 10).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/sim_test_util.h"
#include "transport/transport.h"

namespace softfab::sim::testing {
namespace {

TEST(SgeTest, ZeroLengthMeansTwoToTheThirtyOne) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  // A region that claims 2^31 bytes (only the first few are ever touched).
  tp::MemoryRegion* big =
      Must(b.pd->RegMr(b.buf.data(), 1ull << 31, tp::kAccessAll));
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge rs{reinterpret_cast<uint64_t>(b.buf.data()), 0, big->lkey()};
  ASSERT_TRUE(PostRecv(qb, 1, &rs, 1).ok());
  // With the small MR, a length-0 SGE (2^31 bytes) is outside it: local
  // protection error.
  tp::Sge bad = b.Sge(0, 0);
  ASSERT_TRUE(PostRecv(qb, 2, &bad, 1).ok());
  tp::Sge ss = a.Sge(0, 100);
  a.buf[99] = 0x77;
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1).ok());
  ASSERT_TRUE(PostSend(qa, 2, &ss, 1).ok());
  auto r = Drain(f.get(), b.rcq);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].byte_len, 100u);
  EXPECT_EQ(b.buf[99], 0x77);
  EXPECT_EQ(r[1].status, tp::WcStatus::kLocProtErr);
  // An inline send with a length-0 SGE asks for 2^31 bytes inline: EINVAL.
  tp::Sge z = a.Sge(0, 0);
  EXPECT_EQ(PostSend(qa, 3, &z, 1, tp::WrOpcode::kSend, tp::kSendInline).code(),
            EINVAL);
}

TEST(SgeTest, NumSgeZeroIsAZeroLengthMessage) {
  RcPair p(TwoNodes());
  ASSERT_TRUE(PostRecv(p.qb, 1, nullptr, 0).ok());
  ASSERT_TRUE(PostSend(p.qa, 1, nullptr, 0).ok());
  auto r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(r[0].byte_len, 0u);
  // A receive with no SGEs also takes a zero-length message but not a 1-byte
  // one (which fails as a receive too small does: LOC_QP_OP_ERR on the
  // default, rxe, personality).
  ASSERT_TRUE(PostRecv(p.qb, 2, nullptr, 0).ok());
  tp::Sge ss = p.a.Sge(0, 1);
  ASSERT_TRUE(PostSend(p.qa, 2, &ss, 1).ok());
  r = Drain(p.f.get(), p.b.rcq);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, tp::WcStatus::kLocQpOpErr);
}

TEST(SgeTest, TooManySgesAndBadWrList) {
  RcPair p(TwoNodes());
  tp::Sge five[5] = {p.a.Sge(0, 1), p.a.Sge(1, 1), p.a.Sge(2, 1), p.a.Sge(3, 1),
                     p.a.Sge(4, 1)};
  tp::SendWr w[3];
  for (int i = 0; i < 3; ++i) {
    w[i].wr_id = i;
    w[i].sg_list = five;
    w[i].num_sge = i == 1 ? 5 : 1;  // max_send_sge is 4
    w[i].next = i < 2 ? &w[i + 1] : nullptr;
  }
  const tp::SendWr* bad = nullptr;
  tp::Sge rs = p.b.Sge(0, 64);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(PostRecv(p.qb, i, &rs, 1).ok());
  EXPECT_EQ(p.qa->PostSend(&w[0], &bad).code(), EINVAL);
  EXPECT_EQ(bad, &w[1]);
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);  // only the first was posted
  EXPECT_EQ(s[0].wr_id, 0u);
  tp::Sge rsv[5] = {rs, rs, rs, rs, rs};
  const tp::RecvWr* rbad = nullptr;
  tp::RecvWr rw;
  rw.sg_list = rsv;
  rw.num_sge = 5;
  EXPECT_EQ(p.qb->PostRecv(&rw, &rbad).code(), EINVAL);
  EXPECT_EQ(rbad, &rw);
  // Unknown send flag and opcode.
  EXPECT_EQ(PostSend(p.qa, 9, five, 1, tp::WrOpcode::kSend, 1u << 7).code(),
            EINVAL);
  EXPECT_EQ(PostSend(p.qa, 9, five, 1, static_cast<tp::WrOpcode>(9)).code(),
            EINVAL);
}

TEST(SgeTest, SendQueueFullIsEnomem) {
  RcPair p(TwoNodes(), RcParams{}, 4);
  tp::Sge ss = p.a.Sge(0, 8);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(PostSend(p.qa, i, &ss, 1).ok());
  EXPECT_EQ(PostSend(p.qa, 4, &ss, 1).code(), ENOMEM);
}

TEST(MrTest, BadLocalSgeCompletesInOrderAfterEarlierWork) {
  SimConfig c = TwoNodes();
  c.faults.packet_faults.push_back(PacketFault{PacketFaultKind::kDrop, 0.3});
  RcParams prm;
  prm.timeout = 8;
  RcPair p(c, prm);
  tp::Sge rd = p.a.Sge(0, 6000);
  tp::Sge out = p.a.Sge(p.a.buf.size() - 100, 200);  // runs past the MR
  ASSERT_TRUE(PostSend(p.qa, 1, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr(), p.b.mr->rkey())
                  .ok());
  ASSERT_TRUE(PostSend(p.qa, 2, &out, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr(), p.b.mr->rkey())
                  .ok());
  ASSERT_TRUE(PostSend(p.qa, 3, &rd, 1, tp::WrOpcode::kRdmaRead, 0,
                       p.b.mr->addr(), p.b.mr->rkey())
                  .ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  EXPECT_EQ(s[1].status, tp::WcStatus::kLocProtErr);
  EXPECT_EQ(s[2].status, tp::WcStatus::kWrFlushErr);
}

TEST(MrTest, DeregisteredRegionIsRefused) {
  RcPair p(TwoNodes());
  std::vector<uint8_t> other(64, 1);
  tp::MemoryRegion* mr = Must(p.b.pd->RegMr(other.data(), 64, tp::kAccessAll));
  const uint32_t rkey = mr->rkey();
  ASSERT_TRUE(mr->Destroy().ok());
  tp::Sge ss = p.a.Sge(0, 8);
  ASSERT_TRUE(PostSend(p.qa, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0,
                       reinterpret_cast<uint64_t>(other.data()), rkey)
                  .ok());
  auto s = Drain(p.f.get(), p.a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kRemAccessErr);
  EXPECT_EQ(other, std::vector<uint8_t>(64, 1));
}

TEST(MrTest, RemoteAccessOutsideRegionChangesNoByte) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  // Node 1 exposes only [1024, 2048) of its 4096-byte buffer, plus a read-only
  // region.
  std::vector<uint8_t> host(4096, 0xee);
  tp::MemoryRegion* win = Must(b.pd->RegMr(
      host.data() + 1024, 1024,
      tp::kAccessLocalWrite | tp::kAccessRemoteWrite | tp::kAccessRemoteRead));
  tp::MemoryRegion* ro =
      Must(b.pd->RegMr(host.data() + 3072, 512, tp::kAccessLocalWrite));
  const std::vector<uint8_t> before = host;
  struct Case {
    tp::WrOpcode op;
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
  };
  const uint64_t base = reinterpret_cast<uint64_t>(host.data());
  const Case cases[] = {
      {tp::WrOpcode::kRdmaWrite, base + 2040, win->rkey(),
       16},  // crosses the end
      {tp::WrOpcode::kRdmaWrite, base + 1000, win->rkey(),
       32},  // starts before
      {tp::WrOpcode::kRdmaWrite, base + 1024, win->lkey(),
       8},  // lkey is not an rkey
      {tp::WrOpcode::kRdmaWrite, base + 3072, ro->rkey(),
       8},                                                    // no REMOTE_WRITE
      {tp::WrOpcode::kRdmaRead, base + 3072, ro->rkey(), 8},  // no REMOTE_READ
      {tp::WrOpcode::kRdmaWriteWithImm, base + 2047, win->rkey(), 2},
  };
  for (const Case& k : cases) {
    tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
    tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
    Connect(qa, 0, qb, 1);
    tp::Sge rs = b.Sge(0, 64);
    ASSERT_TRUE(PostRecv(qb, 1, &rs, 1).ok());
    std::memset(a.buf.data(), 0x11, 64);
    tp::Sge ss = a.Sge(0, k.len);
    ASSERT_TRUE(PostSend(qa, 1, &ss, 1, k.op, 0, k.addr, k.rkey, 5).ok());
    auto s = Drain(f.get(), a.scq);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, tp::WcStatus::kRemAccessErr);
    EXPECT_EQ(qa->state(), tp::QpState::kError);
    EXPECT_EQ(host, before);  // not one byte changed
    Drain(f.get(), b.rcq);
  }
  // A legal write changes exactly its bytes.
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  Connect(qa, 0, qb, 1);
  tp::Sge ss = a.Sge(0, 16);
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0, base + 2032,
                       win->rkey())
                  .ok());
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kSuccess);
  for (size_t i = 0; i < host.size(); ++i) {
    const bool inside = i >= 2032 && i < 2048;
    ASSERT_EQ(host[i], inside ? 0x11 : 0xee) << i;
  }
}

TEST(MrTest, QpWithoutRemoteWriteAccessRefuses) {
  auto f = CreateSimFabric(TwoNodes());
  Endpoint a = MakeEndpoint(f.get(), 0), b = MakeEndpoint(f.get(), 1);
  tp::QueuePair* qa = Must(a.pd->CreateQp(RcInit(a)));
  tp::QueuePair* qb = Must(b.pd->CreateQp(RcInit(b)));
  ASSERT_TRUE(ToInit(qa).ok());
  ASSERT_TRUE(ToInit(qb, tp::kAccessLocalWrite).ok());  // no remote access
  ASSERT_TRUE(ToRtr(qa, 1, qb->qp_num()).ok());
  ASSERT_TRUE(ToRtr(qb, 0, qa->qp_num()).ok());
  ASSERT_TRUE(ToRts(qa).ok());
  ASSERT_TRUE(ToRts(qb).ok());
  tp::Sge ss = a.Sge(0, 8);
  ASSERT_TRUE(PostSend(qa, 1, &ss, 1, tp::WrOpcode::kRdmaWrite, 0, b.mr->addr(),
                       b.mr->rkey())
                  .ok());
  auto s = Drain(f.get(), a.scq);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, tp::WcStatus::kRemAccessErr);
}

}  // namespace
}  // namespace softfab::sim::testing
