// What a receiver holds when something fails, at the core, on the
// simulator:
// - READs that wait for send queue room fail with their connection, once
//   each, and the peer can be connected anew; one refused for good when its
//   turn comes (its buffer cannot be registered) fails its receive, and the
//   READs queued behind it go on;
// - messages kept as unexpected from a connection that failed and was made
//   anew answer nothing on the new one: no ack and no READ of the old
//   connection's (its message ids and keys name the old operations; the
//   sender reuses the ids for new ones), and no credit of the old
//   connection's goes to the new one. The data of an eager one is
//   delivered; a rendezvous one's receive fails (its data is gone with the
//   sender's failed send).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/sim/internal/device.h"
#include "backends/sim/internal/qp.h"
#include "backends/sim/sim_fabric.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/prov_errno.h"
#include "tests/messaging_harness.h"
#include "tests/test_pattern.h"

namespace softfab::testing {
namespace {

// Node `node`'s RC queue pair (its one connection in these tests).
sim::internal::QpImpl* RcQpOf(Cluster& c, int node) { return SimRcQp(c, node); }

// One entry of node `n`'s CQ, error entries included (err 0 for a success),
// driving every node (`alone`: node `n` only); false when none came.
struct Entry {
  void* context = nullptr;
  int err = 0;
  int prov_errno = 0;
  size_t len = 0;
};
bool NextEntry(Cluster& c, int n, Entry* out, int rounds = 100000,
               bool alone = false) {
  core::CqEntry e;
  int k = -EAGAIN;
  if (alone) {
    for (int r = 0; r < rounds && k == -EAGAIN; ++r) {
      c[n].ep->Progress();
      k = c[n].cq->Read(&e, 1);
    }
  } else {
    k = c.ReadOne(n, &e, rounds);
  }
  if (k == -core::CompletionQueue::kErrAvail) {
    core::CqErrEntry x;
    if (!c[n].cq->ReadError(&x).ok()) return false;
    *out = Entry{x.op_context, x.err, x.prov_errno, x.len};
    return true;
  }
  if (k != 1) return false;
  *out = Entry{e.op_context, 0, 0, e.len};
  return true;
}

// Two nodes on a device of one SGE with a send queue of 12 (4 credits + 8
// control work requests), connected; six 16 KiB rendezvous messages from
// node 0 kept as unexpected at node 1. A receive of four iovecs reads one
// with four READ work requests: three receives' worth fill the queue.
struct KeptRendezvous {
  static constexpr int kMessages = 6;
  static sim::SimConfig OneSge() {
    sim::SimConfig config;
    config.max_sge = 1;
    return config;
  }
  static core::EndpointAttr FourCredits() {
    core::EndpointAttr attr;
    attr.credits = 4;
    return attr;
  }
  KeptRendezvous() : c(2, OneSge(), FourCredits()), msg(Pattern(16384, 4)) {
    ExpectDelivered(c, 0, 1, 8);
    for (int r = 0; r < 1000; ++r) c.ProgressAll();
    for (int i = 0; i < kMessages; ++i) {
      EXPECT_TRUE(SendRetrying(
          c, 0,
          TSend(msg.data(), msg.size(), c[0].addr[1], 5, nullptr, &siov[i])))
          << i;
    }
    for (int r = 0; r < 1000; ++r) c[1].ep->Progress();
    EXPECT_EQ(c[1].ep->stats().unexpected_held, uint64_t{kMessages});
  }
  Cluster c;
  std::vector<uint8_t> msg;
  iovec siov[kMessages];
};

// READs that wait for send queue room (four work requests each on a device
// of one SGE, three fit a queue of 12) when their connection fails: each
// fails once, its receive with an error entry, and the peer can be
// connected anew. They stayed queued: their receives never completed, and
// the connection was never made again (CanReconnect waited for them).
TEST(ReadsWaitingTest, ReadsWaitingForRoomFailWithTheirConnection) {
  KeptRendezvous k;
  Cluster& c = k.c;
  constexpr int kMessages = KeptRendezvous::kMessages;
  const std::vector<uint8_t>& msg = k.msg;
  // A send of node 1's first on the connection: flushed first when it
  // fails, it fails the connection while READs still wait.
  const uint64_t first = 3;
  iovec fiov;
  ASSERT_TRUE(
      c[1].ep
          ->Send(TSend(&first, sizeof first, c[1].addr[0], 8, nullptr, &fiov))
          .ok());
  // Each receive takes one at once: four READs of one SGE each, two fit
  // beside that send, the rest wait for room.
  std::vector<uint8_t> in(kMessages * msg.size());
  iovec riov[kMessages][core::Endpoint::kIovMax];
  int ctx[kMessages];
  const size_t piece = msg.size() / core::Endpoint::kIovMax;
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(c[1].ep
                    ->Recv(PiecesRecv(in.data() + i * msg.size(), piece, piece,
                                      5, &ctx[i], riov[i]))
                    .ok())
        << i;
  }
  // Node 1's connection fails (its RC QP in error, as a QP_FATAL would).
  sim::internal::QpImpl* rc = RcQpOf(c, 1);
  ASSERT_NE(rc, nullptr);
  // The send and two READs (four work requests each) fill the queue of 12:
  // the other READs wait for room.
  ASSERT_EQ(rc->sq_.tail - rc->sq_.head, 1u + 2 * 4);
  rc->ToError();
  // Every receive completes once, the ones whose READs never went out too.
  std::vector<int> done(kMessages, 0);
  int entries = 0;
  Entry e;
  while (entries < kMessages + 1 &&
         NextEntry(c, 1, &e, 100000, /*alone=*/true)) {
    // A receive fails with its connection; the send fails too.
    if (e.err != 0) EXPECT_EQ(e.err, EIO);
    ++entries;
    for (int i = 0; i < kMessages; ++i) done[i] += e.context == &ctx[i];
  }
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(done[i], 1) << i;
  EXPECT_EQ(entries, kMessages + 1);  // and the send's
  // And node 1 makes the connection anew: its next send is taken, or waits
  // for the new connection's credits; it is not refused as unreachable (it
  // was, for ever, while the READs stayed queued).
  const uint64_t v = 11;
  iovec viov;
  const Status sent =
      c[1].ep->Send(TSend(&v, sizeof v, c[1].addr[0], 9, nullptr, &viov));
  EXPECT_TRUE(sent.ok() || sent.code() == EAGAIN) << sent.message();
}

// Six rendezvous messages kept at node 1, each taken by a receive of four
// iovecs on a device of one SGE: four READ work requests each, three
// receives' worth fit a send queue of 12 and the rest wait for room. The
// fourth receive's buffer cannot be registered (its addresses wrap around the
// address space). When room comes, its READ is refused for good: it fails,
// once, and the two behind it are posted. It stayed at the head of the queue
// and every READ behind it waited for ever.
TEST(ReadsWaitingTest, AReadRefusedForGoodFailsAndThoseBehindItGoOn) {
  KeptRendezvous k;
  Cluster& c = k.c;
  constexpr int kMessages = KeptRendezvous::kMessages, kBad = 3;
  const std::vector<uint8_t>& msg = k.msg;
  std::vector<uint8_t> in(kMessages * msg.size());
  iovec riov[kMessages][core::Endpoint::kIovMax];
  int ctx[kMessages];
  const size_t piece = msg.size() / core::Endpoint::kIovMax;
  for (int i = 0; i < kMessages; ++i) {
    // The bad one: every piece the last `piece` - 2 bytes of the address
    // space, and past them.
    uint8_t* base = i == kBad
                        ? reinterpret_cast<uint8_t*>(~uintptr_t{0} - piece + 2)
                        : in.data() + i * msg.size();
    ASSERT_TRUE(c[1].ep
                    ->Recv(PiecesRecv(base, piece, i == kBad ? 0 : piece, 5,
                                      &ctx[i], riov[i]))
                    .ok())
        << i;
  }
  std::vector<int> ok(kMessages, 0), failed(kMessages, 0);
  Entry e;
  for (int n = 0; n < kMessages && NextEntry(c, 1, &e); ++n) {
    if (e.err != 0) {
      EXPECT_EQ(e.err, EIO);
      EXPECT_EQ(e.prov_errno, core::kProvPostRefused);
    }
    for (int i = 0; i < kMessages; ++i) {
      if (e.context == &ctx[i]) ++(e.err == 0 ? ok : failed)[i];
    }
  }
  for (int i = 0; i < kMessages; ++i) {
    EXPECT_EQ(ok[i], i == kBad ? 0 : 1) << i;
    EXPECT_EQ(failed[i], i == kBad ? 1 : 0) << i;
    if (i != kBad) {
      EXPECT_EQ(std::memcmp(in.data() + i * msg.size(), msg.data(), msg.size()),
                0)
          << i;
    }
  }
}

// Two nodes connected; node 0 sends `kept` messages of `size` bytes (tag 5,
// send flags `flags`) that node 1 keeps as unexpected. Then node 1's
// connection fails (its RC QP in error under a send of its own) and node 1
// connects anew with an
// 8-byte send to node 0, which fails node 0's side of the old connection.
// Each send of a kept message completes once: failed when it waited for an
// answer (`answered`: rendezvous, match-complete), else done before.
class KeptFromAFailedConnection {
 public:
  KeptFromAFailedConnection(size_t size, int kept, uint64_t flags,
                            bool answered, const core::EndpointAttr& attr = {})
      : KeptFromAFailedConnection(size, attr) {
    KeepAndReconnect(kept, flags, answered);
  }
  // Connected, nothing kept yet.
  KeptFromAFailedConnection(size_t size, const core::EndpointAttr& attr)
      : c_(2, {}, attr), msg_(Pattern(size, 7)) {
    ExpectDelivered(c_, 0, 1, 8);
  }

