// Regression tests for what the fuzz targets (fuzz/, issue 13) found: one
// named case per finding, each failing on the code before its fix. The inputs
// that found them are kept in fuzz/corpus/<target>/regress-* and replayed by
// the //fuzz:*_corpus_test targets too.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/wire.h"
#include "tests/messaging_harness.h"
#include "tests/support/raw_peer.h"

namespace softfab::testing {
namespace {

wire::Name NameWith(uint8_t gid0, uint16_t lid, uint32_t qpn) {
  wire::Name n;
  n.gid[0] = gid0;
  n.lid = lid;
  n.cm_qpn = qpn;
  return n;
}

// decoders: two names with the same LID and QP number (on RoCE every LID is
// 0, and two nodes' first UD QPs often share a number). Removing one made the
// other unfindable by the source of its datagrams.
TEST(HostileRegression, AvRemoveKeepsOtherNameWithSameLidQpn) {
  core::AddressVector av(8);
  const auto a = av.Insert(NameWith(1, 0, 0x11));
  const auto b = av.Insert(NameWith(2, 0, 0x11));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(av.FindByLidQpn(0, 0x11), *a);
  ASSERT_TRUE(av.Remove(*a).ok());
  EXPECT_EQ(av.FindByLidQpn(0, 0x11), *b);
  ASSERT_TRUE(av.Remove(*b).ok());
  EXPECT_FALSE(av.FindByLidQpn(0, 0x11).has_value());
}

// Two RDM endpoints on the simulator, each with a CQ of `cq_size` entries,
// that know each other's names.
struct Pair {
  sf_fabric* fabric = nullptr;
  sf_domain* domain[2] = {};
  sf_cq* cq[2] = {};
  sf_av* av[2] = {};
  sf_ep* ep[2] = {};
  sf_addr_t addr[2] = {};

  explicit Pair(size_t cq_size) {
    sf_fabric_attr fa{};
    fa.backend = SF_BACKEND_SIM;
    fa.sim_nodes = 2;
    fa.sim_seed = 1;
    EXPECT_EQ(sf_fabric_open(&fa, &fabric, nullptr), 0);
    uint8_t names[2 * SF_NAME_BYTES];
    for (int i = 0; i < 2; ++i) {
      sf_cq_attr ca{};
      ca.size = cq_size;
      ca.format = SF_CQ_FORMAT_TAGGED;
      sf_ep_attr ea{};
      ea.type = SF_EP_RDM;
      ea.caps = SF_MSG | SF_TAGGED;
      size_t len = SF_NAME_BYTES;
      EXPECT_EQ(sf_domain_open(fabric, i, &domain[i], nullptr), 0);
      EXPECT_EQ(sf_cq_open(domain[i], &ca, &cq[i], nullptr), 0);
      EXPECT_EQ(sf_av_open(domain[i], nullptr, &av[i], nullptr), 0);
      EXPECT_EQ(sf_endpoint(domain[i], &ea, &ep[i], nullptr), 0);
      EXPECT_EQ(sf_ep_bind(ep[i], &cq[i]->fid, SF_TRANSMIT | SF_RECV), 0);
      EXPECT_EQ(sf_ep_bind(ep[i], &av[i]->fid, 0), 0);
      EXPECT_EQ(sf_enable(ep[i]), 0);
      EXPECT_EQ(sf_getname(&ep[i]->fid, names + i * SF_NAME_BYTES, &len), 0);
    }
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(sf_av_insert(av[i], names, 2, addr, 0, nullptr), 2);
    }
  }
  // At node 0: a multi-recv buffer (context contexts[0]), then a receive
  // tagged 5 (contexts[1]). 0, or the first failure.
  ssize_t PostMultiRecvAndTagged(std::vector<uint8_t>* multi,
                                 std::vector<uint8_t>* tagged, int* contexts) {
    iovec iov{multi->data(), multi->size()};
    sf_msg msg{&iov, nullptr, 1, SF_ADDR_UNSPEC, &contexts[0], 0};
    if (ssize_t rc = sf_recvmsg(ep[0], &msg, SF_MULTI_RECV); rc != 0) {
      return rc;
    }
    return sf_trecv(ep[0], tagged->data(), tagged->size(), nullptr,
                    SF_ADDR_UNSPEC, 5, 0, &contexts[1]);
  }
  // Waits up to 1 ms (virtual) for an entry at node 0: counts it in *done,
  // and in *errors too if it is an error entry.
  void WaitOnNode0(int* done, int* errors) {
    sf_cq_tagged_entry e;
    const ssize_t n = sf_cq_sread(cq[0], &e, 1, nullptr, 1);
    if (n == 1) ++*done;
    if (n == -SF_EAVAIL) {
      sf_cq_err_entry err{};
      EXPECT_GT(sf_cq_readerr(cq[0], &err, 0), 0);
      ++*done;
      ++*errors;
    }
  }
  ~Pair() {
    for (int i = 0; i < 2; ++i) {
      sf_close(&ep[i]->fid);
      sf_close(&av[i]->fid);
      sf_close(&cq[i]->fid);
      sf_close(&domain[i]->fid);
    }
    sf_close(&fabric->fid);
  }
};

// api_calls: a CQ whose every slot was promised to posted operations (here 4
// slots: two receives and two sends) stopped progress from reading the
// transport, so the connection the sends waited for never came up and they
// failed with EHOSTUNREACH.
TEST(HostileRegression, CqRoomAllPromisedStillConnects) {
  Pair p(/*cq_size=*/4);
  std::vector<uint8_t> in[2], out[2];
  int contexts[4];
  for (int k = 0; k < 2; ++k) {
    in[k].assign(64, 0);
    out[k].assign(64, static_cast<uint8_t>(k + 1));
    ASSERT_EQ(sf_recv(p.ep[0], in[k].data(), 64, nullptr, SF_ADDR_UNSPEC,
                      &contexts[k]),
              0);
  }
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(sf_send(p.ep[0], out[k].data(), 64, nullptr, p.addr[1],
                      &contexts[2 + k]),
              0);
  }
  // The peer answers each message with one into node 0's receives.
  const std::vector<uint8_t> reply(64, 9);
  std::vector<uint8_t> sink[2] = {std::vector<uint8_t>(64),
                                  std::vector<uint8_t>(64)};
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(
        sf_recv(p.ep[1], sink[k].data(), 64, nullptr, SF_ADDR_UNSPEC, nullptr),
        0);
  }
  int done = 0, errors = 0, peer_got = 0;
  for (int round = 0; round < 200 && done < 4; ++round) {
    sf_cq_tagged_entry e;
    while (sf_cq_read(p.cq[1], &e, 1) == 1) {
      if (!(e.flags & SF_RECV)) continue;
      ++peer_got;
      EXPECT_EQ(sf_send(p.ep[1], reply.data(), 64, nullptr, p.addr[0], nullptr),
                0);
    }
    p.WaitOnNode0(&done, &errors);
  }
  EXPECT_EQ(done, 4);
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(peer_got, 2);
  EXPECT_EQ(in[0], reply);
  EXPECT_EQ(in[1], reply);
}

