// The conformance suite: fi_msg(3) / fi_tagged(3) behaviour through the public
// sf_* API, instantiated per backend. Today the simulator is the only backend;
// the verbs issue adds Soft-RoCE (rxe) here, and a backend that cannot run in
// the current environment is skipped with the reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Backend;
using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

class ConformanceTest : public ::softfab::testing::PerBackendTest {
 protected:
  Fixture f;
};

TEST_P(ConformanceTest, TaggedRoundTrip) {
  ASSERT_TRUE(f.Open(backend(), 2));
  char out[] = "conformance";
  char in[32] = {};
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in, sizeof in, nullptr, SF_ADDR_UNSPEC, 9,
                     0, &rctx),
            0);
  ASSERT_EQ(sf_tsend(f.peers[0].ep, out, sizeof out, nullptr,
                     f.peers[0].addr[1], 9, &sctx),
            0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, sizeof out);
  EXPECT_EQ(e.tag, 9u);
  EXPECT_EQ(e.flags, SF_RECV | SF_TAGGED);
  EXPECT_STREQ(in, out);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &sctx);
  sf_addr_t from = 0;
  // readfrom reports the source as the receiver's AV index.
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in, sizeof in, nullptr, SF_ADDR_UNSPEC, 1,
                     0, &rctx),
            0);
  ASSERT_EQ(sf_tinject(f.peers[0].ep, out, 4, f.peers[0].addr[1], 1), 0);
  for (int r = 0; r < 100000; ++r) {
    const ssize_t n = sf_cq_readfrom(f.peers[1].cq, &e, 1, &from);
    if (n == 1) break;
    f.Progress();
  }
  EXPECT_EQ(from, f.peers[1].addr[0]);
}

// Scenario 1: n tagged sends before any receive; receives in reverse order.
TEST_P(ConformanceTest, UnexpectedMessagesInReverseTagOrder) {
  ASSERT_TRUE(f.Open(backend(), 2));
  constexpr int kCount = 64;
  std::vector<std::vector<uint8_t>> msgs(kCount);
  for (int i = 0; i < kCount; ++i) {
    msgs[i] = Pattern(1 + 97 * i, i);
    ASSERT_EQ(sf_tsend(f.peers[0].ep, msgs[i].data(), msgs[i].size(), nullptr,
                       f.peers[0].addr[1], 500 + i, nullptr),
              0);
  }
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(0, kCount, &ok, &err);
  ASSERT_TRUE(err.empty());
  for (int i = kCount - 1; i >= 0; --i) {
    std::vector<uint8_t> in(msgs[i].size() + 8, 0xEE);
    ASSERT_EQ(sf_trecv(f.peers[1].ep, in.data(), msgs[i].size(), nullptr,
                       SF_ADDR_UNSPEC, 500 + i, 0, &msgs[i]),
              0);
    sf_cq_tagged_entry e;
    ASSERT_EQ(f.ReadOne(1, &e), 1);
    ASSERT_EQ(e.op_context, &msgs[i]);
    ASSERT_EQ(e.len, msgs[i].size());
    ASSERT_EQ(std::memcmp(in.data(), msgs[i].data(), e.len), 0) << i;
    for (size_t b = e.len; b < in.size(); ++b) ASSERT_EQ(in[b], 0xEE);
  }
}

// Scenario 2: peek, claim, discard with fi_context-style contexts.
TEST_P(ConformanceTest, PeekClaimDiscard) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* rx = f.peers[1].ep;
  for (uint64_t tag = 1; tag <= 6; ++tag) {
    const uint64_t v = tag * 1000;
    ASSERT_EQ(sf_tsend(f.peers[0].ep, &v, 8, nullptr, f.peers[0].addr[1], tag,
                       nullptr),
              0);
  }
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(0, 6, &ok, &err);
  auto msg = [](uint64_t tag, uint64_t* buf, sf_context* ctx) {
    static iovec iov;
    iov = {buf, buf ? 8u : 0u};
    sf_msg_tagged m{};
    m.msg_iov = buf ? &iov : nullptr;
    m.iov_count = buf ? 1 : 0;
    m.addr = SF_ADDR_UNSPEC;
    m.tag = tag;
    m.context = ctx;
    return m;
  };
  auto expect_enomsg = [&] {
    sf_cq_tagged_entry e;
    ASSERT_EQ(f.ReadOne(1, &e), -SF_EAVAIL);
    sf_cq_err_entry x;
    ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
    EXPECT_EQ(x.err, SF_ENOMSG);
  };
  sf_context ctx{};
  sf_cq_tagged_entry e;
  sf_msg_tagged m = msg(99, nullptr, &ctx);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK), 0);
  expect_enomsg();
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK | SF_CLAIM), 0);
  expect_enomsg();
  m = msg(1, nullptr, &ctx);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.len, 8u);
  EXPECT_EQ(e.tag, 1u);
  // PEEK|CLAIM then CLAIM returns the data.
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK | SF_CLAIM), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  uint64_t got = 0;
  m = msg(1, &got, &ctx);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_CLAIM), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 1000u);
  EXPECT_TRUE(e.flags & SF_CLAIM);
  // PEEK|DISCARD then peek gives ENOMSG.
  m = msg(2, nullptr, &ctx);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK | SF_DISCARD), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK), 0);
  expect_enomsg();
  // PEEK|CLAIM then CLAIM|DISCARD.
  sf_context ctx3{};
  m = msg(3, nullptr, &ctx3);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK | SF_CLAIM), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_CLAIM | SF_DISCARD), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  ASSERT_EQ(sf_trecvmsg(rx, &m, SF_PEEK), 0);
  expect_enomsg();
  // The rest (4, 5, 6): 6 and 5 in reverse order, then 4.
  for (uint64_t tag : {6, 5, 4}) {
    ASSERT_EQ(sf_trecv(rx, &got, 8, nullptr, SF_ADDR_UNSPEC, tag, 0, nullptr),
              0);
    ASSERT_EQ(f.ReadOne(1, &e), 1);
    EXPECT_EQ(got, tag * 1000);
  }
  EXPECT_TRUE(f.Quiet(1));
}