  // Node 0 sends `kept` messages (tag `tag`, send flags `flags`) that node 1
  // keeps; then the connection fails and is made anew, as the class comment
  // says.
  void KeepAndReconnect(int kept, uint64_t flags, bool answered,
                        uint64_t tag = 5) {
    const uint64_t held = c_[1].ep->stats().unexpected_held;
    siov_.resize(kept);
    for (int i = 0; i < kept; ++i) {
      core::SendArgs a =
          TSend(msg_.data(), msg_.size(), c_[0].addr[1], tag, &old_, &siov_[i]);
      a.flags = flags;
      EXPECT_TRUE(SendRetrying(c_, 0, a)) << i;
    }
    for (int r = 0; r < 1000; ++r) c_.ProgressAll();
    EXPECT_EQ(c_[1].ep->stats().unexpected_held, held + kept);
    // A send of node 1's on the connection, flushed when its QP fails,
    // fails the connection there.
    static const uint64_t kDoomed = 13;
    iovec diov;
    EXPECT_TRUE(c_[1]
                    .ep
                    ->Send(TSend(&kDoomed, sizeof kDoomed, c_[1].addr[0], 9,
                                 &doomed_, &diov))
                    .ok());
    sim::internal::QpImpl* rc = RcQpOf(c_, 1);
    EXPECT_NE(rc, nullptr);
    if (rc == nullptr) return;
    rc->ToError();
    Entry f;
    EXPECT_TRUE(NextEntry(c_, 1, &f));
    EXPECT_EQ(f.context, &doomed_);
    EXPECT_EQ(f.err, EIO);
    // Node 1 connects anew; node 0 takes the new connection and fails what
    // waited on the old one.
    static const uint64_t kHello = 42;
    uint64_t in = 0;
    iovec riov, siov;
    EXPECT_TRUE(
        c_[0].ep->Recv(TRecv(&in, sizeof in, 8, 0, &hello_, &riov)).ok());
    Status s;
    for (int r = 0; r < 100000; ++r) {
      s = c_[1].ep->Send(
          TSend(&kHello, sizeof kHello, c_[1].addr[0], 8, &hello_, &siov));
      if (s.code() != EAGAIN && s.code() != EHOSTUNREACH) break;
      c_.ProgressAll();
    }
    EXPECT_TRUE(s.ok()) << s.message();
    int old_done = 0, hello = 0;
    Entry e;
    while ((old_done < kept || hello < 1) && NextEntry(c_, 0, &e, 20000)) {
      if (e.context == &old_) {
        if (answered) {
          EXPECT_NE(e.err, 0) << "a send of the failed connection completed";
        } else {
          EXPECT_EQ(e.err, 0);
        }
        ++old_done;
      } else if (e.context == &hello_) {
        EXPECT_EQ(e.err, 0);
        ++hello;
      }
    }
    for (int r = 0; r < 20000 && hello < 2; ++r) {
      if (NextEntry(c_, 1, &e, 1) && e.context == &hello_) ++hello;
    }
    EXPECT_EQ(old_done, kept);
    EXPECT_EQ(hello, 2);
    EXPECT_EQ(in, kHello);
    EXPECT_EQ(c_[1].ep->stats().reconnects, ++reconnects_);
  }