// api_calls (after the first fix): with a multi-recv buffer posted, which may
// write entries nobody reserved, progress again stopped reading the transport
// once every CQ slot was promised, and the connection never came up. Now only
// the messages bound for that buffer wait for room. (Since the fix below a
// multi-recv buffer keeps a slot free, so the three posts take 4 slots.)
TEST(HostileRegression, CqRoomAllPromisedWithMultiRecvStillConnects) {
  Pair p(/*cq_size=*/4);
  std::vector<uint8_t> multi(65536), in(64, 0), out(64, 3);
  int contexts[3];
  ASSERT_EQ(p.PostMultiRecvAndTagged(&multi, &in, contexts), 0);
  ASSERT_EQ(sf_send(p.ep[0], out.data(), 64, nullptr, p.addr[1], &contexts[2]),
            0);
  const std::vector<uint8_t> reply(64, 9);
  std::vector<uint8_t> sink(64);
  ASSERT_EQ(sf_recv(p.ep[1], sink.data(), 64, nullptr, SF_ADDR_UNSPEC, nullptr),
            0);
  int done = 0, errors = 0;
  bool replied = false;
  for (int round = 0; round < 200 && done < 2; ++round) {
    sf_cq_tagged_entry e;
    while (sf_cq_read(p.cq[1], &e, 1) == 1) {
      if (!(e.flags & SF_RECV) || replied) continue;
      replied = true;
      EXPECT_EQ(
          sf_tsend(p.ep[1], reply.data(), 64, nullptr, p.addr[0], 5, nullptr),
          0);
    }
    p.WaitOnNode0(&done, &errors);
  }
  EXPECT_EQ(done, 2);  // The send and the tagged receive.
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(in, reply);
}