// Scenario 3: one buffer posted as two multi-recv halves.
TEST_P(ConformanceTest, MultiRecvTwoHalves) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* rx = f.peers[1].ep;
  const size_t min_free = 100;
  ASSERT_EQ(sf_setopt(&rx->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV,
                      &min_free, sizeof min_free),
            0);
  size_t readback = 0, len = sizeof readback;
  ASSERT_EQ(sf_getopt(&rx->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV,
                      &readback, &len),
            0);
  EXPECT_EQ(readback, min_free);
  constexpr size_t kHalf = 4096, kMsg = 1000;
  std::vector<uint8_t> buffer(2 * kHalf);
  iovec halves[2] = {{buffer.data(), kHalf}, {buffer.data() + kHalf, kHalf}};
  int ctx[2];
  for (int h = 0; h < 2; ++h) {
    sf_msg m{};
    m.msg_iov = &halves[h];
    m.iov_count = 1;
    m.addr = SF_ADDR_UNSPEC;
    m.context = &ctx[h];
    ASSERT_EQ(sf_recvmsg(rx, &m, SF_MULTI_RECV), 0);
  }
  // 1000-byte messages: 4 fit in a half (96 bytes left < 100: released).
  constexpr int kCount = 8;
  for (int i = 0; i < kCount; ++i) {
    std::vector<uint8_t> v(kMsg, static_cast<uint8_t>(i + 1));
    ASSERT_EQ(sf_send(f.peers[0].ep, v.data(), v.size(), nullptr,
                      f.peers[0].addr[1], nullptr),
              0);
    sf_cq_tagged_entry e;
    ASSERT_EQ(f.ReadOne(0, &e), 1);
  }
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(1, kCount, &ok, &err);
  ASSERT_TRUE(err.empty());
  int released = 0;
  for (int i = 0; i < kCount; ++i) {
    const int h = i / 4;
    EXPECT_EQ(ok[i].op_context, &ctx[h]);
    EXPECT_EQ(ok[i].len, kMsg);
    uint8_t* want = static_cast<uint8_t*>(halves[h].iov_base) + kMsg * (i % 4);
    EXPECT_EQ(ok[i].buf, want) << i;
    EXPECT_EQ(*want, i + 1);
    if (ok[i].flags & SF_MULTI_RECV) {
      ++released;
      EXPECT_EQ(i % 4, 3);
    }
  }
  EXPECT_EQ(released, 2);
  // Repost works.
  sf_msg m{};
  m.msg_iov = &halves[0];
  m.iov_count = 1;
  m.addr = SF_ADDR_UNSPEC;
  m.context = &ctx[0];
  ASSERT_EQ(sf_recvmsg(rx, &m, SF_MULTI_RECV), 0);
  ASSERT_EQ(
      sf_send(f.peers[0].ep, "again", 6, nullptr, f.peers[0].addr[1], nullptr),
      0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.buf, buffer.data());
}

// Scenario 4: cancel.
TEST_P(ConformanceTest, CancelGivesEcanceledAndNothingElse) {
  ASSERT_TRUE(f.Open(backend(), 2));
  uint64_t a = 0, b = 0;
  int ca = 0, cb = 0;
  ASSERT_EQ(sf_trecv(f.peers[1].ep, &a, 8, nullptr, SF_ADDR_UNSPEC, 1, 0, &ca),
            0);
  ASSERT_EQ(sf_trecv(f.peers[1].ep, &b, 8, nullptr, SF_ADDR_UNSPEC, 2, 0, &cb),
            0);
  ASSERT_EQ(sf_cancel(&f.peers[1].ep->fid, &ca), 0);
  EXPECT_EQ(sf_cancel(&f.peers[1].ep->fid, &ca), -SF_ENOENT);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(1, &e), -SF_EAVAIL);
  sf_cq_err_entry x;
  ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
  EXPECT_EQ(x.err, SF_ECANCELED);
  EXPECT_EQ(x.op_context, &ca);
  const uint64_t v = 5;
  ASSERT_EQ(sf_tinject(f.peers[0].ep, &v, 8, f.peers[0].addr[1], 2), 0);
  ASSERT_EQ(sf_tinject(f.peers[0].ep, &v, 8, f.peers[0].addr[1], 1), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &cb);
  EXPECT_TRUE(f.Quiet(1));
  EXPECT_EQ(a, 0u);
}

// Scenario 5: inject.
TEST_P(ConformanceTest, InjectBufferReusableAndNoCompletion) {
  ASSERT_TRUE(f.Open(backend(), 2));
  uint64_t v = 42, got = 0;
  ASSERT_EQ(sf_tinject(f.peers[0].ep, &v, 8, f.peers[0].addr[1], 3), 0);
  v = 0;
  ASSERT_EQ(sf_inject(f.peers[0].ep, &v, 8, f.peers[0].addr[1]), 0);
  v = 7;
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, &got, 8, nullptr, SF_ADDR_UNSPEC, 3, 0, nullptr),
      0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 42u);
  ASSERT_EQ(sf_recv(f.peers[1].ep, &got, 8, nullptr, SF_ADDR_UNSPEC, nullptr),
            0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 0u);
  EXPECT_TRUE(f.Quiet(0)) << "inject wrote a completion";
  // FI_INJECT_COMPLETE asks for one.
  int ctx = 0;
  iovec iov{&v, 8};
  sf_msg_tagged m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = f.peers[0].addr[1];
  m.tag = 4;
  m.context = &ctx;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_INJECT | SF_INJECT_COMPLETE), 0);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &ctx);
}