  Cluster& c() { return c_; }
  const std::vector<uint8_t>& msg() const { return msg_; }

  // Node 1 posts a receive for the (first) kept message, into `in`; its
  // entry.
  void TakeKept(std::vector<uint8_t>* in, Entry* e) {
    in->assign(msg_.size(), 0);
    iovec riov;
    ASSERT_TRUE(
        c_[1]
            .ep->Recv(TRecv(in->data(), in->size(), 5, 0, &kept_, &riov))
            .ok());
    ASSERT_TRUE(NextEntry(c_, 1, e));
    EXPECT_EQ(e->context, &kept_);
  }

 private:
  Cluster c_;
  std::vector<uint8_t> msg_;
  std::vector<iovec> siov_;
  int old_ = 0, hello_ = 0, doomed_ = 0, kept_ = 0;
  uint64_t reconnects_ = 0;
};

// Node 0 sends up to `n` messages of `size` bytes (tag 6, contexts ctx[i])
// on the new connection, nothing receiving them yet, each retried while
// progress runs; returns how many were taken.
int SendUpTo(Cluster& c, const std::vector<uint8_t>& msg, int n,
             std::vector<int>* ctx, std::vector<iovec>* iov, uint64_t flags) {
  ctx->resize(n);
  iov->resize(n);
  for (int i = 0; i < n; ++i) {
    core::SendArgs a =
        TSend(msg.data(), msg.size(), c[0].addr[1], 6, &(*ctx)[i], &(*iov)[i]);
    a.flags = flags;
    if (!SendRetrying(c, 0, a)) return i;
  }
  return n;
}

// SendUpTo, all `n` taken.
void SendNew(Cluster& c, const std::vector<uint8_t>& msg, int n,
             std::vector<int>* ctx, std::vector<iovec>* iov, uint64_t flags) {
  ASSERT_EQ(SendUpTo(c, msg, n, ctx, iov, flags), n);
}

// Node 1 receives the `n` tag-6 messages whole, and each of node 0's sends
// completes once, successfully.
void ExpectNewDelivered(Cluster& c, const std::vector<uint8_t>& msg, int n,
                        std::vector<int>& ctx) {
  std::vector<std::vector<uint8_t>> in(n, std::vector<uint8_t>(msg.size()));
  std::vector<iovec> riov(n);
  int rctx = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(
        c[1].ep->Recv(TRecv(in[i].data(), msg.size(), 6, 0, &rctx, &riov[i]))
            .ok());
  }
  int received = 0;
  Entry e;
  while (received < n && NextEntry(c, 1, &e)) {
    ASSERT_EQ(e.err, 0) << "prov_errno " << e.prov_errno;
    ASSERT_EQ(e.context, &rctx);
    ++received;
  }
  EXPECT_EQ(received, n);
  for (int i = 0; i < n; ++i) EXPECT_TRUE(in[i] == msg) << "message " << i;
  std::vector<int> done(n, 0);
  int sends = 0;
  while (sends < n && NextEntry(c, 0, &e)) {
    EXPECT_EQ(e.err, 0) << "prov_errno " << e.prov_errno;
    for (int i = 0; i < n; ++i) done[i] += e.context == &ctx[i];
    ++sends;
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(done[i], 1) << i;
}

// No entry comes at node 0 (its new sends wait for their receives).
void ExpectNoSendDone(Cluster& c) {
  Entry e;
  const bool got = NextEntry(c, 0, &e, 20000);
  EXPECT_FALSE(got) << "a send of the new connection completed (err " << e.err
                    << ") before any receive took it";
}

// A rendezvous message kept from the failed connection: a receive that
// takes it fails (its data was the sender's failed send's), and neither a
// READ with the old connection's key nor a read-done for the old message id
// goes to the new connection. The sender reuses the id: before, that
// read-done completed a new rendezvous send whose message no receive had
// taken, or the READ failed the new connection.
TEST(KeptFromAFailedConnectionTest, RendezvousMessageFailsItsReceive) {
  KeptFromAFailedConnection k(64 * 1024, 1, 0, true);
  Cluster& c = k.c();
  std::vector<int> ctx;
  std::vector<iovec> iov;
  ASSERT_NO_FATAL_FAILURE(SendNew(c, k.msg(), 4, &ctx, &iov, 0));
  std::vector<uint8_t> in;
  Entry e;
  ASSERT_NO_FATAL_FAILURE(k.TakeKept(&in, &e));
  EXPECT_EQ(e.err, EIO);
  EXPECT_EQ(e.prov_errno, core::kProvConnectionReset);
  ExpectNoSendDone(c);
  ExpectNewDelivered(c, k.msg(), 4, ctx);
}

// An eager match-complete message kept from the failed connection: a
// receive takes its data, and no ack for the old message id goes to the new
// connection, where it completed a new match-complete send early.
TEST(KeptFromAFailedConnectionTest, EagerMessageIsDeliveredUnacknowledged) {
  KeptFromAFailedConnection k(256, 1, core::kMatchComplete, true);
  Cluster& c = k.c();
  std::vector<int> ctx;
  std::vector<iovec> iov;
  ASSERT_NO_FATAL_FAILURE(
      SendNew(c, k.msg(), 4, &ctx, &iov, core::kMatchComplete));
  std::vector<uint8_t> in;
  Entry e;
  ASSERT_NO_FATAL_FAILURE(k.TakeKept(&in, &e));
  EXPECT_EQ(e.err, 0);
  EXPECT_EQ(in, k.msg());
  ExpectNoSendDone(c);
  ExpectNewDelivered(c, k.msg(), 4, ctx);
}

// Messages kept past `credits` keep their credit until taken. Taken after
// the connection was made anew, those credits are the old connection's:
// none goes to the new one, whose sender would then send past the buffers
// granted to it (and have its messages dropped as overrun).
TEST(KeptFromAFailedConnectionTest, TheirCreditsStayWithTheOldConnection) {
  core::EndpointAttr attr;
  attr.credits = 4;
  constexpr int kKept = 8;  // 4 with their credit back at once, 4 withheld
  KeptFromAFailedConnection k(64, kKept, 0, false, attr);
  Cluster& c = k.c();
  std::vector<uint8_t> in(kKept * k.msg().size());
  std::vector<iovec> riov(kKept);
  int rctx = 0;
  for (int i = 0; i < kKept; ++i) {
    ASSERT_TRUE(c[1].ep
                    ->Recv(TRecv(in.data() + i * k.msg().size(), k.msg().size(),
                                 5, 0, &rctx, &riov[i]))
                    .ok());
  }
  Entry e;
  for (int i = 0; i < kKept; ++i) {
    ASSERT_TRUE(NextEntry(c, 1, &e)) << i;
    EXPECT_EQ(e.err, 0);
  }
  // Node 0 now sends what the new connection lets it, none received yet:
  // at most its credits' worth kept with their credit back and as many
  // withheld (before, the old connection's withheld credits came back to the
  // new one, 12 were taken and 4 dropped as overrun). Nothing is dropped.
  std::vector<int> ctx;
  std::vector<iovec> iov;
  const int taken = SendUpTo(c, k.msg(), 16, &ctx, &iov, 0);
  EXPECT_EQ(taken, 2 * 4);
  for (int r = 0; r < 10000; ++r) c.ProgressAll();
  EXPECT_EQ(c[1].ep->stats().overrun_dropped, 0u);
  ExpectNewDelivered(c, k.msg(), taken, ctx);
  EXPECT_EQ(c[1].ep->stats().unexpected_held, 0u);
}

// Messages of the old connection waiting for CQ room (held for a multi-recv
// buffer) when the peer connects anew: taken later, they are known by their
// QP number as the old connection's, so their match acks go nowhere. Before,
// they were answered on the new connection: their acks, with the old message
// ids, completed new match-complete sends of node 0 that no receive had
// taken.
TEST(KeptFromAFailedConnectionTest, HeldArrivalsAreTheOldConnections) {
  Cluster c(2, {}, {}, /*cq_size=*/8);
  ExpectDelivered(c, 0, 1, 8);
  // Five entries left unread at node 1.
  uint64_t tagged_in[5];
  iovec tiov[5];
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        c[1].ep->Recv(TRecv(&tagged_in[i], 8, 7, 0, nullptr, &tiov[i])).ok());
    const uint64_t v = i;
    iovec siov;
    ASSERT_TRUE(
        SendRetrying(c, 0, TSend(&v, 8, c[0].addr[1], 7, nullptr, &siov)));
    Entry e;
    ASSERT_TRUE(NextEntry(c, 0, &e));
  }
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  // A multi-recv buffer: room for two more entries.
  ASSERT_TRUE(c[1].ep->SetMinMultiRecv(100).ok());
  std::vector<uint8_t> buffer(4096);
  iovec miov;
  int mctx = 0;
  ASSERT_TRUE(
      c[1].ep->Recv(MultiRecv(buffer.data(), buffer.size(), &mctx, &miov))
          .ok());
  // Four match-complete messages: two go in, two wait for room.
  constexpr int kOld = 4;
  const std::vector<uint8_t> msg = Pattern(100, 9);
  iovec oiov[kOld];
  int old_ctx = 0;
  for (int i = 0; i < kOld; ++i) {
    core::SendArgs a;
    a.iov = &oiov[i];
    oiov[i] = iovec{const_cast<uint8_t*>(msg.data()), msg.size()};
    a.iov_count = 1;
    a.dest = c[0].addr[1];
    a.context = &old_ctx;
    a.flags = core::kMatchComplete;
    ASSERT_TRUE(SendRetrying(c, 0, a)) << i;
  }
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  // Node 0's side fails (a send of its own flushed in its QP's error).
  const uint64_t doomed = 1;
  int doomed_ctx = 0;
  iovec diov;
  ASSERT_TRUE(
      c[0].ep->Send(TSend(&doomed, 8, c[0].addr[1], 99, &doomed_ctx, &diov))
          .ok());
  sim::internal::QpImpl* rc = RcQpOf(c, 0);
  ASSERT_NE(rc, nullptr);
  rc->ToError();
  // Node 0 reports the two matched sends done, the two waiting and its own
  // failed; only node 0 runs (node 1 must not read its CQ yet).
  int old_ok = 0, old_failed = 0;
  Entry e;
  while (old_ok + old_failed < kOld + 1 &&
         NextEntry(c, 0, &e, 100000, /*alone=*/true)) {
    ++(e.err == 0 ? old_ok : old_failed);
  }
  EXPECT_EQ(old_ok, 2);
  EXPECT_EQ(old_failed, kOld - 2 + 1);
  // Node 0 connects anew and sends four match-complete messages (tag 6) that
  // nothing receives yet; their ids are the failed sends' again.
  std::vector<int> ctx;
  std::vector<iovec> iov;
  const std::vector<uint8_t> fresh = Pattern(100, 10);
  std::vector<iovec> fiov(kOld);
  ctx.assign(kOld, 0);
  for (int i = 0; i < kOld; ++i) {
    core::SendArgs a =
        TSend(fresh.data(), fresh.size(), c[0].addr[1], 6, &ctx[i], &fiov[i]);
    a.flags = core::kMatchComplete;
    Status s;
    for (int r = 0; r < 100000; ++r) {
      s = c[0].ep->Send(a);
      if (s.code() != EAGAIN && s.code() != EHOSTUNREACH) break;
      c[0].ep->Progress();
    }
    ASSERT_TRUE(s.ok()) << i << ": " << s.message();
  }
  // Node 1 takes the new connection while the old one's messages still wait
  // for room (its CQ is not read), and node 0's new sends go out on it.
  for (int r = 0; r < 100000 && c[1].ep->stats().reconnects == 0; ++r) {
    c.ProgressAll();
  }
  ASSERT_EQ(c[1].ep->stats().reconnects, 1u);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  // Now node 1 reads: its five, then the buffer's four.
  int multi = 0, tagged = 0;
  while (multi < kOld && NextEntry(c, 1, &e)) {
    EXPECT_EQ(e.err, 0);
    if (e.context == &mctx)
      ++multi;
    else
      ++tagged;
  }
  EXPECT_EQ(tagged, 5);
  EXPECT_EQ(multi, kOld);
  // No send of node 0's new ones is done: nothing received them.
  EXPECT_FALSE(NextEntry(c, 0, &e, 20000))
      << "a new send completed (err " << e.err << ") before any receive";
  // They arrive on the new connection and complete once received.
  std::vector<std::vector<uint8_t>> in(kOld, std::vector<uint8_t>(100));
  std::vector<iovec> riov(kOld);
  int rctx = 0;
  for (int i = 0; i < kOld; ++i) {
    ASSERT_TRUE(
        c[1].ep->Recv(TRecv(in[i].data(), 100, 6, 0, &rctx, &riov[i])).ok());
  }
  int got = 0, done = 0;
  while (got < kOld && NextEntry(c, 1, &e)) {
    EXPECT_EQ(e.err, 0);
    got += e.context == &rctx;
  }
  while (done < kOld && NextEntry(c, 0, &e)) {
    EXPECT_EQ(e.err, 0);
    ++done;
  }
  EXPECT_EQ(got, kOld);
  EXPECT_EQ(done, kOld);
  for (int i = 0; i < kOld; ++i) EXPECT_TRUE(in[i] == fresh) << i;
}