// api_calls: A sends to B, whose owner does not drive progress until A's
// connection requests have run out (A's send fails). Then B sends to A and
// accepts A's last request on the way: its send waited for A's first message
// on a connection A had given up, for ever. Now it fails once A has had time
// to speak. Either order of the two names, since which request wins depends
// on it.
TEST(HostileRegression, AcceptedPeerThatNeverSpeaksFailsTheSends) {
  for (int a : {0, 1}) {
    SCOPED_TRACE("A is node " + std::to_string(a));
    const int b = 1 - a;
    Pair p(/*cq_size=*/64);
    std::vector<uint8_t> out(64, 1);
    int context_a = 0, context_b = 0;
    ASSERT_EQ(sf_send(p.ep[a], out.data(), 64, nullptr, p.addr[b], &context_a),
              0);
    sf_cq_err_entry err{};
    sf_cq_tagged_entry e;
    ssize_t n = 0;
    for (int i = 0; i < 100 && n != -SF_EAVAIL; ++i) {
      n = sf_cq_sread(p.cq[a], &e, 1, nullptr, 1);
    }
    ASSERT_EQ(n, -SF_EAVAIL);
    ASSERT_GT(sf_cq_readerr(p.cq[a], &err, 0), 0);
    EXPECT_EQ(err.err, SF_EHOSTUNREACH);
    ASSERT_EQ(sf_send(p.ep[b], out.data(), 64, nullptr, p.addr[a], &context_b),
              0);
    bool done = false;
    for (int i = 0; i < 2000 && !done; ++i) {
      (void)sf_cq_sread(p.cq[a], &e, 1, nullptr, 1);
      n = sf_cq_sread(p.cq[b], &e, 1, nullptr, 1);
      if (n == -SF_EAVAIL) {
        ASSERT_GT(sf_cq_readerr(p.cq[b], &err, 0), 0);
        EXPECT_EQ(err.op_context, &context_b);
        done = true;
      }
      done |= n == 1;
    }
    EXPECT_TRUE(done) << "B's send never completed";
  }
}

// api_calls (after the fixes above): a message bound for a multi-recv buffer
// waits for CQ room (its entry is not reserved), but when every slot was
// promised to receives waiting for messages, no room could ever come. Now a
// posted multi-recv buffer keeps one slot unpromised: the post that would take
// it gets EAGAIN, and the buffer's messages land.
TEST(HostileRegression, MultiRecvKeepsASlotForItsMessages) {
  Pair p(/*cq_size=*/3);
  std::vector<uint8_t> multi(65536), in(64);
  int contexts[3];
  ASSERT_EQ(p.PostMultiRecvAndTagged(&multi, &in, contexts), 0);
  EXPECT_EQ(sf_trecv(p.ep[0], in.data(), 64, nullptr, SF_ADDR_UNSPEC, 6, 0,
                     &contexts[2]),
            -SF_EAGAIN);
  std::vector<uint8_t> out(100, 4);
  ASSERT_EQ(
      sf_send(p.ep[1], out.data(), out.size(), nullptr, p.addr[0], nullptr), 0);
  sf_cq_tagged_entry e{};
  ssize_t n = 0;
  for (int i = 0; i < 200 && n != 1; ++i) {
    (void)sf_cq_read(p.cq[1], nullptr, 0);
    n = sf_cq_sread(p.cq[0], &e, 1, nullptr, 1);
  }
  ASSERT_EQ(n, 1);
  EXPECT_EQ(e.op_context, &contexts[0]);
  EXPECT_EQ(e.len, out.size());
  EXPECT_EQ(std::vector<uint8_t>(multi.begin(), multi.begin() + 100), out);
}

// Review (not a fuzz input): a rendezvous message taken into a multi-recv
// buffer writes its entry only when its READ is done, and nothing held the
// room it was taken with: eager messages that came after it into the same
// buffer filled the CQ, and the READ's entry was lost (the sender saw its
// send complete). The room is now held from the start of the READ, and the
// later messages wait for room instead.
TEST(HostileRegression, MultiRecvHoldsRoomForAMessageBeingRead) {
  Cluster c(2, {}, {}, /*cq_size=*/4);
  ExpectDelivered(c, 0, 1, 8);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const size_t room = c[1].cq->room();
  std::vector<uint8_t> multi(65536);
  iovec miov{multi.data(), multi.size()};
  core::RecvArgs m;
  m.iov = &miov;
  m.iov_count = 1;
  m.flags = core::kMultiRecv;
  ASSERT_TRUE(c[1].ep->Recv(m).ok());
  // A rendezvous message, then three eager ones, into that buffer; node 1's
  // CQ (4 entries, one promised to the buffer) is not read meanwhile.
  const std::vector<uint8_t> big(16384, 1);
  const uint8_t small[8] = {2};
  iovec siov[4];
  for (int i = 0; i < 4; ++i) {
    core::SendArgs a =
        i == 0
            ? TSend(big.data(), big.size(), c[0].addr[1], 0, nullptr, &siov[i])
            : TSend(small, sizeof small, c[0].addr[1], 0, nullptr, &siov[i]);
    a.tagged = false;
    ASSERT_TRUE(c[0].ep->Send(a).ok()) << i;
  }
  for (int r = 0; r < 2000; ++r) c.ProgressAll();
  // Every message has its entry.
  size_t bytes = 0;
  for (int i = 0; i < 4; ++i) {
    core::CqEntry e;
    ASSERT_EQ(c.ReadOne(1, &e), 1) << "entry " << i;
    bytes += e.len;
  }
  EXPECT_EQ(bytes, big.size() + 3 * sizeof small);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  core::CqEntry e;
  EXPECT_EQ(c[1].cq->Read(&e, 1), -EAGAIN);
  // The room held for the READ went to its entry: only the buffer's own
  // promise is out now, and none once the endpoint is gone.
  EXPECT_EQ(c[1].cq->room(), room - 1);
  c[1].ep.reset();
  EXPECT_EQ(c[1].cq->room(), room);
}