// Scenario 6: senddata / injectdata.
TEST_P(ConformanceTest, RemoteCqDataDelivered) {
  ASSERT_TRUE(f.Open(backend(), 2));
  char buf[8];
  ASSERT_EQ(sf_senddata(f.peers[0].ep, "abc", 4, nullptr, 0x1122334455667788,
                        f.peers[0].addr[1], nullptr),
            0);
  ASSERT_EQ(sf_tinjectdata(f.peers[0].ep, "xyz", 4, 0xFFFFFFFF00000001,
                           f.peers[0].addr[1], 8),
            0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(sf_recv(f.peers[1].ep, buf, 8, nullptr, SF_ADDR_UNSPEC, nullptr),
            0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_TRUE(e.flags & SF_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 0x1122334455667788u);
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, buf, 8, nullptr, SF_ADDR_UNSPEC, 8, 0, nullptr),
      0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_TRUE(e.flags & SF_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 0xFFFFFFFF00000001u);
}

// Scenario 7: resource exhaustion: post until -SF_EAGAIN, drain, retry.
TEST_P(ConformanceTest, EagainThenDrainThenRetry) {
  ASSERT_TRUE(f.Open(backend(), 2));
  int eagain = 0, sent = 0, received = 0;
  constexpr int kTotal = 5000;
  uint64_t next_expected = 0;
  std::vector<uint64_t> slots(16);
  int posted = 0;
  for (int round = 0; round < 1000000 && received < kTotal; ++round) {
    while (posted - received < 16 && posted < kTotal) {
      ASSERT_EQ(sf_trecv(f.peers[1].ep, &slots[posted % 16], 8, nullptr,
                         SF_ADDR_UNSPEC, 0, ~0ull, nullptr),
                0);
      ++posted;
    }
    while (sent < kTotal) {
      const uint64_t v = sent;
      const ssize_t rc = sf_tsend(f.peers[0].ep, &v, 8, nullptr,
                                  f.peers[0].addr[1], 1, nullptr);
      if (rc == -SF_EAGAIN) {
        ++eagain;
        break;
      }
      ASSERT_EQ(rc, 0) << sf_last_error();
      ++sent;
    }
    sf_cq_tagged_entry e[16];
    ssize_t n = sf_cq_read(f.peers[0].cq, e, 16);
    ASSERT_TRUE(n > 0 || n == -SF_EAGAIN);
    n = sf_cq_read(f.peers[1].cq, e, 16);
    ASSERT_TRUE(n > 0 || n == -SF_EAGAIN);
    for (ssize_t i = 0; i < n; ++i) {
      ASSERT_EQ(*static_cast<uint64_t*>(e[i].buf), next_expected++);
      ++received;
    }
  }
  EXPECT_EQ(received, kTotal);
  EXPECT_GT(eagain, 100);
}

// Scenario 8a: truncation.
TEST_P(ConformanceTest, TruncationErrorWithFullLength) {
  ASSERT_TRUE(f.Open(backend(), 2));
  for (size_t size : {size_t{600}, size_t{300000}}) {  // eager, rendezvous
    std::vector<uint8_t> out = Pattern(size, 3);
    std::vector<uint8_t> in(size / 2 + 16, 0xAB);
    int ctx = 0;
    ASSERT_EQ(sf_trecv(f.peers[1].ep, in.data(), size / 2, nullptr,
                       SF_ADDR_UNSPEC, 5, 0, &ctx),
              0);
    ASSERT_EQ(sf_tsend(f.peers[0].ep, out.data(), size, nullptr,
                       f.peers[0].addr[1], 5, nullptr),
              0);
    sf_cq_tagged_entry e;
    ASSERT_EQ(f.ReadOne(1, &e), -SF_EAVAIL);
    sf_cq_err_entry x;
    ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
    EXPECT_EQ(x.err, SF_ETRUNC);
    EXPECT_EQ(x.len + x.olen, size);
    EXPECT_EQ(std::memcmp(in.data(), out.data(), size / 2), 0);
    for (size_t i = size / 2; i < in.size(); ++i) ASSERT_EQ(in[i], 0xAB);
    ASSERT_EQ(f.ReadOne(0, &e), 1);
  }
}

// Scenario 8b: directed and wildcard receives interleave by posting order.
TEST_P(ConformanceTest, DirectedAndWildcardByPostingOrder) {
  ASSERT_TRUE(f.Open(backend(), 3, 0, SF_DIRECTED_RECV));
  sf_ep* rx = f.peers[1].ep;
  uint64_t b[3];
  int c_any = 0, c_from2 = 0, c_from0 = 0;
  ASSERT_EQ(sf_trecv(rx, &b[0], 8, nullptr, SF_ADDR_UNSPEC, 0, ~0ull, &c_any),
            0);
  ASSERT_EQ(
      sf_trecv(rx, &b[1], 8, nullptr, f.peers[1].addr[2], 0, ~0ull, &c_from2),
      0);
  ASSERT_EQ(
      sf_trecv(rx, &b[2], 8, nullptr, f.peers[1].addr[0], 0, ~0ull, &c_from0),
      0);
  const uint64_t v = 1;
  sf_cq_tagged_entry e;
  ASSERT_EQ(sf_tinject(f.peers[2].ep, &v, 8, f.peers[2].addr[1], 3), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &c_any);
  ASSERT_EQ(sf_tinject(f.peers[0].ep, &v, 8, f.peers[0].addr[1], 3), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &c_from0);
  ASSERT_EQ(sf_tinject(f.peers[2].ep, &v, 8, f.peers[2].addr[1], 3), 0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &c_from2);
}

// Scenario 8c: completion levels wait for their event.
TEST_P(ConformanceTest, CompletionLevels) {
  ASSERT_TRUE(f.Open(backend(), 2));
  uint64_t v = 1, got;
  iovec iov{&v, 8};
  int ctx = 0;
  sf_msg_tagged m{};
  m.msg_iov = &iov;
  m.iov_count = 1;
  m.addr = f.peers[0].addr[1];
  m.context = &ctx;
  m.tag = 20;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_MATCH_COMPLETE), 0);
  EXPECT_TRUE(f.Quiet(0)) << "match-complete before any receive matched";
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, &got, 8, nullptr, SF_ADDR_UNSPEC, 20, 0, nullptr),
      0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &ctx);
  // Delivery-complete needs the target's ack, not a receive.
  m.tag = 21;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_DELIVERY_COMPLETE), 0);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  // Transmit-complete (the default) and inject-complete.
  m.tag = 22;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_TRANSMIT_COMPLETE), 0);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  m.tag = 23;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_INJECT_COMPLETE), 0);
  ASSERT_EQ(sf_cq_read(f.peers[0].cq, &e, 1), 1)
      << "inject-complete is at once";
}

