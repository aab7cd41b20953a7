// What two endpoints agree on when they connect, and the CM format that
// carries it (core/wire.h, core/cm_channel.cc, core/wireup.cc), on the
// simulator:
// - the path MTU is the smaller of the two ports' (a port of 1024 bytes and
//   one of 4096: every message size arrives; taken from the local port alone,
//   the 4096-byte packets were dropped by the smaller port until the QP
//   failed);
// - READs in flight per connection are both devices' limits (16 on the
//   simulator), not one: a stream of rendezvous messages to one peer takes
//   its wire time, not a round trip per message;
// - a CM datagram of another version of the format is answered with
//   kVersionRefused and changes nothing; a peer that refuses our version
//   fails the connection with SF_PROV_CM_VERSION;
// - a CM send slot is not written again before its send completes.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "backends/sim/internal/device.h"
#include "backends/sim/sim_fabric.h"
#include "core/cm_channel.h"
#include "core/endpoint.h"
#include "core/prov_errno.h"
#include "core/wire.h"
#include "tests/messaging_harness.h"
#include "tests/support/raw_peer.h"
#include "tests/test_pattern.h"

namespace softfab::testing {
namespace {

namespace tp = ::softfab::transport;

TEST(ConnectionSetupTest, PortsOfDifferentMtusConnectAtTheSmaller) {
  for (const bool small_first : {false, true}) {
    SCOPED_TRACE(small_first ? "1024-byte port connects" : "4096 connects");
    sim::SimConfig config;
    config.port_mtu = {tp::Mtu::k4096, tp::Mtu::k1024};
    if (small_first) config.port_mtu = {tp::Mtu::k1024, tp::Mtu::k4096};
    core::EndpointAttr attr;
    attr.rc_timeout = 8;  // a failure shows in ~10 ms of virtual time
    Cluster c(2, config, attr);
    for (const size_t size :
         {size_t{8}, size_t{3000}, size_t{8192}, size_t{64 * 1024}}) {
      ExpectDelivered(c, 0, 1, size);
      ExpectDelivered(c, 1, 0, size);
    }
  }
}

// Virtual time a stream of `count` rendezvous messages of `size` bytes to
// one peer takes on a 100 Gb/s link with 10 us of latency each way, from the
// first send to the last packet.
uint64_t StreamTime(int count, size_t size) {
  sim::SimConfig config;
  config.default_link.latency_ns = 10'000;
  config.default_link.bandwidth_bps = 100'000'000'000;
  config.trace_capacity = 1 << 16;
  Cluster c(2, config);
  ExpectDelivered(c, 0, 1, 8);  // connected before the clock starts
  const uint64_t start = c.fabric().device(0)->clock().NowNs();
  std::vector<std::vector<uint8_t>> out(count, Pattern(size, 5));
  std::vector<std::vector<uint8_t>> in(count, std::vector<uint8_t>(size));
  std::vector<iovec> riov(count), siov(count);
  for (int k = 0; k < count; ++k) {
    EXPECT_TRUE(
        c[1].ep->Recv(TRecv(in[k].data(), size, 100 + k, 0, nullptr, &riov[k]))
            .ok());
  }
  for (int k = 0; k < count; ++k) {
    EXPECT_TRUE(c[0].ep
                    ->Send(TSend(out[k].data(), size, c[0].addr[1], 100 + k,
                                 nullptr, &siov[k]))
                    .ok());
  }
  core::CqEntry e;
  for (int k = 0; k < count; ++k) EXPECT_EQ(c.ReadOne(1, &e), 1) << k;
  for (int k = 0; k < count; ++k) EXPECT_EQ(in[k], out[k]) << k;
  // The clock runs on past the last packet while the test reads (an empty
  // poll runs the events there are, a retransmission timer among them): the
  // stream ends with the last packet that arrived.
  uint64_t last = start;
  for (const sim::TraceRecord& r : c.fabric().Trace()) {
    if (r.kind == sim::TraceKind::kPacketArrive) last = r.time_ns;
  }
  return last - start;
}

TEST(ConnectionSetupTest, RendezvousReadsToOnePeerOverlap) {
  constexpr int kCount = 8;
  constexpr size_t kSize = 1 << 20;
  const uint64_t t = StreamTime(kCount, kSize);
  // 1 MiB is 84 us on the wire; one READ at a time costs a 20 us round trip
  // more per message (8 x 104 us); overlapped, the wire time and a few round
  // trips.
  const uint64_t wire_ns = kSize * 8 * 1'000'000'000ull / 100'000'000'000ull;
  EXPECT_LT(t, kCount * wire_ns + 4 * 20'000) << t;
}

// The initial PSN of the first connection of a two-node fabric with seed
// `seed`: the PSN of the first RC SEND that arrives.
uint32_t FirstPsn(uint64_t seed) {
  sim::SimConfig config;
  config.master_seed = seed;
  config.trace_capacity = 1 << 12;
  Cluster c(2, config);
  ExpectDelivered(c, 0, 1, 8);
  for (const sim::TraceRecord& r : c.fabric().Trace()) {
    if (r.kind == sim::TraceKind::kPacketArrive && r.opcode == 0 /* SEND */) {
      return r.psn;
    }
  }
  ADD_FAILURE() << "no RC SEND arrived";
  return 0;
}

// Initial PSNs are drawn from the simulator's seed: the same seed gives the
// same PSN (a replay is exact), other seeds give others (they were fixed,
// 0x2000 for every first connection).
TEST(ConnectionSetupTest, InitialPsnsComeFromTheSeed) {
  EXPECT_EQ(FirstPsn(1), FirstPsn(1));
  std::set<uint32_t> psns;
  for (uint64_t seed = 1; seed <= 8; ++seed) psns.insert(FirstPsn(seed));
  EXPECT_EQ(psns.size(), 8u);
}

// The bytes of an mlx5 send queue (rdma-core's mlx5_calc_sq_size): the next
// power of two of depth x WQE size, a WQE holding the 16-byte control
// segment, a 16-byte remote-address segment and the inline data with its
// 4-byte header rounded up to 16, in 64-byte basic blocks.
uint64_t Mlx5SendQueueBytes(uint32_t depth, uint32_t inline_bytes) {
  const uint64_t inline_seg = (4 + inline_bytes + 15) / 16 * 16;
  const uint64_t wqe = (16 + 16 + inline_seg + 63) / 64 * 64;
  uint64_t bytes = 1;
  while (bytes < depth * wqe) bytes *= 2;
  return bytes;
}

// Memory per peer: the RC QP a connection makes asks for the send queue its
// posts can fill and no more: the sends its credits allow plus 8 for
// control messages (64 + 8 = 72 entries by default), 32 KiB on mlx5 with
// the inline data softfab uses on a device (304 bytes), so 1,000 peers take
// 32 MiB. It asked for tx_size + 264 = 520 entries (256 KiB), then tx_size +
// 8 = 264 (128 KiB).
TEST(ConnectionSetupTest, APeersSendQueueIsWhatItsPostsCanFill) {
  sim::SimConfig config;
  config.trace_capacity = 1 << 10;
  Cluster c(2, config);
  ExpectDelivered(c, 0, 1, 8);
  uint32_t rc_qpn = 0;
  for (const sim::TraceRecord& r : c.fabric().Trace()) {
    if (r.kind == sim::TraceKind::kPacketArrive && r.opcode == 0 /* SEND */) {
      rc_qpn = r.qp_num;  // the receiver's RC QP
    }
  }
  ASSERT_NE(rc_qpn, 0u);
  auto* dev = static_cast<sim::internal::DeviceImpl*>(c.fabric().device(1));
  const sim::internal::QpImpl* qp = dev->QpByNum(rc_qpn);
  ASSERT_NE(qp, nullptr);
  const uint32_t depth = qp->attr_.cap.max_send_wr;
  EXPECT_EQ(depth,
            core::EndpointAttr{}.credits + core::Endpoint::kQpControlSends);
  EXPECT_EQ(Mlx5SendQueueBytes(depth, 304), 32u * 1024);
  EXPECT_LE(1000 * Mlx5SendQueueBytes(depth, 304), 64u << 20);
  EXPECT_EQ(Mlx5SendQueueBytes(264, 304), 128u * 1024);  // the model, before
  EXPECT_EQ(Mlx5SendQueueBytes(520, 304), 256u * 1024);
}

// The smaller send queue still takes every send the credits allow: a burst
// of as many sends to one peer as it grants credits, half of them
// rendezvous (whose READs and acks the control entries carry), is accepted
// without a pause, the next one waits for credits, and all arrive whole.
TEST(ConnectionSetupTest, EveryCreditedSendFitsThePeersSendQueue) {
  Cluster c(2);
  const uint32_t credits = core::EndpointAttr{}.credits;
  // Connected, and a batch of credits (a quarter) consumed and written back:
  // all of them are ours again.
  for (uint32_t i = 0; i < credits / 4; ++i) ExpectDelivered(c, 0, 1, 8);
  for (int i = 0; i < 1000; ++i) c.ProgressAll();
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<iovec> siov(credits + 1), riov(credits);
  for (uint32_t i = 0; i < credits; ++i) {
    const size_t size = i % 2 ? 64 * 1024 : 32;  // rendezvous, eager
    out.push_back(Pattern(size, static_cast<int>(i)));
    in.emplace_back(size, 0);
    ASSERT_TRUE(
        c[1].ep->Recv(TRecv(in[i].data(), size, 100 + i, 0, nullptr, &riov[i]))
            .ok());
  }
  for (uint32_t i = 0; i < credits; ++i) {
    const Status s =
        c[0].ep->Send(TSend(out[i].data(), out[i].size(), c[0].addr[1], 100 + i,
                            nullptr, &siov[i]));
    ASSERT_TRUE(s.ok()) << "send " << i << ": " << s.message();
  }
  uint8_t extra = 0;
  EXPECT_EQ(
      c[0].ep->Send(TSend(&extra, 1, c[0].addr[1], 1, nullptr, &siov[credits]))
          .code(),
      EAGAIN);
  core::CqEntry e;
  for (uint32_t i = 0; i < credits; ++i) {
    ASSERT_EQ(c.ReadOne(1, &e), 1) << "receive " << i;
  }
  for (uint32_t i = 0; i < credits; ++i) {
    ASSERT_EQ(c.ReadOne(0, &e), 1) << "send completion " << i;
  }
  for (uint32_t i = 0; i < credits; ++i) EXPECT_EQ(in[i], out[i]) << i;
}

// A CM datagram of version 3: the prefix every version shares, then bytes
// this version cannot read.
std::vector<uint8_t> FutureVersionRequest(const wire::Name& from) {
  std::vector<uint8_t> bytes(wire::kCmPrefixBytes + 90, 0xEE);
  wire::EncodeCmPrefix(wire::CmType::kRequest, from, bytes.data());
  bytes[1] = wire::kCmVersion + 1;
  return bytes;
}

TEST(ConnectionSetupTest, AnotherVersionIsRefusedAndChangesNothing) {
  Cluster c(3);
  core::Endpoint* victim = c[1].ep.get();
  fuzz::RawPeer peer(c.fabric().device(2));
  ASSERT_TRUE(peer.ok());
  const std::vector<uint8_t> request = FutureVersionRequest(peer.name());
  ASSERT_TRUE(peer.SendCm(victim->name(), request.data(), request.size()).ok());
  std::vector<uint8_t> answer;
  for (int r = 0; r < 1000 && answer.empty(); ++r) {
    c.ProgressAll();
    (void)peer.ReceiveDatagram(&answer);
  }
  ASSERT_FALSE(answer.empty()) << "no answer";
  wire::CmPrefix prefix;
  ASSERT_TRUE(wire::DecodeCmPrefix(answer.data(), answer.size(), &prefix));
  EXPECT_EQ(prefix.version, wire::kCmVersion);
  EXPECT_EQ(prefix.type, wire::CmType::kVersionRefused);
  EXPECT_EQ(prefix.from, victim->name());
  EXPECT_EQ(answer.size(), wire::kCmPrefixBytes);
  EXPECT_EQ(victim->stats().cm_versions_refused, 1u);
  EXPECT_EQ(victim->stats().bad_headers, 0u);
  // Nothing changed: the same peer speaking this version connects, and the
  // victim's own traffic goes on.
  wire::CmMessage reply;
  ASSERT_TRUE(peer.Handshake(
                      victim->name(), 8, [&] { c.ProgressAll(); }, 1000, &reply)
                  .ok());
  EXPECT_EQ(reply.type, wire::CmType::kReply);
  ExpectDelivered(c, 0, 1, 64 * 1024);
}

TEST(ConnectionSetupTest, APeerThatRefusesOurVersionFailsTheConnection) {
  Cluster c(2);
  fuzz::RawPeer peer(c.fabric().device(1));
  ASSERT_TRUE(peer.ok());
  auto index = c[0].av->Insert(peer.name());
  ASSERT_TRUE(index.ok());
  uint8_t byte = 1;
  iovec iov;
  int context = 0;
  ASSERT_TRUE(c[0].ep->Send(TSend(&byte, 1, *index, 1, &context, &iov)).ok());
  // The peer reads the request's prefix and refuses it in its version, 3.
  std::vector<uint8_t> request;
  for (int r = 0; r < 1000 && request.empty(); ++r) {
    c[0].ep->Progress();
    (void)peer.ReceiveDatagram(&request);
  }
  wire::CmPrefix prefix;
  ASSERT_TRUE(wire::DecodeCmPrefix(request.data(), request.size(), &prefix));
  EXPECT_EQ(prefix.type, wire::CmType::kRequest);
  uint8_t refusal[wire::kCmPrefixBytes];
  wire::EncodeCmPrefix(wire::CmType::kVersionRefused, peer.name(), refusal);
  refusal[1] = wire::kCmVersion + 1;
  ASSERT_TRUE(peer.SendCm(prefix.from, refusal, sizeof refusal).ok());
  core::CqEntry e;
  ASSERT_EQ(c.ReadOne(0, &e, 1000), -core::CompletionQueue::kErrAvail);
  core::CqErrEntry x;
  ASSERT_TRUE(c[0].cq->ReadError(&x).ok());
  EXPECT_EQ(x.op_context, &context);
  EXPECT_EQ(x.err, ECONNREFUSED);
  EXPECT_EQ(x.prov_errno, core::kProvCmVersion);
}

TEST(ConnectionSetupTest, ACmSendSlotWaitsForItsSendToComplete) {
  Cluster c(2);
  tp::Device* dev = c.fabric().device(0);
  auto pd = dev->AllocPd();
  ASSERT_TRUE(pd.ok());
  auto cq = dev->CreateCq(256);
  ASSERT_TRUE(cq.ok());
  tp::QpInitAttr init;
  init.send_cq = *cq;
  init.recv_cq = *cq;
  init.qp_type = tp::QpType::kUd;
  init.cap.max_send_wr = 128;
  init.cap.max_recv_wr = 64;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  auto qp = (*pd)->CreateQp(init);
  ASSERT_TRUE(qp.ok());
  tp::QpAttr a;
  a.qp_state = tp::QpState::kInit;
  a.port_num = 1;
  a.qkey = fuzz::RawPeer::kQkey;
  ASSERT_TRUE((*qp)
                  ->Modify(a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort |
                                  tp::kQpQkey)
                  .ok());
  a.qp_state = tp::QpState::kRtr;
  ASSERT_TRUE((*qp)->Modify(a, tp::kQpState).ok());
  a.qp_state = tp::QpState::kRts;
  a.sq_psn = 0;
  ASSERT_TRUE((*qp)->Modify(a, tp::kQpState | tp::kQpSqPsn).ok());
  core::CmChannel channel;
  ASSERT_TRUE(channel.Register(*pd, 1024).ok());
  ASSERT_TRUE(channel.Start(*qp).ok());
  const wire::Name to = c[1].ep->name();
  tp::AhAttr ah_attr;
  ah_attr.is_global = 1;
  std::memcpy(ah_attr.grh.dgid.raw, to.gid, 16);
  ah_attr.port_num = 1;
  auto ah = (*pd)->CreateAh(ah_attr);
  ASSERT_TRUE(ah.ok());
  wire::CmMessage m;
  m.from = c[0].ep->name();
  for (uint32_t i = 0; i < core::CmChannel::kBuffers; ++i) {
    m.request_id = i;
    ASSERT_TRUE(channel.Send(m, *ah, to).ok()) << i;
  }
  EXPECT_EQ(channel.sends_in_flight(), core::CmChannel::kBuffers);
  // Every slot holds a datagram whose send has not been reaped: no slot to
  // write into, and nothing is posted.
  const Status full = channel.Send(m, *ah, to);
  EXPECT_EQ(full.code(), EAGAIN) << full.message();
  // Their completions free the slots again.
  tp::WorkCompletion wc[64];
  uint32_t reaped = 0;
  for (int r = 0; r < 1000 && reaped < core::CmChannel::kBuffers; ++r) {
    c.fabric().RunUntilIdle(1000);
    const int n = (*cq)->Poll(64, wc);
    for (int i = 0; i < n; ++i) {
      if (wc[i].opcode == tp::WcOpcode::kSend) {
        channel.SendDone(wc[i].wr_id);
        ++reaped;
      }
    }
  }
  EXPECT_EQ(reaped, core::CmChannel::kBuffers);
  EXPECT_EQ(channel.sends_in_flight(), 0u);
  EXPECT_TRUE(channel.Send(m, *ah, to).ok());
}

// 40 connections started at once from one endpoint (more than its CM send
// slots): every one completes; requests that found no slot go with the
// retry.
TEST(ConnectionSetupTest, FortyConnectionsAtOnceAllComplete) {
  constexpr int kPeers = 40;
  Cluster c(kPeers + 1);
  std::vector<uint8_t> byte(kPeers, 7), got(kPeers, 0);
  std::vector<iovec> siov(kPeers), riov(kPeers);
  for (int k = 1; k <= kPeers; ++k) {
    ASSERT_TRUE(
        c[k].ep->Recv(TRecv(&got[k - 1], 1, 3, 0, nullptr, &riov[k - 1])).ok());
  }
  for (int k = 1; k <= kPeers; ++k) {
    ASSERT_TRUE(c[0].ep
                    ->Send(TSend(&byte[k - 1], 1, c[0].addr[k], 3, nullptr,
                                 &siov[k - 1]))
                    .ok());
  }
  core::CqEntry e;
  for (int k = 1; k <= kPeers; ++k) ASSERT_EQ(c.ReadOne(k, &e), 1) << k;
  for (int k = 0; k < kPeers; ++k) ASSERT_EQ(c.ReadOne(0, &e), 1) << k;
  EXPECT_EQ(got, byte);
}

}  // namespace
}  // namespace softfab::testing