// api_calls: sends to the endpoint itself (rendezvous, so each completes
// only when a receive here takes it) held every slot of a CQ of 4, so no
// receive could be posted and none of them could ever complete. A send to
// itself now leaves one slot unpromised for the receive it needs.
TEST(HostileRegression, SendsToItselfLeaveASlotForTheirReceive) {
  Pair p(/*cq_size=*/4);
  std::vector<uint8_t> out(61680, 7), in(61680, 0);
  int sends[4], recv = 0;
  // Each send tried until it is taken or the CQ refuses it (credits come
  // once the connection to itself is up).
  int accepted = 0;
  std::string refusal;
  for (int& context : sends) {
    ssize_t rc = -SF_EAGAIN;
    for (int i = 0; i < 200 && rc == -SF_EAGAIN && refusal.empty(); ++i) {
      rc = sf_tsend(p.ep[0], out.data(), out.size(), nullptr, p.addr[0], 9,
                    &context);
      if (rc == -SF_EAGAIN &&
          std::string(sf_last_error()).find("completion queue") !=
              std::string::npos) {
        refusal = sf_last_error();
      }
      (void)sf_cq_read(p.cq[0], nullptr, 0);  // progress
    }
    if (rc == 0) ++accepted;
  }
  EXPECT_FALSE(refusal.empty()) << "the fourth send was taken";
  EXPECT_EQ(accepted, 3);
  int done = 0;
  for (int round = 0; round < 100 && done < 2 * accepted; ++round) {
    const ssize_t rc = sf_trecv(p.ep[0], in.data(), in.size(), nullptr,
                                SF_ADDR_UNSPEC, 9, 0, &recv);
    ASSERT_TRUE(rc == 0 || rc == -SF_EAGAIN) << rc;
    sf_cq_tagged_entry e{};
    for (int i = 0; i < 50; ++i) {
      const ssize_t n = sf_cq_sread(p.cq[0], &e, 1, nullptr, 1);
      ASSERT_NE(n, -SF_EAVAIL) << "an error completion";
      if (n == 1) {
        ++done;
        if (e.op_context == &recv) break;
      }
    }
  }
  EXPECT_EQ(done, 2 * accepted) << "sends and receives completed";
  EXPECT_EQ(in, out);
}

// api_calls (after the half-open fix): B accepted A's request and, A's owner
// not driving progress, failed the peer at its deadline; A then connected
// with B's late reply and sent a rendezvous request, and waited for ever for
// the read-done of a connection B had given up. Now B's QP goes to error when
// it fails the peer, so A's send fails too.
TEST(HostileRegression, PeerFailedOnOneSideFailsOnTheOther) {
  for (int a : {0, 1}) {
    SCOPED_TRACE("A is node " + std::to_string(a));
    const int b = 1 - a;
    Pair p(/*cq_size=*/64);
    std::vector<uint8_t> big(20000, 1), small(8, 2);
    int context_a = 0, context_b = 0;
    ASSERT_EQ(sf_send(p.ep[a], big.data(), big.size(), nullptr, p.addr[b],
                      &context_a),
              0);
    ASSERT_EQ(sf_send(p.ep[b], small.data(), small.size(), nullptr, p.addr[a],
                      &context_b),
              0);
    sf_cq_tagged_entry e;
    sf_cq_err_entry err{};
    // Only B's owner drives progress, for 700 ms (virtual).
    for (int i = 0; i < 700; ++i) {
      if (sf_cq_sread(p.cq[b], &e, 1, nullptr, 1) == -SF_EAVAIL) {
        ASSERT_GT(sf_cq_readerr(p.cq[b], &err, 0), 0);
      }
    }
    // Then both: A's send must end, one way or the other.
    bool done = false;
    for (int i = 0; i < 3000 && !done; ++i) {
      (void)sf_cq_sread(p.cq[b], &e, 1, nullptr, 1);
      const ssize_t n = sf_cq_sread(p.cq[a], &e, 1, nullptr, 1);
      if (n == -SF_EAVAIL) {
        ASSERT_GT(sf_cq_readerr(p.cq[a], &err, 0), 0);
        done = err.op_context == &context_a;
      }
      done |= n == 1 && e.op_context == &context_a;
    }
    EXPECT_TRUE(done) << "A's send never completed";
  }
}