// Scenario 8d: zero bytes and 16 MiB.
TEST_P(ConformanceTest, ZeroAndSixteenMebibytes) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_cq_tagged_entry e;
  ASSERT_EQ(sf_tsend(f.peers[0].ep, nullptr, 0, nullptr, f.peers[0].addr[1], 1,
                     nullptr),
            0);
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, nullptr, 0, nullptr, SF_ADDR_UNSPEC, 1, 0, &e),
      0);
  sf_cq_tagged_entry got;
  ASSERT_EQ(f.ReadOne(1, &got), 1);
  EXPECT_EQ(got.len, 0u);
  const size_t big = 16u << 20;
  std::vector<uint8_t> out = Pattern(big, 9), in(big);
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in.data(), big, nullptr, SF_ADDR_UNSPEC, 2,
                     0, nullptr),
            0);
  ASSERT_EQ(sf_tsend(f.peers[0].ep, out.data(), big, nullptr,
                     f.peers[0].addr[1], 2, nullptr),
            0);
  ASSERT_EQ(f.ReadOne(1, &got), 1);
  EXPECT_EQ(got.len, big);
  EXPECT_TRUE(in == out);
}

// Scenario 9: the matrix of send calls x {msg, tagged} x sizes x
// {default, selective completion}, data verified.
enum class Call { kSend, kSendv, kSendmsg, kInject, kSenddata, kInjectdata };
const char* CallName(Call c) {
  switch (c) {
    case Call::kSend:
      return "send";
    case Call::kSendv:
      return "sendv";
    case Call::kSendmsg:
      return "sendmsg";
    case Call::kInject:
      return "inject";
    case Call::kSenddata:
      return "senddata";
    case Call::kInjectdata:
      return "injectdata";
  }
  return "?";
}

