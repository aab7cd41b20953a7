// The messaging core on the simulated fabric: tagged and untagged messages,
// matching order, unexpected messages, truncation, credits and EAGAIN.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/event_queue.h"
#include "tests/messaging_harness.h"
#include "tests/test_pattern.h"

namespace softfab::testing {
namespace {

using core::CqEntry;
using core::CqErrEntry;

TEST(MessagingTest, TaggedMessageBothWays) {
  Cluster c(2);
  char out[] = "hello from node 0";
  char in[64] = {};
  iovec siov, riov;
  int sctx = 0, rctx = 0;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(in, sizeof in, 42, 0, &rctx, &riov)).ok());
  ASSERT_TRUE(
      c[0].ep->Send(TSend(out, sizeof out, c[0].addr[1], 42, &sctx, &siov))
          .ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, sizeof out);
  EXPECT_EQ(e.tag, 42u);
  EXPECT_EQ(e.flags, core::kRecv | core::kTagged);
  EXPECT_EQ(e.src_addr, c[1].addr[0]);
  EXPECT_STREQ(in, out);
  ASSERT_EQ(c.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &sctx);
  EXPECT_EQ(e.flags, core::kSend | core::kTagged);

  // And back, on the connection node 0 opened.
  char back[] = "reply";
  char got[16] = {};
  ASSERT_TRUE(c[0].ep->Recv(TRecv(got, sizeof got, 7, 0, &rctx, &riov)).ok());
  ASSERT_TRUE(
      c[1].ep->Send(TSend(back, sizeof back, c[1].addr[0], 7, &sctx, &siov))
          .ok());
  ASSERT_EQ(c.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_STREQ(got, "reply");
}

// Drains node i's CQ into `entries`/`errors` until `want` completions came.
void Collect(Cluster& c, int i, size_t want, std::vector<CqEntry>* entries,
             std::vector<CqErrEntry>* errors) {
  for (int round = 0; round < 200000 && entries->size() + errors->size() < want;
       ++round) {
    c.ProgressAll();
    CqEntry e;
    const int n = c[i].cq->Read(&e, 1);
    if (n == 1) {
      entries->push_back(e);
    } else if (n == -core::CompletionQueue::kErrAvail) {
      CqErrEntry x;
      ASSERT_TRUE(c[i].cq->ReadError(&x).ok());
      errors->push_back(x);
    }
  }
  ASSERT_EQ(entries->size() + errors->size(), want);
}

// Scenario 1: n tagged sends before any receive; receives posted in reverse
// tag order; every byte verified.
TEST(MessagingTest, UnexpectedMessagesReceivedInReverseTagOrder) {
  Cluster c(2);
  constexpr int kCount = 40;
  std::vector<std::vector<uint8_t>> payloads(kCount);
  iovec iov;
  for (int i = 0; i < kCount; ++i) {
    payloads[i].resize(100 + 37 * i);
    for (size_t b = 0; b < payloads[i].size(); ++b) {
      payloads[i][b] = static_cast<uint8_t>(i * 31 + b);
    }
    ASSERT_TRUE(c[0].ep
                    ->Send(TSend(payloads[i].data(), payloads[i].size(),
                                 c[0].addr[1], 1000 + i, nullptr, &iov))
                    .ok());
  }
  std::vector<CqEntry> sent;
  std::vector<CqErrEntry> errs;
  Collect(c, 0, kCount, &sent, &errs);
  EXPECT_TRUE(errs.empty());
  EXPECT_EQ(c[1].ep->stats().unexpected, static_cast<uint64_t>(kCount));
  for (int i = kCount - 1; i >= 0; --i) {
    std::vector<uint8_t> buf(payloads[i].size() + 16, 0xEE);
    ASSERT_TRUE(c[1].ep
                    ->Recv(TRecv(buf.data(), buf.size(), 1000 + i, 0,
                                 &payloads[i], &iov))
                    .ok());
    CqEntry e;
    ASSERT_EQ(c.ReadOne(1, &e), 1);
    EXPECT_EQ(e.op_context, &payloads[i]);
    ASSERT_EQ(e.len, payloads[i].size());
    EXPECT_EQ(e.tag, static_cast<uint64_t>(1000 + i));
    EXPECT_EQ(std::memcmp(buf.data(), payloads[i].data(), e.len), 0);
    EXPECT_EQ(buf[e.len], 0xEE) << "wrote past the message";
  }
}

TEST(MessagingTest, WildcardAndDirectedInterleaveByPostingOrder) {
  core::EndpointAttr attr;
  attr.caps = core::kDirectedRecv;
  Cluster c(3, {}, attr);
  char a[8], b[8], d[8];
  iovec i1, i2, i3, s1;
  int ctx_any = 0, ctx_from2 = 0, ctx_from1 = 0;
  // Posted: any source (tag 5, ignore low bit), then directed at node 2, then
  // directed at node 1.
  core::RecvArgs any = TRecv(a, 8, 4, 1, &ctx_any, &i1);
  core::RecvArgs from2 = TRecv(b, 8, 5, 0, &ctx_from2, &i2);
  from2.src = c[1].addr[2];
  core::RecvArgs from1 = TRecv(d, 8, 5, 0, &ctx_from1, &i3);
  from1.src = c[1].addr[0];
  ASSERT_TRUE(c[1].ep->Recv(any).ok());
  ASSERT_TRUE(c[1].ep->Recv(from2).ok());
  ASSERT_TRUE(c[1].ep->Recv(from1).ok());
  // Node 0 sends tag 5: the earlier wildcard wins over the directed one.
  ASSERT_TRUE(
      c[0].ep->Send(TSend("x0", 3, c[0].addr[1], 5, nullptr, &s1)).ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_any);
  // Node 0 again: only the receive directed at node 0 is left for it.
  ASSERT_TRUE(
      c[0].ep->Send(TSend("x1", 3, c[0].addr[1], 5, nullptr, &s1)).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_from1);
  // Node 2 takes the one directed at it.
  ASSERT_TRUE(
      c[2].ep->Send(TSend("x2", 3, c[2].addr[1], 5, nullptr, &s1)).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &ctx_from2);
  EXPECT_EQ(e.src_addr, c[1].addr[2]);
}

TEST(MessagingTest, TruncationReportsErrorAndWritesNothingPastTheBuffer) {
  Cluster c(2);
  std::vector<uint8_t> big(1000, 0x5A);
  std::vector<uint8_t> small(100 + 8, 0x11);  // 8 guard bytes.
  iovec s, r;
  int ctx = 0;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(small.data(), 100, 9, 0, &ctx, &r)).ok());
  ASSERT_TRUE(
      c[0].ep->Send(TSend(big.data(), big.size(), c[0].addr[1], 9, nullptr, &s))
          .ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), -core::CompletionQueue::kErrAvail);
  CqErrEntry x;
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  EXPECT_EQ(x.err, kErrTruncated);
  EXPECT_EQ(x.op_context, &ctx);
  EXPECT_EQ(x.len, 100u);
  EXPECT_EQ(x.len + x.olen, big.size());
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(small[i], 0x5A);
  for (size_t i = 100; i < small.size(); ++i) ASSERT_EQ(small[i], 0x11);
}