// A peer that connects anew again and again while its messages stay kept:
// one earlier connection's worth stays (the rest is dropped and counted), so
// memory stays bounded. Before, every reconnection added up to 2 x credits
// kept messages that counted against no limit.
TEST(KeptFromAFailedConnectionTest, OnlyTheLastConnectionsKeptMessagesStay) {
  core::EndpointAttr attr;
  attr.credits = 4;
  constexpr int kKept = 8;  // 2 x credits
  KeptFromAFailedConnection k(64, attr);
  Cluster& c = k.c();
  k.KeepAndReconnect(kKept, 0, false, /*tag=*/5);
  EXPECT_EQ(c[1].ep->stats().stale_dropped, 0u);
  // One of them peeked and claimed (FI_PEEK | FI_CLAIM): it is the
  // application's now, and stays.
  int claim_ctx = 0;
  core::RecvArgs peek;
  peek.tag = 5;
  peek.tagged = true;
  peek.context = &claim_ctx;
  peek.flags = core::kPeek | core::kClaim;
  ASSERT_TRUE(c[1].ep->Recv(peek).ok());
  Entry e;
  ASSERT_TRUE(NextEntry(c, 1, &e));
  ASSERT_EQ(e.err, 0);
  k.KeepAndReconnect(kKept, 0, false, /*tag=*/4);
  // The first connection's are gone but the claimed one; the second's stay.
  EXPECT_EQ(c[1].ep->stats().stale_dropped, uint64_t{kKept - 1});
  EXPECT_EQ(c[1].ep->stats().unexpected_held, uint64_t{kKept + 1});
  std::vector<uint8_t> in(k.msg().size());
  iovec riov;
  core::RecvArgs claim = TRecv(in.data(), in.size(), 5, 0, &claim_ctx, &riov);
  claim.flags = core::kClaim;
  ASSERT_TRUE(c[1].ep->Recv(claim).ok());
  ASSERT_TRUE(NextEntry(c, 1, &e));
  EXPECT_EQ(e.err, 0);
  EXPECT_EQ(e.context, &claim_ctx);
  EXPECT_TRUE(in == k.msg());
  int rctx = 0;
  ASSERT_TRUE(
      c[1].ep->Recv(TRecv(in.data(), in.size(), 5, 0, &rctx, &riov)).ok());
  EXPECT_FALSE(NextEntry(c, 1, &e, 2000)) << "a dropped message came";
  ASSERT_TRUE(c[1].ep->Cancel(&rctx).ok());
  ASSERT_TRUE(NextEntry(c, 1, &e));
  EXPECT_EQ(e.err, ECANCELED);
  for (int i = 0; i < kKept; ++i) {
    ASSERT_TRUE(
        c[1].ep->Recv(TRecv(in.data(), in.size(), 4, 0, &rctx, &riov)).ok());
    ASSERT_TRUE(NextEntry(c, 1, &e)) << i;
    EXPECT_EQ(e.err, 0);
    EXPECT_TRUE(in == k.msg());
  }
  EXPECT_EQ(c[1].ep->stats().unexpected_held, 0u);
  // And a third reconnection drops nothing: nothing is kept.
  k.KeepAndReconnect(2, 0, false, /*tag=*/3);
  EXPECT_EQ(c[1].ep->stats().stale_dropped, uint64_t{kKept - 1});
}

}  // namespace
}  // namespace softfab::testing