TEST_P(ConformanceTest, SendMatrix) {
  for (auto [type, selective] : {std::pair{SF_EP_RDM, false},
                                 {SF_EP_RDM, true},
                                 {SF_EP_MSG, false},
                                 {SF_EP_MSG, true}}) {
    SCOPED_TRACE(type == SF_EP_MSG ? "FI_EP_MSG" : "FI_EP_RDM");
    Fixture m;
    ASSERT_TRUE(m.Open(backend(), 2, selective ? SF_SELECTIVE_COMPLETION : 0, 0,
                       7, type));
    sf_ep_attr attr{};
    ASSERT_EQ(sf_ep_query(m.peers[0].ep, &attr), 0);
    const size_t eager = 8192;  // The default eager limit.
    const std::vector<size_t> sizes = {0,     1,         attr.inject_size,
                                       eager, eager + 1, 1u << 20};
    int case_no = 0;
    for (Call call : {Call::kSend, Call::kSendv, Call::kSendmsg, Call::kInject,
                      Call::kSenddata, Call::kInjectdata}) {
      for (bool tagged : {false, true}) {
        for (size_t size : sizes) {
          const bool inject =
              call == Call::kInject || call == Call::kInjectdata;
          if (inject && size > attr.inject_size) continue;
          SCOPED_TRACE(std::string(CallName(call)) + (tagged ? " tagged" : "") +
                       " size " + std::to_string(size) +
                       (selective ? " selective" : ""));
          ++case_no;
          std::vector<uint8_t> out = Pattern(size, case_no);
          std::vector<uint8_t> in(size + 1, 0x5C);
          const uint64_t tag = 1000 + case_no;
          const uint64_t data = 0xD000 + case_no;
          int rctx = 0, sctx = 0;
          ASSERT_EQ(tagged ? sf_trecv(m.peers[1].ep, in.data(), size, nullptr,
                                      SF_ADDR_UNSPEC, tag, 0, &rctx)
                           : sf_recv(m.peers[1].ep, in.data(), size, nullptr,
                                     SF_ADDR_UNSPEC, &rctx),
                    0);
          const sf_addr_t dest = m.peers[0].addr[1];
          sf_ep* ep = m.peers[0].ep;
          iovec iov[2] = {{out.data(), size / 2},
                          {out.data() + size / 2, size - size / 2}};
          ssize_t rc = -1;
          bool has_data = false;
          switch (call) {
            case Call::kSend:
              rc = tagged ? sf_tsend(ep, out.data(), size, nullptr, dest, tag,
                                     &sctx)
                          : sf_send(ep, out.data(), size, nullptr, dest, &sctx);
              break;
            case Call::kSendv:
              rc = tagged ? sf_tsendv(ep, iov, nullptr, 2, dest, tag, &sctx)
                          : sf_sendv(ep, iov, nullptr, 2, dest, &sctx);
              break;
            case Call::kSendmsg: {
              if (tagged) {
                sf_msg_tagged msg{iov, nullptr, 2, dest, tag, 0, &sctx, 0};
                rc = sf_tsendmsg(ep, &msg, SF_COMPLETION);
              } else {
                sf_msg msg{iov, nullptr, 2, dest, &sctx, 0};
                rc = sf_sendmsg(ep, &msg, SF_COMPLETION);
              }
              break;
            }
            case Call::kInject:
              rc = tagged ? sf_tinject(ep, out.data(), size, dest, tag)
                          : sf_inject(ep, out.data(), size, dest);
              break;
            case Call::kSenddata:
              has_data = true;
              rc = tagged ? sf_tsenddata(ep, out.data(), size, nullptr, data,
                                         dest, tag, &sctx)
                          : sf_senddata(ep, out.data(), size, nullptr, data,
                                        dest, &sctx);
              break;
            case Call::kInjectdata:
              has_data = true;
              rc = tagged
                       ? sf_tinjectdata(ep, out.data(), size, data, dest, tag)
                       : sf_injectdata(ep, out.data(), size, data, dest);
              break;
          }
          ASSERT_EQ(rc, 0) << sf_last_error();
          sf_cq_tagged_entry e;
          // Receives complete (no FI_COMPLETION given: with selective
          // completion the receive writes no entry, so check the data).
          if (!selective) {
            ASSERT_EQ(m.ReadOne(1, &e), 1);
            EXPECT_EQ(e.op_context, &rctx);
            EXPECT_EQ(e.len, size);
            EXPECT_EQ(e.flags & (SF_TAGGED | SF_MSG),
                      tagged ? SF_TAGGED : SF_MSG);
            EXPECT_EQ(!!(e.flags & SF_REMOTE_CQ_DATA), has_data);
            if (has_data) {
              EXPECT_EQ(e.data, data);
            }
          } else {
            for (int r = 0; r < 20000; ++r) m.Progress();
          }
          if (size > 0) {
            ASSERT_EQ(std::memcmp(in.data(), out.data(), size), 0);
          }
          EXPECT_EQ(in[size], 0x5C);
          // Send completion: none for inject; with selective completion only
          // sendmsg (FI_COMPLETION) writes one.
          const bool want_send_entry =
              !inject && (!selective || call == Call::kSendmsg);
          if (want_send_entry) {
            ASSERT_EQ(m.ReadOne(0, &e), 1);
            EXPECT_EQ(e.op_context, &sctx);
          }
          EXPECT_TRUE(m.Quiet(0));
          EXPECT_TRUE(m.Quiet(1));
        }
      }
    }
    // 6 calls x 2 x 6 sizes, less inject calls above inject_size (2x2x3).
    EXPECT_EQ(case_no, 60);
  }
}

// FI_EP_DGRAM: unreliable datagrams over UD; every buffer starts with the
// 40-byte FI_MSG_PREFIX, where the receiver finds the GRH.
// FI_FENCE: a fenced send waits for every earlier operation to the same
// peer. A rendezvous message (completing when its READ is done) followed by a
// small fenced one: without the fence the small one would land first.
TEST_P(ConformanceTest, FenceOrdersAfterEarlierSends) {
  ASSERT_TRUE(f.Open(backend(), 2));
  const std::vector<uint8_t> big = Pattern(1 << 20, 21), small = Pattern(8, 22);
  std::vector<uint8_t> in_big(big.size()), in_small(small.size());
  int big_ctx = 0, small_ctx = 0;
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in_big.data(), in_big.size(), nullptr,
                     SF_ADDR_UNSPEC, 1, 0, &big_ctx),
            0);
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in_small.data(), in_small.size(), nullptr,
                     SF_ADDR_UNSPEC, 2, 0, &small_ctx),
            0);
  ASSERT_EQ(sf_tsend(f.peers[0].ep, big.data(), big.size(), nullptr,
                     f.peers[0].addr[1], 1, nullptr),
            0);
  iovec iov{const_cast<uint8_t*>(small.data()), small.size()};
  sf_msg_tagged m{&iov, nullptr, 1, f.peers[0].addr[1], 2, 0, nullptr, 0};
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_FENCE), 0) << sf_last_error();
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(1, 2, &ok, &err);
  ASSERT_EQ(err.size(), 0u);
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0].op_context, &big_ctx);
  EXPECT_EQ(ok[1].op_context, &small_ctx);
  EXPECT_EQ(in_big, big);
  EXPECT_EQ(in_small, small);
}

