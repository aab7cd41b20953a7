// The conformance suite, receive side: fi_tagged(3) matching (tags, sources,
// directed and wildcard receives in posting order), unexpected messages, peek,
// claim and discard, multi-recv buffers, cancel and truncation, through the
// public sf_* API. Instantiated per backend: today the simulator, and the
// simulator again under a fault plan; the verbs issue adds Soft-RoCE (rxe), and
// a backend that cannot run in the current environment is skipped with the
// reason (tests/conformance_fixture.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;
using ::softfab::testing::TaggedMsg;

class ConformanceTest : public ::softfab::testing::PerBackendTest {
 protected:
  Fixture f;
};

// FI_OPT_MIN_MULTI_RECV of `ep`: a multi-recv buffer is released once less
// than `min_free` bytes are left.
int SetMinMultiRecv(sf_ep* ep, size_t min_free) {
  return sf_setopt(&ep->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV, &min_free,
                   sizeof min_free);
}

// Posts `iov` on `ep` as a multi-recv buffer with `context`.
ssize_t PostMultiRecv(sf_ep* ep, iovec* iov, void* context) {
  sf_msg m{};
  m.msg_iov = iov;
  m.iov_count = 1;
  m.addr = SF_ADDR_UNSPEC;
  m.context = context;
  return sf_recvmsg(ep, &m, SF_MULTI_RECV);
}

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
    return TaggedMsg(buf ? &iov : nullptr, SF_ADDR_UNSPEC, tag, ctx);
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
  ASSERT_EQ(SetMinMultiRecv(rx, min_free), 0);
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
    ASSERT_EQ(PostMultiRecv(rx, &halves[h], &ctx[h]), 0);
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
  ASSERT_EQ(PostMultiRecv(rx, &halves[0], &ctx[0]), 0);
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

// A multi-recv buffer cancelled while a rendezvous message is read into it:
// that message's entry comes first, then the cancel's, which releases the
// buffer (SF_MULTI_RECV on the last entry only). The cancel's entry came
// first, marked released, and the message's after it, marked released too
// (the api_calls fuzzer: "completed twice").
TEST_P(ConformanceTest, MultiRecvCancelledWhileReadIntoReleasesLast) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* rx = f.peers[1].ep;
  ASSERT_EQ(SetMinMultiRecv(rx, 0), 0);  // 64 bytes taken: not released
  // A rendezvous message (above 8 KiB), kept as unexpected at peer 1: a
  // tagged message sent after it on the same connection has arrived, so it
  // has too.
  std::vector<uint8_t> out(16384, 0x5a);
  ASSERT_EQ(sf_send(f.peers[0].ep, out.data(), out.size(), nullptr,
                    f.peers[0].addr[1], nullptr),
            0);
  uint64_t marker = 0;
  ASSERT_EQ(sf_trecv(rx, &marker, sizeof marker, nullptr, SF_ADDR_UNSPEC, 9, 0,
                     nullptr),
            0);
  const uint64_t seven = 7;
  ASSERT_EQ(
      sf_tinject(f.peers[0].ep, &seven, sizeof seven, f.peers[0].addr[1], 9),
      0);
  sf_cq_tagged_entry first;
  ASSERT_EQ(f.ReadOne(1, &first), 1);
  ASSERT_EQ(marker, 7u);
  // The buffer takes it at once (a READ of its 64 bytes); cancelled before
  // that READ is done.
  std::vector<uint8_t> buffer(64);
  iovec iov{buffer.data(), buffer.size()};
  int ctx = 0;
  ASSERT_EQ(PostMultiRecv(rx, &iov, &ctx), 0);
  ASSERT_EQ(sf_cancel(&rx->fid, &ctx), 0);
  // Both are error entries (Collect keeps them in order), no success.
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> got;
  f.Collect(1, 2, &ok, &got);
  ASSERT_TRUE(ok.empty());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].op_context, &ctx);
  EXPECT_EQ(got[0].err, SF_ETRUNC);  // 64 of 16,384 bytes
  EXPECT_EQ(got[0].len, buffer.size());
  EXPECT_EQ(got[0].olen, out.size() - buffer.size());
  EXPECT_FALSE(got[0].flags & SF_MULTI_RECV);
  EXPECT_EQ(got[1].op_context, &ctx);
  EXPECT_EQ(got[1].err, SF_ECANCELED);
  EXPECT_TRUE(got[1].flags & SF_MULTI_RECV);
  EXPECT_EQ(buffer[0], 0x5a);
  EXPECT_TRUE(f.Quiet(1));
}