// hostile_peer: one CM datagram larger than the CM's receive slots (then 168
// bytes, now at least 296) moved the endpoint's UD QP to ERROR (rxe's rule for
// a datagram that does not fit its receive), and the endpoint could never
// connect to anyone again. The slots now hold anything the path MTU lets
// through.
TEST(HostileRegression, OversizedCmDatagramLeavesTheCmWorking) {
  Cluster c(3);
  fuzz::RawPeer peer(c.fabric().device(2));
  ASSERT_TRUE(peer.ok());
  std::vector<uint8_t> junk(1000, 0xFF);
  // Larger than the smallest receive slot the CM could have, and sent whole.
  ASSERT_GT(junk.size(), core::CmChannel::kSlotBytes - 40);
  ASSERT_LE(junk.size(), fuzz::RawPeer::kCmSlotBytes - 40);
  ASSERT_TRUE(peer.SendCm(c[1].ep->name(), junk.data(), junk.size()).ok());
  c.ProgressAll();
  // An honest peer still connects and delivers.
  std::vector<uint8_t> out(64, 5), in(64, 0);
  iovec siov, riov;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(in.data(), 64, 1, 0, &in, &riov)).ok());
  ASSERT_TRUE(
      c[0].ep->Send(TSend(out.data(), 64, c[0].addr[1], 1, &out, &siov)).ok());
  core::CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &in);
  EXPECT_EQ(in, out);
}

// hostile_peer: a peer that ignores its credits (raw verbs, after a real
// handshake) sent unexpected messages without end, and the endpoint copied
// every one aside: memory grew with the flood. Now at most 2 x credits per
// peer are kept; the rest are dropped and counted.
TEST(HostileRegression, CreditIgnoringFloodIsBounded) {
  sim::SimConfig config;
  config.nodes = 2;
  auto fabric = sim::CreateSimFabric(config);
  ASSERT_NE(fabric, nullptr);
  auto pd = fabric->device(0)->AllocPd();
  ASSERT_TRUE(pd.ok());
  core::EndpointAttr attr;
  attr.credits = 8;
  // The CQ outlives the endpoint bound to it (declared first).
  core::CompletionQueue cq(64);
  core::AddressVector av(4);
  auto ep = core::Endpoint::Create(fabric->device(0), *pd, attr);
  ASSERT_TRUE(ep.ok());
  ASSERT_TRUE((*ep)->BindCq(&cq, core::kSend | core::kRecv).ok());
  ASSERT_TRUE((*ep)->BindAv(&av).ok());
  ASSERT_TRUE((*ep)->Enable().ok());
  core::Endpoint* victim = ep->get();

  fuzz::RawPeer peer(fabric->device(1));
  ASSERT_TRUE(peer.ok());
  wire::CmMessage reply;
  ASSERT_TRUE(
      peer.Handshake(
              victim->name(), 8, [&] { victim->Progress(); }, 100, &reply)
          .ok());
  // 200 tagged eager messages nobody posted a receive for, each sent after
  // the victim has run (so none is refused for want of a buffer).
  wire::Header h;
  h.op = wire::Op::kEager;
  h.flags = wire::kTagged;
  h.length = 100;
  h.tag = 7;
  wire::Encode(h, peer.buffer() + 4096);  // Past the credit word.
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(peer.Send(4096, wire::kHeaderBytes + 100).ok());
    fabric->RunUntilIdle();
    victim->Progress();
    EXPECT_EQ(peer.PollSends(), 0);
  }
  EXPECT_EQ(victim->stats().unexpected_held, 2u * attr.credits);
  EXPECT_EQ(victim->stats().overrun_dropped, 200u - 2 * attr.credits);
}

}  // namespace
}  // namespace softfab::testing