TEST_P(ConformanceTest, DatagramsCarryTheGrhPrefix) {
  // DGRAM is unreliable by definition (UD): a lost or doubled datagram is not
  // an error, so this test runs without the fault plan in every instantiation.
  Backend b = backend();
  b.drop = b.duplicate = b.reorder = 0;
  ASSERT_TRUE(f.Open(b, 2, 0, 0, 7, SF_EP_DGRAM));
  sf_ep_attr attr{};
  ASSERT_EQ(sf_ep_query(f.peers[0].ep, &attr), 0);
  EXPECT_EQ(attr.type, SF_EP_DGRAM);
  EXPECT_EQ(attr.msg_prefix_size, 40u);
  ASSERT_GT(attr.max_msg_size, 40u);
  // The calls that apply to DGRAM (fi_msg without remote CQ data) at the
  // sizes that apply (prefix only, 1 byte, inject_size, one path MTU).
  {
    int case_no = 0;
    for (const size_t size : {size_t{0}, size_t{1}, attr.inject_size - 40,
                              attr.max_msg_size - 40}) {
      for (int call = 0; call < 4; ++call) {
        SCOPED_TRACE("call " + std::to_string(call) + " payload " +
                     std::to_string(size));
        ++case_no;
        std::vector<uint8_t> out = Pattern(40 + size, 100 + case_no);
        std::vector<uint8_t> in(40 + size + 4, 0x5C);
        int rctx = 0;
        ASSERT_EQ(sf_recv(f.peers[1].ep, in.data(), 40 + size, nullptr,
                          SF_ADDR_UNSPEC, &rctx),
                  0);
        const sf_addr_t dest = f.peers[0].addr[1];
        iovec iov[2] = {{out.data(), 40}, {out.data() + 40, size}};
        sf_msg msg{iov, nullptr, 2, dest, nullptr, 0};
        ssize_t rc = -1;
        switch (call) {
          case 0:
            rc = sf_send(f.peers[0].ep, out.data(), out.size(), nullptr, dest,
                         nullptr);
            break;
          case 1:
            rc = sf_sendv(f.peers[0].ep, iov, nullptr, 2, dest, nullptr);
            break;
          case 2:
            rc = sf_sendmsg(f.peers[0].ep, &msg, SF_COMPLETION);
            break;
          case 3:
            rc = 40 + size <= attr.inject_size
                     ? sf_inject(f.peers[0].ep, out.data(), out.size(), dest)
                     : sf_send(f.peers[0].ep, out.data(), out.size(), nullptr,
                               dest, nullptr);
            break;
        }
        ASSERT_EQ(rc, 0) << sf_last_error();
        sf_cq_tagged_entry e;
        ASSERT_EQ(f.ReadOne(1, &e), 1);
        EXPECT_EQ(e.op_context, &rctx);
        EXPECT_EQ(e.len, 40 + size);
        if (size > 0) {
          EXPECT_EQ(std::memcmp(in.data() + 40, out.data() + 40, size), 0);
        }
        EXPECT_EQ(in[40 + size], 0x5C);
        if (!(call == 3 && 40 + size <= attr.inject_size)) {
          ASSERT_EQ(f.ReadOne(0, &e), 1);  // The send's completion.
        }
      }
    }
    EXPECT_TRUE(f.Quiet(0));
    char d[64] = {};
    EXPECT_EQ(sf_senddata(f.peers[0].ep, d, sizeof d, nullptr, 7,
                          f.peers[0].addr[1], nullptr),
              -SF_ENOSYS);
    EXPECT_EQ(sf_injectdata(f.peers[0].ep, d, sizeof d, 7, f.peers[0].addr[1]),
              -SF_ENOSYS);
  }
  const size_t payload = attr.max_msg_size - 40;  // One path MTU.
  std::vector<uint8_t> out = Pattern(40 + payload, 11);
  std::vector<uint8_t> in(40 + payload + 8, 0x33);
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_recv(f.peers[1].ep, in.data(), 40 + payload, nullptr,
                    SF_ADDR_UNSPEC, &rctx),
            0);
  ASSERT_EQ(sf_send(f.peers[0].ep, out.data(), out.size(), nullptr,
                    f.peers[0].addr[1], &sctx),
            0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, 40 + payload);
  EXPECT_EQ(e.flags, SF_RECV | SF_MSG);
  // Data at offset 40; the sender's own prefix bytes are not sent. The first
  // 20 prefix bytes are undefined (RoCEv2 over IPv4): not checked.
  EXPECT_EQ(std::memcmp(in.data() + 40, out.data() + 40, payload), 0);
  EXPECT_EQ(in[40 + payload], 0x33);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &sctx);
  // No receive posted: the datagram is dropped, nothing completes.
  ASSERT_EQ(sf_inject(f.peers[0].ep, out.data(), 64, f.peers[0].addr[1]), 0);
  EXPECT_TRUE(f.Quiet(1));
  // What DGRAM refuses.
  EXPECT_EQ(sf_send(f.peers[0].ep, out.data(), 39, nullptr, f.peers[0].addr[1],
                    nullptr),
            -SF_EINVAL);  // Shorter than the prefix.
  std::vector<uint8_t> big(attr.max_msg_size + 1);
  EXPECT_EQ(sf_send(f.peers[0].ep, big.data(), big.size(), nullptr,
                    f.peers[0].addr[1], nullptr),
            -SF_EINVAL);  // Larger than a path MTU.
  EXPECT_EQ(sf_tsend(f.peers[0].ep, out.data(), 64, nullptr, f.peers[0].addr[1],
                     1, nullptr),
            -SF_ENOSYS);
  EXPECT_EQ(
      sf_recv(f.peers[1].ep, in.data(), 20, nullptr, SF_ADDR_UNSPEC, nullptr),
      -SF_EINVAL);  // No room for the prefix.
  EXPECT_TRUE(f.Quiet(0));
}

