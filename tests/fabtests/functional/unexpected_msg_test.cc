// fabtests' functional/unexpected_msg on sf_*: messages that arrive before
// their receives are posted. Two checks, as the program makes them:
// - (RDM) a message from a peer the receiver's AV does not know yet is taken
//   by an SF_ADDR_UNSPEC receive, and one that arrived before the peer was
//   inserted is still taken by a receive directed to the new address;
// - (RDM and MSG) rounds of `concurrent` tagged sends (tags 0x1234 + j) that
//   all arrive unexpected, then receives posted in reverse tag order, each
//   completing with its own message's bytes; with -C the remote CQ data
//   carries the size, with -U the sends ask for delivery-complete.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

class FabtestsUnexpectedMsg : public ::softfab::testing::PerBackendTest {
 protected:
  Fixture f;
};

constexpr uint64_t kTag = 0x1234;

TEST_P(FabtestsUnexpectedMsg, UnknownSourceThenDirectedReceive) {
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_RDM, SF_DIRECTED_RECV));
  // The "server": a fresh endpoint on node 1 whose AV is empty.
  std::vector<uint8_t> server_name;
  ASSERT_TRUE(AddPeer(f, 1, SF_EP_RDM, SF_MSG | SF_TAGGED | SF_DIRECTED_RECV,
                      SF_CQ_FORMAT_TAGGED, &server_name));
  const int server = 2;
  sf_addr_t to_server = SF_ADDR_NOTAVAIL;
  ASSERT_EQ(sf_av_insert(f.peers[0].av, server_name.data(), 1, &to_server, 0,
                         nullptr),
            1);
  // The client sends two messages before the server knows it.
  const std::vector<uint8_t> first = Pattern(40, 1), second = Pattern(40, 2);
  int sctx[2];
  ASSERT_EQ(sf_tsend(f.peers[0].ep, first.data(), first.size(), nullptr,
                     to_server, kTag, &sctx[0]),
            0);
  ASSERT_EQ(sf_tsend(f.peers[0].ep, second.data(), second.size(), nullptr,
                     to_server, kTag, &sctx[1]),
            0);
  ASSERT_TRUE(Completes(f, 0, &sctx[0]));
  ASSERT_TRUE(Completes(f, 0, &sctx[1]));
  // The first is matched by a receive from anyone; its source is not in the
  // server's AV.
  std::vector<uint8_t> in(64, 0);
  int rctx = 0;
  ASSERT_EQ(sf_trecv(f.peers[server].ep, in.data(), in.size(), nullptr,
                     SF_ADDR_UNSPEC, kTag, 0, &rctx),
            0);
  sf_cq_tagged_entry e{};
  sf_addr_t from = 0;
  ssize_t n = -SF_EAGAIN;
  for (int r = 0; r < 100000 && n == -SF_EAGAIN; ++r) {
    n = sf_cq_readfrom(f.peers[server].cq, &e, 1, &from);
    if (n == -SF_EAGAIN) f.Progress();
  }
  ASSERT_EQ(n, 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, first.size());
  EXPECT_TRUE(SameBytes(in.data(), first));
  EXPECT_EQ(from, SF_ADDR_NOTAVAIL);
  // The server learns the client's address; the second message, which came
  // before, matches a receive directed to it.
  uint8_t client_name[SF_NAME_BYTES];
  size_t len = sizeof client_name;
  ASSERT_EQ(sf_getname(&f.peers[0].ep->fid, client_name, &len), 0);
  sf_addr_t to_client = SF_ADDR_NOTAVAIL;
  ASSERT_EQ(
      sf_av_insert(f.peers[server].av, client_name, 1, &to_client, 0, nullptr),
      1);
  // (Beyond the program: a directed peek finds it too.)
  sf_context peek_ctx{};
  sf_msg_tagged peek{nullptr, nullptr, 0, to_client, kTag, 0, &peek_ctx, 0};
  ASSERT_EQ(sf_trecvmsg(f.peers[server].ep, &peek, SF_PEEK), 0);
  ASSERT_TRUE(Completes(f, server, &peek_ctx, &e));
  EXPECT_EQ(e.len, second.size());
  ASSERT_EQ(sf_trecv(f.peers[server].ep, in.data(), in.size(), nullptr,
                     to_client, kTag, 0, &rctx),
            0);
  ASSERT_TRUE(Completes(f, server, &rctx, &e));
  EXPECT_EQ(e.len, second.size());
  EXPECT_TRUE(SameBytes(in.data(), second));
  // And the server can send back with the inserted address.
  const std::vector<uint8_t> reply = Pattern(1, 3);
  ASSERT_EQ(sf_trecv(f.peers[0].ep, in.data(), in.size(), nullptr,
                     SF_ADDR_UNSPEC, kTag, 0, &rctx),
            0);
  int reply_ctx = 0;
  ASSERT_EQ(sf_tsend(f.peers[server].ep, reply.data(), reply.size(), nullptr,
                     to_client, kTag, &reply_ctx),
            0);
  ASSERT_TRUE(Completes(f, 0, &rctx, &e));
  EXPECT_EQ(e.len, 1u);
  EXPECT_TRUE(SameBytes(in.data(), reply));
  ASSERT_TRUE(Completes(f, server, &reply_ctx));
  EXPECT_TRUE(DropPeer(f));
}