// Scenario 2: peek, claim and discard.
TEST(MessagingTest, PeekClaimDiscard) {
  Cluster c(2);
  iovec s;
  const uint64_t dest = c[0].addr[1];
  for (uint64_t tag : {1, 2, 3, 4}) {
    uint64_t v = tag * 111;
    ASSERT_TRUE(c[0].ep->Send(TSend(&v, 8, dest, tag, nullptr, &s)).ok());
  }
  std::vector<CqEntry> sent;
  std::vector<CqErrEntry> errs;
  Collect(c, 0, 4, &sent, &errs);
  ASSERT_TRUE(errs.empty());

  auto post = [&](uint64_t tag, uint64_t flags, void* ctx, uint64_t* buf) {
    iovec r;
    core::RecvArgs a = TRecv(buf, buf ? 8 : 0, tag, 0, ctx, &r);
    if (!buf) a.iov_count = 0;
    a.flags = flags;
    return c[1].ep->Recv(a);
  };
  CqEntry e;
  CqErrEntry x;
  int ctx = 0;
  // Peek of an absent tag: FI_ENOMSG. PEEK|CLAIM of an absent tag: same.
  ASSERT_TRUE(post(99, core::kPeek, &ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), -core::CompletionQueue::kErrAvail);
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  EXPECT_EQ(x.err, kErrNoMessage);
  ASSERT_TRUE(post(99, core::kPeek | core::kClaim, &ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), -core::CompletionQueue::kErrAvail);
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  EXPECT_EQ(x.err, kErrNoMessage);
  // Peek finds tag 1 and leaves it.
  ASSERT_TRUE(post(1, core::kPeek, &ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.tag, 1u);
  EXPECT_EQ(e.len, 8u);
  ASSERT_TRUE(post(1, core::kPeek, &ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  // PEEK|CLAIM, then CLAIM with the same context returns the data.
  int claim_ctx = 0;
  ASSERT_TRUE(post(1, core::kPeek | core::kClaim, &claim_ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  ASSERT_TRUE(post(1, core::kPeek, &ctx, nullptr).ok());  // Claimed: gone.
  ASSERT_EQ(c.ReadOne(1, &e), -core::CompletionQueue::kErrAvail);
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  EXPECT_EQ(x.err, kErrNoMessage);
  uint64_t got = 0;
  ASSERT_TRUE(post(0, core::kClaim, &claim_ctx, &got).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 111u);
  EXPECT_TRUE(e.flags & core::kClaim);
  // PEEK|DISCARD, then a peek finds nothing.
  ASSERT_TRUE(post(2, core::kPeek | core::kDiscard, &ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  ASSERT_TRUE(post(2, core::kPeek, &ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), -core::CompletionQueue::kErrAvail);
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  EXPECT_EQ(x.err, kErrNoMessage);
  // PEEK|CLAIM then CLAIM|DISCARD.
  int ctx3 = 0;
  ASSERT_TRUE(post(3, core::kPeek | core::kClaim, &ctx3, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  ASSERT_TRUE(post(0, core::kClaim | core::kDiscard, &ctx3, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  ASSERT_TRUE(post(3, core::kPeek, &ctx, nullptr).ok());
  ASSERT_EQ(c.ReadOne(1, &e), -core::CompletionQueue::kErrAvail);
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  // The rest is received normally.
  ASSERT_TRUE(post(4, 0, &ctx, &got).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 444u);
}

// Scenario 3: one multi-recv buffer posted as two halves.
TEST(MessagingTest, MultiRecvHalvesCompleteAndRelease) {
  Cluster c(2);
  ASSERT_TRUE(c[1].ep->SetMinMultiRecv(64).ok());
  std::vector<uint8_t> buffer(2 * 512);
  iovec r0, r1;
  int half0 = 0, half1 = 1;
  core::RecvArgs a0, a1;
  a0.iov = &r0;
  a0.iov_count = 1;
  r0 = {buffer.data(), 512};
  a0.context = &half0;
  a0.flags = core::kMultiRecv;
  a1 = a0;
  a1.iov = &r1;
  r1 = {buffer.data() + 512, 512};
  a1.context = &half1;
  ASSERT_TRUE(c[1].ep->Recv(a0).ok());
  ASSERT_TRUE(c[1].ep->Recv(a1).ok());
  // 100-byte messages: a half takes 5 (500 bytes, 12 left < 64) and is
  // released with the 5th; 10 messages fill both halves.
  std::vector<uint8_t> msg(100);
  for (int i = 0; i < 10; ++i) {
    std::fill(msg.begin(), msg.end(), static_cast<uint8_t>(i));
    core::SendArgs a;
    iovec v{msg.data(), msg.size()};
    a.iov = &v;
    a.iov_count = 1;
    a.dest = c[0].addr[1];
    ASSERT_TRUE(c[0].ep->Send(a).ok());
    CqEntry e;
    ASSERT_EQ(c.ReadOne(0, &e), 1);
  }
  std::vector<CqEntry> got;
  std::vector<CqErrEntry> errs;
  Collect(c, 1, 10, &got, &errs);
  ASSERT_TRUE(errs.empty());
  int released = 0;
  for (int i = 0; i < 10; ++i) {
    const CqEntry& e = got[i];
    void* want_ctx = i < 5 ? &half0 : &half1;
    EXPECT_EQ(e.op_context, want_ctx) << i;
    EXPECT_EQ(e.len, 100u);
    uint8_t* base = buffer.data() + (i < 5 ? 0 : 512);
    EXPECT_EQ(static_cast<uint8_t*>(e.buf), base + 100 * (i % 5)) << i;
    EXPECT_EQ(*static_cast<uint8_t*>(e.buf), i);
    if (e.flags & core::kMultiRecv) {
      ++released;
      EXPECT_EQ(i % 5, 4) << "released after exactly 5 messages";
    }
  }
  EXPECT_EQ(released, 2);
  // Reposting the first half works.
  ASSERT_TRUE(c[1].ep->Recv(a0).ok());
  core::SendArgs a;
  iovec v{msg.data(), 10};
  a.iov = &v;
  a.iov_count = 1;
  a.dest = c[0].addr[1];
  ASSERT_TRUE(c[0].ep->Send(a).ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &half0);
  EXPECT_EQ(e.buf, buffer.data());
}

// Scenario 4: cancel.
TEST(MessagingTest, CancelReportsEcanceledAndOthersStillArrive) {
  Cluster c(2);
  uint64_t b1 = 0, b2 = 0;
  iovec r1, r2, s;
  int ctx1 = 0, ctx2 = 0;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(&b1, 8, 1, 0, &ctx1, &r1)).ok());
  ASSERT_TRUE(c[1].ep->Recv(TRecv(&b2, 8, 2, 0, &ctx2, &r2)).ok());
  ASSERT_TRUE(c[1].ep->Cancel(&ctx1).ok());
  EXPECT_EQ(c[1].ep->Cancel(&ctx1).code(), ENOENT);
  CqEntry e;
  ASSERT_EQ(c[1].cq->Read(&e, 1), -core::CompletionQueue::kErrAvail);
  CqErrEntry x;
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  EXPECT_EQ(x.err, ECANCELED);
  EXPECT_EQ(x.op_context, &ctx1);
  uint64_t v = 77;
  ASSERT_TRUE(c[0].ep->Send(TSend(&v, 8, c[0].addr[1], 2, nullptr, &s)).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &ctx2);
  EXPECT_EQ(b2, 77u);
  // Tag 1 now goes to the unexpected queue: no further entries.
  ASSERT_TRUE(c[0].ep->Send(TSend(&v, 8, c[0].addr[1], 1, nullptr, &s)).ok());
  for (int i = 0; i < 1000; ++i) c.ProgressAll();
  EXPECT_EQ(c[1].cq->Read(&e, 1), -EAGAIN);
  EXPECT_EQ(b1, 0u);
}

TEST(MessagingTest, CancelledMultiRecvIsReleasedAndItsSlotReused) {
  core::EndpointAttr attr;
  attr.rx_size = 1;  // One receive slot: a leak would show at the next post.
  Cluster c(2, {}, attr);
  std::vector<uint8_t> buffer(1 << 16);
  iovec r;
  int ctx = 0;
  const core::RecvArgs a = MultiRecv(buffer.data(), buffer.size(), &ctx, &r);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(c[1].ep->Recv(a).ok()) << "round " << round;
    ASSERT_TRUE(c[1].ep->Cancel(&ctx).ok());
    CqEntry e;
    ASSERT_EQ(c[1].cq->Read(&e, 1), -core::CompletionQueue::kErrAvail);
    CqErrEntry x;
    ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
    EXPECT_EQ(x.err, ECANCELED);
    EXPECT_TRUE(x.flags & core::kMultiRecv) << "release not reported";
    EXPECT_EQ(c[1].cq->Read(&e, 1), -EAGAIN);
  }
}

// Scenario 5: inject.
TEST(MessagingTest, InjectCopiesAndWritesNoCompletion) {
  Cluster c(2);
  uint64_t v = 1234, got = 0;
  iovec s, r;
  int ctx = 0;
  core::SendArgs a = TSend(&v, 8, c[0].addr[1], 3, &ctx, &s);
  a.flags = core::kInject;
  ASSERT_TRUE(c[0].ep->Send(a).ok());
  v = 9999;  // Overwritten right after the call.
  ASSERT_TRUE(c[1].ep->Recv(TRecv(&got, 8, 3, 0, &ctx, &r)).ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 1234u);
  EXPECT_EQ(c[0].cq->Read(&e, 1), -EAGAIN) << "inject wrote a completion";
  // With FI_INJECT_COMPLETE the entry comes, at once.
  a.flags = core::kInject | core::kInjectComplete;
  ASSERT_TRUE(c[0].ep->Send(a).ok());
  ASSERT_EQ(c[0].cq->Read(&e, 1), 1);
  EXPECT_EQ(e.op_context, &ctx);
  // Larger than inject_size: refused, nothing posted.
  std::vector<uint8_t> big(c[0].ep->attr().inject_size + 1);
  core::SendArgs b = TSend(big.data(), big.size(), c[0].addr[1], 3, &ctx, &s);
  b.flags = core::kInject;
  EXPECT_EQ(c[0].ep->Send(b).code(), EINVAL);
}

// Scenario 6: remote CQ data, all 64 bits.
TEST(MessagingTest, RemoteCqDataArrivesWithTheFlag) {
  Cluster c(2);
  uint64_t got = 0;
  iovec s, r;
  core::SendArgs a = TSend("", 0, c[0].addr[1], 8, nullptr, &s);
  a.iov_count = 0;
  a.flags = core::kRemoteCqData;
  a.data = 0xFEEDFACECAFEBEEFull;
  ASSERT_TRUE(c[0].ep->Send(a).ok());
  ASSERT_TRUE(c[1].ep->Recv(TRecv(&got, 8, 8, 0, nullptr, &r)).ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_TRUE(e.flags & core::kRemoteCqData);
  EXPECT_EQ(e.data, 0xFEEDFACECAFEBEEFull);
  EXPECT_EQ(e.len, 0u);
}

// Scenario 7: a sender driven into EAGAIN thousands of times completes.
TEST(MessagingTest, EagainUnderCreditExhaustionMakesProgress) {
  core::EndpointAttr attr;
  attr.credits = 8;
  attr.tx_size = 16;
  Cluster c(2, {}, attr);
  constexpr int kMessages = 10000;
  int sent = 0, received = 0, eagains = 0;
  uint64_t expect = 0;
  std::vector<uint64_t> rbuf(64);
  std::vector<iovec> riov(64);
  int posted = 0;
  for (int round = 0; round < 2000000 && received < kMessages; ++round) {
    // The receiver posts slowly: at most 4 receives outstanding.
    while (posted - received < 4 && posted < kMessages) {
      const int slot = posted % 64;
      ASSERT_TRUE(c[1].ep
                      ->Recv(TRecv(&rbuf[slot], 8, 0, ~uint64_t{0}, nullptr,
                                   &riov[slot]))
                      .ok());
      ++posted;
    }
    // The sender pushes as hard as it can.
    for (int burst = 0; burst < 32 && sent < kMessages; ++burst) {
      iovec s;
      uint64_t v = sent;
      Status st = c[0].ep->Send(TSend(&v, 8, c[0].addr[1], 1, nullptr, &s));
      if (!st.ok()) {
        ASSERT_EQ(st.code(), EAGAIN) << st.message();
        ++eagains;
        break;
      }
      ++sent;
    }
    CqEntry e[8];
    int n = c[0].cq->Read(e, 8);
    ASSERT_TRUE(n > 0 || n == -EAGAIN) << n;
    n = c[1].cq->Read(e, 8);
    ASSERT_TRUE(n > 0 || n == -EAGAIN) << n;
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(*static_cast<uint64_t*>(e[i].buf), expect++);
      ++received;
    }
  }
  EXPECT_EQ(received, kMessages);
  EXPECT_GT(eagains, 2000) << "the test did not exhaust credits";
  EXPECT_EQ(c[1].ep->stats().bad_headers, 0u);
  EXPECT_EQ(c.fabric().stats().rnr_naks, 0u) << "the core provoked RNR";
}

TEST(MessagingTest, CompletionLevelsWaitForTheirEvent) {
  Cluster c(2);
  iovec s, r;
  uint64_t v = 5, got = 0;
  int ctx = 0;
  // Match-complete: no send completion while the message sits unexpected.
  core::SendArgs a = TSend(&v, 8, c[0].addr[1], 11, &ctx, &s);
  a.flags = core::kMatchComplete;
  ASSERT_TRUE(c[0].ep->Send(a).ok());
  CqEntry e;
  for (int i = 0; i < 2000; ++i) c.ProgressAll();
  EXPECT_EQ(c[1].ep->stats().unexpected, 1u);
  EXPECT_EQ(c[0].cq->Read(&e, 1), -EAGAIN);
  ASSERT_TRUE(c[1].ep->Recv(TRecv(&got, 8, 11, 0, nullptr, &r)).ok());
  ASSERT_EQ(c.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &ctx);
  // Delivery-complete: completes once the target buffered it, unmatched.
  a.tag = 12;
  a.flags = core::kDeliveryComplete;
  ASSERT_TRUE(c[0].ep->Send(a).ok());
  ASSERT_EQ(c.ReadOne(0, &e), 1);
  EXPECT_EQ(c[1].ep->stats().unexpected, 2u);
}

TEST(MessagingTest, UntaggedMessagesMatchInOrder) {
  Cluster c(2);
  iovec s, r1, r2;
  char b1[8] = {}, b2[8] = {};
  core::RecvArgs a1 = TRecv(b1, 8, 0, 0, nullptr, &r1);
  a1.tagged = false;
  core::RecvArgs a2 = TRecv(b2, 8, 0, 0, nullptr, &r2);
  a2.tagged = false;
  ASSERT_TRUE(c[1].ep->Recv(a1).ok());
  ASSERT_TRUE(c[1].ep->Recv(a2).ok());
  for (const char* m : {"one", "two"}) {
    core::SendArgs a = TSend(m, 4, c[0].addr[1], 0, nullptr, &s);
    a.tagged = false;
    ASSERT_TRUE(c[0].ep->Send(a).ok());
  }
  std::vector<CqEntry> got;
  std::vector<CqErrEntry> errs;
  Collect(c, 1, 2, &got, &errs);
  EXPECT_STREQ(b1, "one");
  EXPECT_STREQ(b2, "two");
  EXPECT_EQ(got[0].flags, core::kRecv | core::kMsg);
}

TEST(MessagingTest, BadArgumentsAreRefusedWithoutSideEffects) {
  Cluster c(2);
  iovec s{nullptr, 8};
  core::SendArgs a;
  a.iov = &s;
  a.iov_count = 1;
  a.dest = c[0].addr[1];
  EXPECT_EQ(c[0].ep->Send(a).code(), EINVAL);  // Null buffer, length 8.
  a.iov_count = 0;
  a.dest = 999;
  EXPECT_EQ(c[0].ep->Send(a).code(), EINVAL);  // Unknown destination.
  a.dest = c[0].addr[1];
  a.flags = 1ull << 40;
  EXPECT_EQ(c[0].ep->Send(a).code(), EINVAL);  // Unknown flag.
  a.flags = core::kMulticast;
  EXPECT_EQ(c[0].ep->Send(a).code(), ENOSYS);
  a.flags = core::kDeliveryComplete | core::kMatchComplete;
  EXPECT_EQ(c[0].ep->Send(a).code(), EINVAL);
  std::vector<uint8_t> big(c[0].ep->max_msg_size() + 1);
  iovec bi{big.data(), big.size()};
  a.iov = &bi;
  a.iov_count = 1;
  a.flags = 0;
  EXPECT_EQ(c[0].ep->Send(a).code(), EINVAL);
  core::RecvArgs r;
  r.flags = core::kDiscard;
  r.tagged = true;
  EXPECT_EQ(c[1].ep->Recv(r).code(), EINVAL);
  r.flags = core::kMultiRecv;  // No buffer.
  EXPECT_EQ(c[1].ep->Recv(r).code(), EINVAL);
  // Nothing was posted or completed.
  CqEntry e;
  for (int i = 0; i < 100; ++i) c.ProgressAll();
  EXPECT_EQ(c[0].cq->Read(&e, 1), -EAGAIN);
  EXPECT_EQ(c[1].cq->Read(&e, 1), -EAGAIN);
  EXPECT_EQ(c[0].ep->stats().cm_requests, 0u);
}

using ::softfab::testing::Pattern;

TEST(MessagingTest, RendezvousMovesSixteenMebibytesBothOrders) {
  Cluster c(2);
  const size_t kBytes = 16u << 20;
  for (bool receive_first : {true, false}) {
    SCOPED_TRACE(receive_first ? "receive posted first" : "unexpected");
    std::vector<uint8_t> out = Pattern(kBytes, receive_first ? 1 : 2);
    std::vector<uint8_t> in(kBytes + 64, 0xC3);
    iovec s, r;
    int sctx = 0, rctx = 0;
    auto post_recv = [&] {
      ASSERT_TRUE(
          c[1].ep->Recv(TRecv(in.data(), kBytes, 77, 0, &rctx, &r)).ok());
    };
    if (receive_first) post_recv();
    ASSERT_TRUE(
        c[0].ep
            ->Send(TSend(out.data(), out.size(), c[0].addr[1], 77, &sctx, &s))
            .ok());
    CqEntry e;
    if (!receive_first) {
      for (int i = 0; i < 1000; ++i) c.ProgressAll();
      // Not complete before the target has read it.
      EXPECT_EQ(c[0].cq->Read(&e, 1), -EAGAIN);
      post_recv();
    }
    ASSERT_EQ(c.ReadOne(1, &e), 1);
    EXPECT_EQ(e.op_context, &rctx);
    ASSERT_EQ(e.len, kBytes);
    EXPECT_EQ(std::memcmp(in.data(), out.data(), kBytes), 0);
    for (size_t i = kBytes; i < in.size(); ++i) ASSERT_EQ(in[i], 0xC3);
    ASSERT_EQ(c.ReadOne(0, &e), 1);
    EXPECT_EQ(e.op_context, &sctx);
  }
}

TEST(MessagingTest, RendezvousTruncatesAndVectoredSendsGather) {
  Cluster c(2);
  const size_t eager = c[0].ep->attr().eager_max;
  // Three pieces, together over the eager limit.
  std::vector<uint8_t> a = Pattern(eager, 3), b = Pattern(100, 4),
                       d = Pattern(eager / 2, 5);
  iovec pieces[3] = {
      {a.data(), a.size()}, {b.data(), b.size()}, {d.data(), d.size()}};
  core::SendArgs sa;
  sa.iov = pieces;
  sa.iov_count = 3;
  sa.dest = c[0].addr[1];
  sa.tag = 5;
  sa.tagged = true;
  const size_t total = a.size() + b.size() + d.size();
  const size_t room = eager + 10;  // Smaller than the message.
  std::vector<uint8_t> in(room + 32, 0x77);
  iovec r;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(in.data(), room, 5, 0, nullptr, &r)).ok());
  ASSERT_TRUE(c[0].ep->Send(sa).ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), -core::CompletionQueue::kErrAvail);
  CqErrEntry x;
  ASSERT_TRUE(c[1].cq->ReadError(&x).ok());
  EXPECT_EQ(x.err, kErrTruncated);
  EXPECT_EQ(x.len, room);
  EXPECT_EQ(x.len + x.olen, total);
  EXPECT_EQ(std::memcmp(in.data(), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(in.data() + a.size(), b.data(), 10), 0);
  for (size_t i = room; i < in.size(); ++i) ASSERT_EQ(in[i], 0x77);
  ASSERT_EQ(c.ReadOne(0, &e), 1);  // The sender completes all the same.
}

TEST(MessagingTest, RendezvousPeekClaimAndDiscard) {
  Cluster c(2);
  const size_t kBytes = 100000;
  std::vector<uint8_t> m1 = Pattern(kBytes, 6), m2 = Pattern(kBytes, 7);
  iovec s;
  int ctx1 = 0, ctx2 = 0;
  ASSERT_TRUE(
      c[0].ep->Send(TSend(m1.data(), kBytes, c[0].addr[1], 1, &ctx1, &s)).ok());
  ASSERT_TRUE(
      c[0].ep->Send(TSend(m2.data(), kBytes, c[0].addr[1], 2, &ctx2, &s)).ok());
  for (int i = 0; i < 1000; ++i) c.ProgressAll();
  // Peek reports the length, no data.
  iovec r;
  int claim = 0;
  core::RecvArgs peek = TRecv(nullptr, 0, 1, 0, &claim, &r);
  peek.iov_count = 0;
  peek.flags = core::kPeek | core::kClaim;
  ASSERT_TRUE(c[1].ep->Recv(peek).ok());
  CqEntry e;
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_EQ(e.len, kBytes);
  EXPECT_EQ(e.buf, nullptr);
  // Claim reads it into the buffer.
  std::vector<uint8_t> in(kBytes);
  core::RecvArgs take = TRecv(in.data(), kBytes, 0, 0, &claim, &r);
  take.flags = core::kClaim;
  ASSERT_TRUE(c[1].ep->Recv(take).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  EXPECT_TRUE(e.flags & core::kClaim);
  EXPECT_EQ(e.len, kBytes);
  EXPECT_EQ(in, m1);
  // Discard the second: its sender completes too.
  core::RecvArgs drop = TRecv(nullptr, 0, 2, 0, &claim, &r);
  drop.iov_count = 0;
  drop.flags = core::kPeek | core::kDiscard;
  ASSERT_TRUE(c[1].ep->Recv(drop).ok());
  ASSERT_EQ(c.ReadOne(1, &e), 1);
  std::vector<CqEntry> sent;
  std::vector<CqErrEntry> errs;
  Collect(c, 0, 2, &sent, &errs);
  EXPECT_TRUE(errs.empty());
}

// FI_FENCE: the fenced send waits until every earlier send to that peer has
// completed; a match-complete send before it holds it back until matched.
TEST(MessagingTest, FenceDefersUntilEarlierSendsComplete) {
  Cluster c(2);
  iovec s, r;
  uint64_t a = 1, b = 2, got_a = 0, got_b = 0;
  int ctx_a = 0, ctx_b = 0;
  core::SendArgs first = TSend(&a, 8, c[0].addr[1], 1, &ctx_a, &s);
  first.flags = core::kMatchComplete;
  ASSERT_TRUE(c[0].ep->Send(first).ok());
  iovec s2;
  core::SendArgs fenced = TSend(&b, 8, c[0].addr[1], 2, &ctx_b, &s2);
  fenced.flags = core::kFence;
  ASSERT_TRUE(c[0].ep->Send(fenced).ok());
  int rctx_b = 0;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(&got_b, 8, 2, 0, &rctx_b, &r)).ok());
  CqEntry e;
  for (int i = 0; i < 3000; ++i) c.ProgressAll();
  EXPECT_EQ(c[1].cq->Read(&e, 1), -EAGAIN) << "the fenced send overtook";
  EXPECT_EQ(got_b, 0u);
  iovec r2;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(&got_a, 8, 1, 0, nullptr, &r2)).ok());
  std::vector<CqEntry> rx, tx;
  std::vector<CqErrEntry> errs;
  Collect(c, 1, 2, &rx, &errs);
  Collect(c, 0, 2, &tx, &errs);
  ASSERT_TRUE(errs.empty());
  EXPECT_EQ(got_a, 1u);
  EXPECT_EQ(got_b, 2u);
  EXPECT_EQ(tx[0].op_context, &ctx_a);
  EXPECT_EQ(tx[1].op_context, &ctx_b);
}

// A listener tracks a bounded number of connectors; entries of decided
// requests are reused once their connectors have gone quiet, so a listener
// keeps answering over its whole life (before, the 3rd connector here timed
// out).
TEST(ListenerTest, DecidedRequestsFreeTheirEntries) {
  sim::SimConfig config;
  config.nodes = 2;
  auto fabric = sim::CreateSimFabric(config);
  ASSERT_NE(fabric, nullptr);
  auto pd0 = fabric->device(0)->AllocPd();
  auto pd1 = fabric->device(1)->AllocPd();
  ASSERT_TRUE(pd0.ok() && pd1.ok());
  core::EventQueue leq(8), ceq(8);
  auto listener = core::Endpoint::CreateListener(fabric->device(0), *pd0,
                                                 /*requests_max=*/2);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE((*listener)->BindEq(&leq).ok());
  ASSERT_TRUE((*listener)->Listen().ok());
  core::CompletionQueue cq(64);
  core::EndpointAttr attr;
  attr.type = core::EndpointType::kMsg;
  for (int k = 0; k < 5; ++k) {
    SCOPED_TRACE("connector " + std::to_string(k));
    auto made = core::Endpoint::Create(fabric->device(1), *pd1, attr);
    ASSERT_TRUE(made.ok());
    std::unique_ptr<core::Endpoint> ep = std::move(*made);
    ASSERT_TRUE(ep->BindCq(&cq, core::kSend | core::kRecv).ok());
    ASSERT_TRUE(ep->BindEq(&ceq).ok());
    ASSERT_TRUE(ep->Enable().ok());
    ASSERT_TRUE(ep->Connect((*listener)->name(), nullptr, 0).ok());
    std::shared_ptr<const core::ConnRequest> req;
    for (int r = 0; r < 100000 && req == nullptr; ++r) {
      auto e = leq.Read(false);
      if (e.ok()) req = (*e)->info;
      ep->Progress();
    }
    ASSERT_NE(req, nullptr) << "the listener did not report the request";
    ASSERT_TRUE((*listener)->Reject(*req, nullptr, 0).ok());
    bool refused = false;
    for (int r = 0; r < 100000 && !refused; ++r) {
      auto x = ceq.ReadError();
      if (x.ok()) {
        EXPECT_EQ(x->err, ECONNREFUSED);
        refused = true;
      }
      (*listener)->Progress();
    }
    ASSERT_TRUE(refused);
    ep.reset();
    // Let the connector's traffic die down (the listener's quiet window).
    fabric->RunUntil(fabric->clock().NowNs() + 50'000'000);
  }
}

}  // namespace
}  // namespace softfab::testing