// Every public call refuses bad arguments with a clear code and no effect.
TEST_P(ConformanceTest, BadArgumentsAreRefused) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* ep = f.peers[0].ep;
  const sf_addr_t dest = f.peers[0].addr[1];
  char buf[16] = {};
  iovec iov{buf, 16};
  iovec null_iov{nullptr, 16};
  sf_msg_tagged tm{&iov, nullptr, 1, dest, 1, 0, nullptr, 0};
  sf_msg_tagged tm_bad_iov{&null_iov, nullptr, 1, dest, 1, 0, nullptr, 0};
  sf_msg m{&iov, nullptr, 1, dest, nullptr, 0};
  sf_ep* not_ep = reinterpret_cast<sf_ep*>(f.peers[0].cq);  // wrong class
  int foreign = 0;
  // Not registrations of this domain: a small non-object and another
  // domain's registration.
  void* bad_desc = &foreign;
  sf_mr* other_mr = nullptr;
  ASSERT_EQ(sf_mr_reg(f.peers[1].domain, buf, sizeof buf, SF_SEND, 0, 0, 0,
                      &other_mr, nullptr),
            0);
  void* other_desc = sf_mr_desc(other_mr);
  std::vector<uint8_t> huge(8);
  struct Case {
    const char* what;
    ssize_t got;
    ssize_t want;
  };
  const Case cases[] = {
      {"send on NULL ep", sf_send(nullptr, buf, 1, nullptr, dest, nullptr),
       -SF_EINVAL},
      {"send on a CQ", sf_send(not_ep, buf, 1, nullptr, dest, nullptr),
       -SF_EINVAL},
      {"send NULL buf len 8", sf_send(ep, nullptr, 8, nullptr, dest, nullptr),
       -SF_EINVAL},
      {"send to unknown addr", sf_send(ep, buf, 1, nullptr, 77, nullptr),
       -SF_EINVAL},
      {"send foreign desc", sf_send(ep, buf, 1, bad_desc, dest, nullptr),
       -SF_EINVAL},
      {"send other domain's desc",
       sf_send(ep, buf, 1, other_desc, dest, nullptr), -SF_EINVAL},
      {"sendv too many iov", sf_sendv(ep, &iov, nullptr, 99, dest, nullptr),
       -SF_EINVAL},
      {"sendmsg NULL msg", sf_sendmsg(ep, nullptr, 0), -SF_EINVAL},
      {"sendmsg unknown flag", sf_sendmsg(ep, &m, 1ull << 40), -SF_EINVAL},
      {"sendmsg two levels",
       sf_sendmsg(ep, &m, SF_DELIVERY_COMPLETE | SF_MATCH_COMPLETE),
       -SF_EINVAL},
      {"sendmsg multicast", sf_sendmsg(ep, &m, SF_MULTICAST), -SF_ENOSYS},
      {"inject too large", sf_inject(ep, huge.data(), 4096, dest), -SF_EINVAL},
      {"senddata NULL ep",
       sf_senddata(nullptr, buf, 1, nullptr, 1, dest, nullptr), -SF_EINVAL},
      {"injectdata unknown addr", sf_injectdata(ep, buf, 1, 1, 77), -SF_EINVAL},
      {"tsend unknown addr", sf_tsend(ep, buf, 1, nullptr, 77, 1, nullptr),
       -SF_EINVAL},
      {"tsendv NULL iov", sf_tsendv(ep, nullptr, nullptr, 1, dest, 1, nullptr),
       -SF_EINVAL},
      {"tsendmsg NULL iov base", sf_tsendmsg(ep, &tm_bad_iov, 0), -SF_EINVAL},
      {"tinject NULL ep", sf_tinject(nullptr, buf, 1, dest, 1), -SF_EINVAL},
      {"tsenddata unknown addr",
       sf_tsenddata(ep, buf, 1, nullptr, 1, 77, 1, nullptr), -SF_EINVAL},
      {"tinjectdata too large",
       sf_tinjectdata(ep, huge.data(), 4096, 1, dest, 1), -SF_EINVAL},
      {"recv NULL buf",
       sf_recv(ep, nullptr, 8, nullptr, SF_ADDR_UNSPEC, nullptr), -SF_EINVAL},
      {"recvv too many",
       sf_recvv(ep, &iov, nullptr, 99, SF_ADDR_UNSPEC, nullptr), -SF_EINVAL},
      {"recvmsg NULL", sf_recvmsg(ep, nullptr, 0), -SF_EINVAL},
      {"recvmsg bad flag", sf_recvmsg(ep, &m, SF_INJECT), -SF_EINVAL},
      {"recvmsg discard alone", sf_recvmsg(ep, &m, SF_DISCARD), -SF_EINVAL},
      {"trecv NULL ep",
       sf_trecv(nullptr, buf, 1, nullptr, SF_ADDR_UNSPEC, 1, 0, nullptr),
       -SF_EINVAL},
      {"trecvv NULL iov",
       sf_trecvv(ep, nullptr, nullptr, 1, SF_ADDR_UNSPEC, 1, 0, nullptr),
       -SF_EINVAL},
      {"trecvmsg claim unknown ctx", sf_trecvmsg(ep, &tm, SF_CLAIM),
       -SF_EINVAL},
      {"cq_read NULL", sf_cq_read(nullptr, buf, 1), -SF_EINVAL},
      {"cq_read NULL buf", sf_cq_read(f.peers[0].cq, nullptr, 1), -SF_EINVAL},
      {"cq_readfrom NULL src", sf_cq_readfrom(f.peers[0].cq, buf, 1, nullptr),
       -SF_EINVAL},
      {"cq_readerr NULL buf", sf_cq_readerr(f.peers[0].cq, nullptr, 0),
       -SF_EINVAL},
      {"cq_sread cond", sf_cq_sread(f.peers[0].cq, buf, 1, buf, 0), -SF_EINVAL},
      {"cancel unknown", sf_cancel(&ep->fid, &foreign), -SF_ENOENT},
      {"cancel NULL", sf_cancel(nullptr, nullptr), -SF_EINVAL},
      {"setopt bad level",
       sf_setopt(&ep->fid, 99, SF_OPT_MIN_MULTI_RECV, buf, 8), -SF_ENOSYS},
      {"setopt short",
       sf_setopt(&ep->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV, buf, 1),
       -SF_EINVAL},
      {"getname NULL len", sf_getname(&ep->fid, buf, nullptr), -SF_EINVAL},
      {"av_insert flags",
       sf_av_insert(f.peers[0].av, buf, 0, nullptr, 1, nullptr), -SF_EINVAL},
      {"av_lookup missing",
       [&] {
         size_t len = 64;
         return static_cast<ssize_t>(
             sf_av_lookup(f.peers[0].av, 500, buf, &len));
       }(),
       -SF_ENOENT},
      {"ep_bind after enable", sf_ep_bind(ep, &f.peers[0].cq->fid, SF_RECV),
       -SF_EOPBADSTATE},
      {"close CQ in use", sf_close(&f.peers[0].cq->fid), -SF_EBUSY},
      {"close domain in use", sf_close(&f.peers[0].domain->fid), -SF_EBUSY},
      {"close NULL", sf_close(nullptr), -SF_EINVAL},
      {"mr_reg NULL buf",
       [&] {
         sf_mr* mr = nullptr;
         return static_cast<ssize_t>(sf_mr_reg(f.peers[0].domain, nullptr, 8, 0,
                                               0, 0, 0, &mr, nullptr));
       }(),
       -SF_EINVAL},
      {"fabric verbs (not built)",
       [&] {
         sf_fabric_attr a{};
         a.backend = SF_BACKEND_VERBS;
         sf_fabric* fab = nullptr;
         return static_cast<ssize_t>(sf_fabric_open(&a, &fab, nullptr));
       }(),
       -SF_ENOSYS},
      {"srx_context NULL domain",
       [&] {
         sf_ep* x = nullptr;
         return static_cast<ssize_t>(
             sf_srx_context(nullptr, nullptr, &x, nullptr));
       }(),
       -SF_EINVAL},
      {"srx_context bad caps, mode, flags, size",
       [&] {
         sf_ep* x = nullptr;
         sf_rx_attr bad[4] = {};
         bad[0].caps = SF_MULTICAST;
         bad[1].mode = 1ull << 40;
         bad[2].op_flags = SF_COMPLETION;
         bad[3].size = (1u << 20) + 1;
         ssize_t worst = 0;
         for (const sf_rx_attr& a : bad) {
           const ssize_t rc =
               sf_srx_context(f.peers[0].domain, &a, &x, nullptr);
           if (rc != -SF_EINVAL) worst = rc == 0 ? 1 : rc;
         }
         return worst == 0 ? static_cast<ssize_t>(-SF_EINVAL) : worst;
       }(),
       -SF_EINVAL},
      {"bind a shared context to an enabled endpoint",
       [&] {
         sf_ep* x = nullptr;
         if (sf_srx_context(f.peers[0].domain, nullptr, &x, nullptr)) return 1l;
         const ssize_t rc = sf_ep_bind(ep, &x->fid, 0);
         sf_close(&x->fid);
         return static_cast<ssize_t>(rc);
       }(),
       -SF_EOPBADSTATE},
      {"endpoint with unknown mode bits",
       [&] {
         sf_ep_attr a{};
         a.type = SF_EP_RDM;
         a.mode = 1;
         sf_ep* e = nullptr;
         return static_cast<ssize_t>(
             sf_endpoint(f.peers[0].domain, &a, &e, nullptr));
       }(),
       -SF_EINVAL},
      {"DGRAM with buffered receives",
       [&] {
         sf_ep_attr a{};
         a.type = SF_EP_DGRAM;
         a.mode = SF_BUFFERED_RECV;
         sf_ep* e = nullptr;
         return static_cast<ssize_t>(
             sf_endpoint(f.peers[0].domain, &a, &e, nullptr));
       }(),
       -SF_EINVAL},
      {"setopt BUFFERED_LIMIT after enable",
       [&] {
         size_t v = 64;
         return static_cast<ssize_t>(sf_setopt(
             &ep->fid, SF_OPT_ENDPOINT, SF_OPT_BUFFERED_LIMIT, &v, sizeof v));
       }(),
       -SF_EOPBADSTATE},
      {"setopt CM_DATA_SIZE (read-only)",
       [&] {
         size_t v = 8;
         return static_cast<ssize_t>(sf_setopt(
             &ep->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE, &v, sizeof v));
       }(),
       -SF_EINVAL},
      {"endpoint RDM with a connection request",
       [&] {
         sf_ep_attr a{};
         a.type = SF_EP_RDM;
         a.info = reinterpret_cast<sf_info*>(&foreign);
         sf_ep* e = nullptr;
         return static_cast<ssize_t>(
             sf_endpoint(f.peers[0].domain, &a, &e, nullptr));
       }(),
       -SF_EINVAL},
  };
  for (const Case& c : cases) EXPECT_EQ(c.got, c.want) << c.what;
  EXPECT_EQ(sf_close(&other_mr->fid), 0);
  // None of them posted anything.
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
  EXPECT_STRNE(sf_last_error(), "");
}

SOFTFAB_INSTANTIATE_PER_BACKEND(ConformanceTest);

}  // namespace