// A multi-recv buffer posted while the CQ has room for only some of the
// messages kept for it: it takes those, and the rest, oldest first, as the
// application reads entries, before any message that arrives later. The
// later ones went in first, and the rest stayed kept until another receive
// came.
TEST_P(ConformanceTest, MultiRecvTakesKeptMessagesBeforeLaterOnes) {
  f.cq_size = 8;
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* rx = f.peers[1].ep;
  ASSERT_EQ(SetMinMultiRecv(rx, 100), 0);
  // Four tagged messages' entries left unread at peer 1.
  constexpr int kTagged = 4;
  uint64_t tagged_in[kTagged] = {};
  for (int i = 0; i < kTagged; ++i) {
    ASSERT_EQ(
        sf_trecv(rx, &tagged_in[i], 8, nullptr, SF_ADDR_UNSPEC, 7, 0, nullptr),
        0);
    const uint64_t v = i;
    ASSERT_EQ(sf_tinject(f.peers[0].ep, &v, 8, f.peers[0].addr[1], 7), 0);
    for (int r = 0; r < 1000; ++r) f.Progress();
  }
  // Six untagged 100-byte messages, kept (no receive yet); a tagged one
  // sent after them has arrived, so they have too.
  constexpr int kKept = 6, kLater = 2, kMsg = 100;
  auto send = [&](int i) {  // retried while peer 0's small CQ is full
    std::vector<uint8_t> v(kMsg, static_cast<uint8_t>(i + 1));
    ssize_t rc = -SF_EAGAIN;
    for (int r = 0; r < 400000 && rc == -SF_EAGAIN; ++r) {
      rc = sf_inject(f.peers[0].ep, v.data(), v.size(), f.peers[0].addr[1]);
      if (rc == -SF_EAGAIN) f.Progress();
    }
    return rc;
  };
  for (int i = 0; i < kKept; ++i) ASSERT_EQ(send(i), 0) << i;
  uint64_t marker = 0;
  ASSERT_EQ(sf_trecv(rx, &marker, 8, nullptr, SF_ADDR_UNSPEC, 9, 0, nullptr),
            0);
  const uint64_t nine = 9;
  ASSERT_EQ(sf_tinject(f.peers[0].ep, &nine, 8, f.peers[0].addr[1], 9), 0);
  for (int r = 0; r < 400000 && marker != 9; ++r) f.Progress();
  ASSERT_EQ(marker, 9u);
  // The buffer: the CQ (8) holds 5 entries and the buffer's reservation,
  // so it takes one or two kept messages now.
  std::vector<uint8_t> buffer(4096);
  iovec iov{buffer.data(), buffer.size()};
  int ctx = 0;
  ASSERT_EQ(PostMultiRecv(rx, &iov, &ctx), 0);
  // Two entries read make room; a plain receive posted then comes after
  // the buffer, which takes kept messages into that room first: the CQ is
  // full again and the receive is refused (before, it took the oldest kept
  // message, ahead of the buffer posted before it).
  sf_cq_tagged_entry two[2];
  ASSERT_EQ(sf_cq_read(f.peers[1].cq, two, 2), 2);
  std::vector<uint8_t> plain(kMsg, 0);
  ASSERT_EQ(
      sf_recv(rx, plain.data(), plain.size(), nullptr, SF_ADDR_UNSPEC, nullptr),
      -SF_EAGAIN);
  // Two more, sent while the buffer waits for room.
  for (int i = kKept; i < kKept + kLater; ++i) ASSERT_EQ(send(i), 0) << i;
  for (int r = 0; r < 1000; ++r) f.Progress();
  // Reading makes room: every untagged message lands in the buffer in the
  // order it was sent.
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(1, kTagged + 1 + kKept + kLater - 2, &ok, &err);
  ASSERT_TRUE(err.empty());
  int untagged = 0;
  for (const sf_cq_tagged_entry& e : ok) {
    if (e.op_context != &ctx) continue;
    EXPECT_EQ(e.len, size_t{kMsg});
    EXPECT_EQ(e.buf, buffer.data() + kMsg * untagged) << untagged;
    EXPECT_EQ(buffer[kMsg * untagged], untagged + 1) << "message " << untagged;
    ++untagged;
  }
  EXPECT_EQ(untagged, kKept + kLater);
  EXPECT_TRUE(f.Quiet(1));
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

SOFTFAB_INSTANTIATE_PER_BACKEND(ConformanceTest);

}  // namespace