struct LoopOptions {
  sf_ep_type type;
  size_t size;
  bool cq_data;            // -C
  bool delivery_complete;  // -U
};

// fabtests' run_test_loop: every round all sends go out and arrive before a
// receive is posted, then the receives take them in reverse tag order.
void RunLoop(Fixture& f, const Backend& b, const LoopOptions& o) {
  SCOPED_TRACE(std::string(TypeName(o.type)) + " size " +
               std::to_string(o.size) + (o.cq_data ? " -C" : "") +
               (o.delivery_complete ? " -U" : ""));
  ASSERT_TRUE(OpenPair(f, b, o.type));
  constexpr int kConcurrent = 4;  // -M
  const int rounds = Count(b, 20, 3);
  const uint64_t flags = o.delivery_complete ? SF_DELIVERY_COMPLETE : 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<uint8_t>> out(kConcurrent);
    int sctx[kConcurrent];
    for (int j = 0; j < kConcurrent; ++j) {
      out[j] = Pattern(o.size, round * kConcurrent + j);
      iovec iov{out[j].data(), out[j].size()};
      sf_msg_tagged m{&iov,     nullptr, 1,        f.peers[0].addr[1],
                      kTag + j, 0,       &sctx[j], o.size};
      const uint64_t data_flag = o.cq_data ? SF_REMOTE_CQ_DATA : 0;
      ASSERT_EQ(Retry(f,
                      [&] {
                        return sf_tsendmsg(f.peers[0].ep, &m,
                                           SF_COMPLETION | flags | data_flag);
                      }),
                0)
          << sf_last_error();
    }
    // ft_sync: let everything arrive (eager messages land unexpected,
    // rendezvous ones wait as unexpected requests).
    for (int r = 0; r < 200; ++r) f.Progress();
    std::vector<std::vector<uint8_t>> in(kConcurrent);
    int rctx[kConcurrent];
    for (int j = 0; j < kConcurrent; ++j) {
      const int tag_index = kConcurrent - 1 - j;
      in[j].assign(o.size, 0);
      ASSERT_EQ(sf_trecv(f.peers[1].ep, in[j].data(), in[j].size(), nullptr,
                         SF_ADDR_UNSPEC, kTag + tag_index, 0, &rctx[j]),
                0);
      sf_cq_tagged_entry e{};
      ASSERT_TRUE(Completes(f, 1, &rctx[j], &e));
      EXPECT_EQ(e.len, o.size);
      EXPECT_EQ(e.tag, kTag + tag_index);
      if (o.cq_data) {
        EXPECT_TRUE(e.flags & SF_REMOTE_CQ_DATA);
        EXPECT_EQ(e.data, o.size);
      }
      ASSERT_TRUE(SameBytes(in[j].data(), out[tag_index]));
    }
    std::vector<sf_cq_tagged_entry> done;
    ASSERT_TRUE(CompletesN(f, 0, kConcurrent, &done));
  }
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
}

TEST_P(FabtestsUnexpectedMsg, ReverseTagOrderEachRound) {
  // 128 B is the program's default; 16 KiB goes by rendezvous.
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
    for (size_t size : {size_t{128}, size_t{16384}}) {
      Fixture g;
      RunLoop(g, backend(), {type, size, false, false});
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(FabtestsUnexpectedMsg, RemoteCqDataAndDeliveryComplete) {
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
    Fixture g;
    RunLoop(g, backend(), {type, 128, true, false});
    if (HasFatalFailure()) return;
    Fixture h;
    RunLoop(h, backend(), {type, 128, false, true});
    if (HasFatalFailure()) return;
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsUnexpectedMsg);

}  // namespace
}  // namespace softfab::fabtests
