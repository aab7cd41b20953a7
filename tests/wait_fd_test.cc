// The CQ wait fd (SF_WAIT_FD) with poll(2) and inside a libuv event loop,
// per backend. What the fd means differs, and each backend's meaning is
// checked on its own:
// - simulator: the fd is an eventfd kept readable exactly while reading the
//   CQ has work to do (entries, or simulated events pending);
// - verbs: the fd watches the CQ's own signal (as on the simulator: written
//   while entries wait, including entries the core makes itself, such as a
//   cancelled receive) and the domain's completion channel, which a CQ armed
//   by sf_trywait (or a blocking read) raises when a completion comes while
//   the program sleeps; the next call into the library takes that event.
// What both promise is fi_trywait(3)'s rule: call sf_trywait before sleeping
// on the fds; 0 means no completion can be missed, -SF_EAGAIN means read the
// CQs first. The common cases follow that rule and run on every backend.
#include <gtest/gtest.h>
#include <poll.h>
#include <uv.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/bounded_wait.h"
#include "tests/conformance_fixture.h"
#include "tests/scoped_env.h"

namespace {

using ::softfab::testing::Backend;
using ::softfab::testing::Deadline;
using ::softfab::testing::Fixture;
using ::softfab::testing::kDeviceWaitMs;
using ::softfab::testing::Pattern;
using ::softfab::testing::Readable;
using ::softfab::testing::ReadableWithin;
using ::softfab::testing::ScopedEnv;
using ::softfab::testing::WaitUntil;

// Replaces the fixture's CQs by ones with wait fds: the fixture opens plain
// ones, so these tests open their own endpoints on its domains.
struct WaitPair {
  Fixture f;
  sf_cq* cq[2] = {};
  sf_ep* ep[2] = {};
  int fd[2] = {-1, -1};
  sf_addr_t peer_addr[2] = {};

  ::testing::AssertionResult Open(const Backend& b) {
    if (auto r = f.Open(b, 2); !r) return r;
    uint8_t names[2][SF_NAME_BYTES];
    for (int i = 0; i < 2; ++i) {
      size_t len = SF_NAME_BYTES;
      if (auto r = f.AddEndpoint(i, SF_EP_RDM, {&f.peers[i].av->fid}, true,
                                 &cq[i], &ep[i], SF_WAIT_FD);
          !r) {
        return r;
      }
      if (sf_getname(&ep[i]->fid, names[i], &len) ||
          sf_control(&cq[i]->fid, SF_GETWAIT, &fd[i])) {
        return ::testing::AssertionFailure() << sf_last_error();
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (sf_av_insert(f.peers[i].av, names[1 - i], 1, &peer_addr[i], 0,
                       nullptr) != 1) {
        return ::testing::AssertionFailure() << "av insert";
      }
    }
    return ::testing::AssertionSuccess();
  }
  ~WaitPair() {
    for (int i = 0; i < 2; ++i) {
      if (ep[i]) {
        EXPECT_EQ(sf_close(&ep[i]->fid), 0);
      }
      if (cq[i]) {
        EXPECT_EQ(sf_close(&cq[i]->fid), 0);
      }
    }
  }

  // Reads every entry waiting on both CQs; counts them in *got. An error
  // entry fails the test.
  void ReadAll(int* got) {
    for (int i = 0; i < 2; ++i) {
      sf_cq_tagged_entry e;
      ssize_t n;
      while ((n = sf_cq_read(cq[i], &e, 1)) == 1) ++*got;
      ASSERT_EQ(n, -SF_EAGAIN) << "node " << i << ": " << sf_last_error();
    }
  }

  // Follows fi_trywait's rule until the fabric is quiet: sf_trywait, and when
  // it says it is safe, sleep on both fds for `sleep_ms`; quiet when nothing
  // woke the sleeper. Trailing traffic (acks, credit returns) may wake it a
  // few times first. False if it never got quiet.
  bool SettleQuiet(int sleep_ms) {
    sf_fid* fids[] = {&cq[0]->fid, &cq[1]->fid};
    for (int tries = 0; tries < 100; ++tries) {
      const int rc = sf_trywait(f.fabric, fids, 2);
      if (rc == 0) {
        pollfd p[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};
        if (poll(p, 2, sleep_ms) == 0) return true;
      } else {
        EXPECT_EQ(rc, -SF_EAGAIN) << sf_last_error();
      }
      int got = 0;
      ReadAll(&got);
      EXPECT_EQ(got, 0) << "a completion nobody asked for";
    }
    return false;
  }
};

class WaitFdTest : public ::softfab::testing::PerBackendTest {
 protected:
  bool verbs() const { return backend().backend == SF_BACKEND_VERBS; }
};
// The simulator's meaning of the fd (its instances only).
class SimWaitFdTest : public WaitFdTest {};
// The completion channel's meaning of the fd (the verbs instance only).
class VerbsWaitFdTest : public WaitFdTest {};

// Messages of several packets at rxe0's 1 KiB MTU, sent eagerly (up to 8 KiB).
constexpr size_t kMessageBytes = 6000;

// A waiter that sleeps only when sf_trywait allows it, in poll(2) on both
// fds, misses no completion of a send and its receive, and the fabric ends
// quiet: sf_trywait 0 and no fd readable.
TEST_P(WaitFdTest, TrywaitThenPollMissesNoCompletion) {
  WaitPair w;
  ASSERT_TRUE(w.Open(backend()));
  sf_fid* fids[] = {&w.cq[0]->fid, &w.cq[1]->fid};
  const std::vector<uint8_t> out = Pattern(kMessageBytes, 5);
  std::vector<uint8_t> in(kMessageBytes);
  int rctx = 0;
  ASSERT_EQ(
      sf_recv(w.ep[1], in.data(), in.size(), nullptr, SF_ADDR_UNSPEC, &rctx),
      0);
  ASSERT_EQ(sf_send(w.ep[0], out.data(), out.size(), nullptr, w.peer_addr[0],
                    nullptr),
            0);
  int got = 0, sleeps = 0;
  const Deadline deadline(kDeviceWaitMs);
  while (got < 2 && !deadline.passed()) {
    const int rc = sf_trywait(w.f.fabric, fids, 2);
    if (rc == 0) {
      ++sleeps;
      pollfd p[2] = {{w.fd[0], POLLIN, 0}, {w.fd[1], POLLIN, 0}};
      ASSERT_GE(poll(p, 2, deadline.left_ms()), 0);
    } else {
      ASSERT_EQ(rc, -SF_EAGAIN) << sf_last_error();
    }
    w.ReadAll(&got);
  }
  ASSERT_EQ(got, 2) << "after " << sleeps << " sleeps";
  EXPECT_EQ(in, out);
  EXPECT_TRUE(w.SettleQuiet(verbs() ? 200 : 0));
  EXPECT_FALSE(Readable(w.fd[0]));
  EXPECT_FALSE(Readable(w.fd[1]));
  std::printf("%d sleeps in poll(2)\n", sleeps);
}

TEST_P(WaitFdTest, WaitCallsRefuseBadArguments) {
  WaitPair w;
  ASSERT_TRUE(w.Open(backend()));
  int fd = -1;
  EXPECT_EQ(sf_control(&w.f.peers[0].cq->fid, SF_GETWAIT, &fd), -SF_EINVAL);
  EXPECT_EQ(sf_control(&w.cq[0]->fid, 99, &fd), -SF_ENOSYS);
  EXPECT_EQ(sf_control(&w.cq[0]->fid, SF_GETWAIT, nullptr), -SF_EINVAL);
  EXPECT_EQ(sf_control(&w.ep[0]->fid, SF_GETWAIT, &fd), -SF_EINVAL);
  EXPECT_EQ(sf_trywait(w.f.fabric, nullptr, 1), -SF_EINVAL);
  sf_fid* one[] = {&w.cq[0]->fid};
  EXPECT_EQ(sf_trywait(w.f.fabric, one, 0), -SF_EINVAL);
  EXPECT_EQ(sf_trywait(nullptr, one, 1), -SF_EINVAL);
  sf_fid* plain[] = {&w.f.peers[0].cq->fid};
  EXPECT_EQ(sf_trywait(w.f.fabric, plain, 1), -SF_EINVAL);
  sf_fid* not_cq[] = {&w.ep[0]->fid};
  EXPECT_EQ(sf_trywait(w.f.fabric, not_cq, 1), -SF_EINVAL);
  sf_cq_attr ca{};
  ca.format = SF_CQ_FORMAT_CONTEXT;
  ca.wait_obj = SF_WAIT_SET;
  sf_cq* cq = nullptr;
  EXPECT_EQ(sf_cq_open(w.f.peers[0].domain, &ca, &cq, nullptr), -SF_ENOSYS);
}

// An entry the core writes itself, with no completion from the device behind
// it, must wake a waiter that followed fi_trywait's rule, on every backend:
// a cancelled receive (ECANCELED) and a receive matched at post time to a
// message that had already arrived. A poll(2) sleeper and a libuv loop wake
// within the wait bound instead of sleeping it out.
TEST_P(WaitFdTest, EntriesTheCoreMakesWakeASleeper) {
  WaitPair w;
  ASSERT_TRUE(w.Open(backend()));
  sf_fid* receiver[] = {&w.cq[1]->fid};
  // Cancelled receive, poll(2).
  char in[16] = {};
  int cancelled = 0;
  ASSERT_EQ(
      sf_recv(w.ep[1], in, sizeof in, nullptr, SF_ADDR_UNSPEC, &cancelled), 0);
  ASSERT_EQ(sf_trywait(w.f.fabric, receiver, 1), 0) << sf_last_error();
  ASSERT_FALSE(Readable(w.fd[1]));
  ASSERT_EQ(sf_cancel(&w.ep[1]->fid, &cancelled), 0) << sf_last_error();
  EXPECT_TRUE(ReadableWithin(w.fd[1], kDeviceWaitMs))
      << "the ECANCELED entry did not wake a poll(2) sleeper";
  sf_cq_err_entry err{};
  ASSERT_EQ(sf_cq_readerr(w.cq[1], &err, 0), 1);
  EXPECT_EQ(err.err, SF_ECANCELED);
  EXPECT_EQ(err.op_context, &cancelled);

  // A message that arrives before its receive is posted, then a libuv loop
  // sleeping on the fd while the program posts the receive.
  char out[16] = "early";
  ASSERT_EQ(sf_send(w.ep[0], out, sizeof out, nullptr, w.peer_addr[0], nullptr),
            0);
  int sent = 0;
  ASSERT_TRUE(WaitUntil([&] { return sent == 1; },
                        [&] {
                          sf_cq_tagged_entry e;
                          if (sf_cq_read(w.cq[0], &e, 1) == 1) ++sent;
                          (void)sf_cq_read(w.cq[1], nullptr,
                                           0);  // the receiver takes it in
                        }));
  ASSERT_TRUE(w.SettleQuiet(verbs() ? 100 : 0));
  ASSERT_EQ(sf_trywait(w.f.fabric, receiver, 1), 0) << sf_last_error();
  struct Woken {
    bool readable = false;
    bool timed_out = false;
    uv_poll_t poll;
    uv_timer_t guard;
  } woken;
  uv_loop_t uv;
  ASSERT_EQ(uv_loop_init(&uv), 0);
  ASSERT_EQ(uv_poll_init(&uv, &woken.poll, w.fd[1]), 0);
  woken.poll.data = &woken;
  ASSERT_EQ(uv_timer_init(&uv, &woken.guard), 0);
  woken.guard.data = &woken;
  ASSERT_EQ(uv_poll_start(&woken.poll, UV_READABLE,
                          [](uv_poll_t* h, int status, int) {
                            auto* wk = static_cast<Woken*>(h->data);
                            wk->readable = status == 0;
                            uv_poll_stop(h);
                            uv_timer_stop(&wk->guard);
                          }),
            0);
  ASSERT_EQ(uv_timer_start(
                &woken.guard,
                [](uv_timer_t* t) {
                  auto* wk = static_cast<Woken*>(t->data);
                  wk->timed_out = true;
                  uv_poll_stop(&wk->poll);
                },
                kDeviceWaitMs, 0),
            0);
  int matched = 0;
  ASSERT_EQ(sf_recv(w.ep[1], in, sizeof in, nullptr, SF_ADDR_UNSPEC, &matched),
            0);
  ASSERT_EQ(uv_run(&uv, UV_RUN_DEFAULT), 0);
  EXPECT_TRUE(woken.readable) << "the receive matched at post time did not "
                                 "wake the libuv loop";
  EXPECT_FALSE(woken.timed_out);
  uv_close(reinterpret_cast<uv_handle_t*>(&woken.poll), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&woken.guard), nullptr);
  ASSERT_EQ(uv_run(&uv, UV_RUN_DEFAULT), 0);
  ASSERT_EQ(uv_loop_close(&uv), 0);
  sf_cq_tagged_entry e{};
  ASSERT_EQ(sf_cq_read(w.cq[1], &e, 1), 1) << sf_last_error();
  EXPECT_EQ(e.op_context, &matched);
  EXPECT_STREQ(in, "early");
}

// Simulator: readable exactly while there is work, with or without
// sf_trywait.
TEST_P(SimWaitFdTest, ReadableExactlyWhileThereIsWork) {
  WaitPair w;
  ASSERT_TRUE(w.Open(backend()));
  // Idle: nothing to read, safe to block.
  EXPECT_FALSE(Readable(w.fd[0]));
  EXPECT_FALSE(Readable(w.fd[1]));
  sf_fid* fids[] = {&w.cq[0]->fid, &w.cq[1]->fid};
  EXPECT_EQ(sf_trywait(w.f.fabric, fids, 2), 0) << sf_last_error();
  // A receive and a send: work in the fabric, so both become readable.
  char in[16] = {}, out[16] = "wake";
  int rctx = 0;
  ASSERT_EQ(sf_recv(w.ep[1], in, sizeof in, nullptr, SF_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(sf_send(w.ep[0], out, sizeof out, nullptr, w.peer_addr[0], nullptr),
            0);
  EXPECT_TRUE(Readable(w.fd[0]));
  EXPECT_EQ(sf_trywait(w.f.fabric, fids, 2), -SF_EAGAIN);
  // Read until both completions are in; then everything is quiet again.
  int got = 0;
  for (int r = 0; r < 10000 && got < 2; ++r) {
    for (int i = 0; i < 2; ++i) {
      if (!Readable(w.fd[i])) continue;
      sf_cq_tagged_entry e;
      if (sf_cq_read(w.cq[i], &e, 1) == 1) ++got;
    }
  }
  ASSERT_EQ(got, 2);
  EXPECT_STREQ(in, "wake");
  // Drain what remains (acks, credit returns) by following the fds.
  for (int r = 0; r < 10000 && (Readable(w.fd[0]) || Readable(w.fd[1])); ++r) {
    for (int i = 0; i < 2; ++i) ASSERT_EQ(sf_cq_read(w.cq[i], nullptr, 0), 0);
  }
  EXPECT_FALSE(Readable(w.fd[0]));
  EXPECT_FALSE(Readable(w.fd[1]));
  EXPECT_EQ(sf_trywait(w.f.fabric, fids, 2), 0) << sf_last_error();
}

// Verbs: the fd watches the domain's completion channel, and only an armed
// CQ's completion makes it readable while the program is outside the library:
// completions that come while nobody armed (no sf_trywait, no blocking read)
// raise nothing, which is why a sleeper must call sf_trywait first.
TEST_P(VerbsWaitFdTest, ChannelFdWakesOnlyAnArmedWaiter) {
  WaitPair w;
  ASSERT_TRUE(w.Open(backend()));
  sf_cq_attr ca{};
  ca.format = SF_CQ_FORMAT_TAGGED;
  ca.wait_obj = SF_WAIT_FD;
  sf_cq* other = nullptr;
  ASSERT_EQ(sf_cq_open(w.f.peers[0].domain, &ca, &other, nullptr), 0);
  int other_fd = -1;
  ASSERT_EQ(sf_control(&other->fid, SF_GETWAIT, &other_fd), 0);
  EXPECT_NE(other_fd, w.fd[0]) << "each CQ has a wait fd of its own";
  ASSERT_EQ(sf_close(&other->fid), 0);

  // Nobody armed: a message exchanged by busy reading wakes no fd.
  char in[16] = {}, out[16] = "first";
  int rctx = 0, sctx = 0, got = 0;
  ASSERT_EQ(sf_recv(w.ep[1], in, sizeof in, nullptr, SF_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(sf_send(w.ep[0], out, sizeof out, nullptr, w.peer_addr[0], &sctx),
            0);
  ASSERT_TRUE(WaitUntil([&] { return got == 2; }, [&] { w.ReadAll(&got); }));
  EXPECT_STREQ(in, "first");
  // Trailing acks and credit returns, still unarmed.
  const Deadline settle(200);
  while (!settle.passed()) w.ReadAll(&got);
  EXPECT_EQ(got, 2);
  EXPECT_FALSE(Readable(w.fd[0]));
  EXPECT_FALSE(Readable(w.fd[1]));

  // Armed by sf_trywait: the next message's completion wakes the receiver.
  sf_fid* fids[] = {&w.cq[0]->fid, &w.cq[1]->fid};
  ASSERT_EQ(sf_trywait(w.f.fabric, fids, 2), 0) << sf_last_error();
  EXPECT_FALSE(Readable(w.fd[1]));
  std::strcpy(out, "second");
  ASSERT_EQ(sf_recv(w.ep[1], in, sizeof in, nullptr, SF_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(sf_send(w.ep[0], out, sizeof out, nullptr, w.peer_addr[0], &sctx),
            0);
  ASSERT_TRUE(ReadableWithin(w.fd[1], kDeviceWaitMs))
      << "an armed CQ got a message and the channel stayed quiet";
  // The completion is not read yet: not safe to sleep.
  sf_fid* receiver[] = {&w.cq[1]->fid};
  EXPECT_EQ(sf_trywait(w.f.fabric, receiver, 1), -SF_EAGAIN);
  sf_cq_tagged_entry e{};
  ASSERT_EQ(sf_cq_read(w.cq[1], &e, 1), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_STREQ(in, "second");
  // The sender's completion, by the same rule.
  got = 0;
  const Deadline deadline(kDeviceWaitMs);
  while (got == 0 && !deadline.passed()) {
    if (sf_trywait(w.f.fabric, fids, 2) == 0) {
      pollfd p[2] = {{w.fd[0], POLLIN, 0}, {w.fd[1], POLLIN, 0}};
      ASSERT_GE(poll(p, 2, deadline.left_ms()), 0);
    }
    w.ReadAll(&got);
  }
  EXPECT_EQ(got, 1);
  // Read and re-armed with nothing in flight: the fds go quiet.
  EXPECT_TRUE(w.SettleQuiet(200));
  EXPECT_FALSE(Readable(w.fd[0]));
  EXPECT_FALSE(Readable(w.fd[1]));
}

// fi_trywait(3) works on the set of fids it is given: a waiter that calls
// sf_trywait for its own CQ before sleeping must leave another CQ's wake-up
// alone. Both CQs armed, a message completes on CQ 1 and its fd becomes
// readable; then CQ 0's waiter calls sf_trywait for CQ 0 only. CQ 1's fd
// must still be readable, or an event loop sleeping on it never learns of
// the message (the libuv pattern of one poll handle per CQ hangs so).
// Fails on every backend until fixed. Simulator: SyncWaitFds
// (api/fabric/completion.cc) counts only entries already in the CQ and pending
// simulated events, not completions waiting in the endpoint's transport
// CQs. Verbs: sf_trywait's ArmAll (api/fabric/verbs_fabric.cc) drains and
// re-arms the channels of every domain, taking the event meant for CQ 1.
TEST_P(WaitFdTest, TrywaitOnOneCqLeavesAnotherCqsWakeUp) {
  WaitPair w;
  ASSERT_TRUE(w.Open(backend()));
  // Connected first, by busy reading, and quiet.
  char in[16] = {}, out[16] = "connect";
  int rctx = 0, got = 0;
  ASSERT_EQ(sf_recv(w.ep[1], in, sizeof in, nullptr, SF_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(sf_send(w.ep[0], out, sizeof out, nullptr, w.peer_addr[0], nullptr),
            0);
  ASSERT_TRUE(WaitUntil([&] { return got == 2; }, [&] { w.ReadAll(&got); }));
  ASSERT_TRUE(w.SettleQuiet(200));
  // Armed (SettleQuiet ended on sf_trywait 0); a message for node 1.
  ASSERT_EQ(sf_recv(w.ep[1], in, sizeof in, nullptr, SF_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(sf_send(w.ep[0], out, sizeof out, nullptr, w.peer_addr[0], nullptr),
            0);
  ASSERT_TRUE(ReadableWithin(w.fd[1], kDeviceWaitMs));
  // Node 0's waiter reads its CQ until sf_trywait lets it sleep.
  sf_fid* mine[] = {&w.cq[0]->fid};
  sf_cq_tagged_entry e;
  EXPECT_TRUE(WaitUntil([&] { return sf_trywait(w.f.fabric, mine, 1) == 0; },
                        [&] { (void)sf_cq_read(w.cq[0], &e, 1); }, 1000));
  EXPECT_TRUE(Readable(w.fd[1]))
      << "sf_trywait for CQ 0 took CQ 1's wake-up: its message waits unseen";
  ssize_t n = -SF_EAGAIN;
  EXPECT_TRUE(WaitUntil([&] { return (n = sf_cq_read(w.cq[1], &e, 1)) == 1; },
                        [] {}, 1000));
  EXPECT_EQ(e.op_context, &rctx);
}

// ---- Ping-pongs driven by a libuv loop ----

// kRounds messages each way where every read of the loop's CQs happens in a
// libuv poll callback: the loop ends by itself when the last message is in
// (no handle active). On verbs, before the loop goes back to sleep the
// callback follows fi_trywait's rule for every CQ the loop sleeps on; on the
// simulator the fd is readable while there is work, so readiness alone
// drives it.
constexpr int kRounds = 200;

struct Loop;
// One node of a ping-pong. Node 0 sends the odd numbers and receives the
// even ones; node 1 the other way round.
struct Side {
  Loop* loop = nullptr;
  int me = 0;
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  sf_addr_t peer = 0;
  uv_poll_t poll;
  bool polling = false;
  int received = 0;
  // Received into `in`; sent from `out`, which is rewritten only after the
  // peer's answer shows the last send was taken.
  std::vector<uint8_t> in = std::vector<uint8_t>(kMessageBytes);
  std::vector<uint8_t> out = std::vector<uint8_t>(kMessageBytes);
  int ctx = 0;
};
struct Loop {
  sf_fabric* fabric = nullptr;
  bool trywait = false;  // Verbs: sf_trywait before sleeping.
  int count = 0;         // Sides in this loop: 2, or 1 with a remote peer.
  Side sides[2];
  uv_timer_t guard;  // Fails the test instead of hanging.
  bool timed_out = false;
  int callbacks = 0;
};

// A message: its number, then bytes derived from it.
void Fill(int value, std::vector<uint8_t>* m) {
  std::memcpy(m->data(), &value, sizeof value);
  for (size_t i = sizeof value; i < m->size(); ++i) {
    (*m)[i] = static_cast<uint8_t>(value * 31 + i);
  }
}

// Sends `value` from `out` to `peer`, reading `cq` while the send must wait
// for credit. The send's own completion is left for the reader to skip.
[[nodiscard]] ssize_t SendValue(sf_ep* ep, sf_cq* cq, sf_addr_t peer, int value,
                                std::vector<uint8_t>* out) {
  Fill(value, out);
  ssize_t rc = -SF_EAGAIN;
  WaitUntil(
      [&] {
        rc = sf_send(ep, out->data(), out->size(), nullptr, peer, nullptr);
        return rc != -SF_EAGAIN;
      },
      [&] { (void)sf_cq_read(cq, nullptr, 0); });
  return rc;
}

// Takes the side's completions and answers each message.
void Handle(Side* s) {
  sf_cq_tagged_entry e[8];
  const ssize_t n = sf_cq_read(s->cq, e, 8);
  ASSERT_TRUE(n > 0 || n == -SF_EAGAIN) << n << " " << sf_last_error();
  for (ssize_t i = 0; i < n; ++i) {
    if (!(e[i].flags & SF_RECV)) continue;
    ++s->received;
    int value;
    std::memcpy(&value, s->in.data(), sizeof value);
    EXPECT_EQ(value, s->received * 2 - (s->me == 1 ? 1 : 0));
    std::vector<uint8_t> want(kMessageBytes);
    Fill(value, &want);
    EXPECT_TRUE(s->in == want) << "message " << value << " corrupted";
    const bool last = s->received == kRounds;
    if (last && s->polling) uv_poll_stop(&s->poll);
    s->polling = s->polling && !last;
    if (s->me == 0 && last) return;  // Node 0's last receive: done.
    if (!last) {
      ASSERT_EQ(sf_recv(s->ep, s->in.data(), s->in.size(), nullptr,
                        SF_ADDR_UNSPEC, &s->ctx),
                0);
    }
    ASSERT_EQ(SendValue(s->ep, s->cq, s->peer, value + 1, &s->out), 0)
        << sf_last_error();
  }
}

// fi_trywait's rule before the loop sleeps: while sf_trywait says a
// completion waits, read the CQs.
void ReadyToSleep(Loop* loop) {
  if (!loop->trywait) return;
  sf_fid* fids[2];
  for (int i = 0; i < loop->count; ++i) fids[i] = &loop->sides[i].cq->fid;
  for (int tries = 0; tries < 100000; ++tries) {
    const int rc = sf_trywait(loop->fabric, fids, loop->count);
    if (rc == 0) return;
    ASSERT_EQ(rc, -SF_EAGAIN) << sf_last_error();
    for (int i = 0; i < loop->count; ++i) Handle(&loop->sides[i]);
  }
  ADD_FAILURE() << "sf_trywait never allowed sleeping";
}

void OnReadable(uv_poll_t* handle, int status, int /*events*/) {
  auto* s = static_cast<Side*>(handle->data);
  ASSERT_EQ(status, 0);
  ++s->loop->callbacks;
  Handle(s);
  ReadyToSleep(s->loop);
}

void OnGuard(uv_timer_t* timer) {
  auto* loop = static_cast<Loop*>(timer->data);
  loop->timed_out = true;
  for (Side& s : loop->sides) {
    if (s.polling) uv_poll_stop(&s.poll);
    s.polling = false;
  }
}

// Runs the loop's sides (set up by the caller, receives posted) until node
// 0 has its last message or a minute passes; node 0 sends first.
void RunPingPong(Loop* loop, const int* fds) {
  uv_loop_t uv;
  ASSERT_EQ(uv_loop_init(&uv), 0);
  for (int i = 0; i < loop->count; ++i) {
    Side& s = loop->sides[i];
    s.loop = loop;
    ASSERT_EQ(uv_poll_init(&uv, &s.poll, fds[i]), 0);
    s.poll.data = &s;
    ASSERT_EQ(uv_poll_start(&s.poll, UV_READABLE, OnReadable), 0);
    s.polling = true;
  }
  // Real time on both backends (the simulator's loop takes milliseconds);
  // unreferenced, so it does not keep the loop alive once the sides stop.
  ASSERT_EQ(uv_timer_init(&uv, &loop->guard), 0);
  loop->guard.data = loop;
  ASSERT_EQ(uv_timer_start(&loop->guard, OnGuard, 60000, 0), 0);
  uv_unref(reinterpret_cast<uv_handle_t*>(&loop->guard));
  Side& first = loop->sides[0];
  ASSERT_EQ(SendValue(first.ep, first.cq, first.peer, 1, &first.out), 0);
  ReadyToSleep(loop);
  ASSERT_EQ(uv_run(&uv, UV_RUN_DEFAULT), 0);
  EXPECT_FALSE(loop->timed_out)
      << "no wake-up for a minute: received " << loop->sides[0].received
      << " and " << loop->sides[1].received;
  for (int i = 0; i < loop->count; ++i) {
    EXPECT_EQ(loop->sides[i].received, kRounds) << "node " << i;
    uv_close(reinterpret_cast<uv_handle_t*>(&loop->sides[i].poll), nullptr);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&loop->guard), nullptr);
  ASSERT_EQ(uv_run(&uv, UV_RUN_DEFAULT), 0);
  ASSERT_EQ(uv_loop_close(&uv), 0);
  std::printf("%d poll callbacks for %d messages\n", loop->callbacks,
              loop->sides[0].received + loop->sides[1].received);
}

// Both nodes in the loop, two domains of one fabric. On rxe a message
// between two domains of one process arrives inside the sender's own post
// call, so there sf_trywait finds most answers before the loop sleeps; the
// next test has the peer in another thread.
TEST_P(WaitFdTest, LibuvLoopDrivesAPingPong) {
  WaitPair w;
  ASSERT_TRUE(w.Open(backend()));
  Loop loop;
  loop.fabric = w.f.fabric;
  loop.trywait = verbs();
  loop.count = 2;
  for (int i = 0; i < 2; ++i) {
    Side& s = loop.sides[i];
    s.me = i;
    s.cq = w.cq[i];
    s.ep = w.ep[i];
    s.peer = w.peer_addr[i];
    ASSERT_EQ(sf_recv(s.ep, s.in.data(), s.in.size(), nullptr, SF_ADDR_UNSPEC,
                      &s.ctx),
              0);
  }
  RunPingPong(&loop, w.fd);
}

// One node on a verbs fabric of its own (so a thread of its own may use
// it): the fixture's node 0, and an endpoint whose CQ has a wait fd when
// asked.
struct OwnFabricNode {
  Fixture f;
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  std::vector<uint8_t> name = std::vector<uint8_t>(SF_NAME_BYTES);
  sf_addr_t peer = 0;

  ::testing::AssertionResult Open(sf_wait_obj wait) {
    if (auto r = f.Open(Backend{"verbs", SF_BACKEND_VERBS}, 1); !r) return r;
    if (auto r = f.AddEndpoint(0, SF_EP_RDM, {&f.peers[0].av->fid}, true, &cq,
                               &ep, wait);
        !r) {
      return r;
    }
    size_t len = SF_NAME_BYTES;
    if (sf_getname(&ep->fid, name.data(), &len)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    return ::testing::AssertionSuccess();
  }
  ::testing::AssertionResult AddPeer(const std::vector<uint8_t>& peer_name) {
    if (sf_av_insert(f.peers[0].av, peer_name.data(), 1, &peer, 0, nullptr) !=
        1) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    return ::testing::AssertionSuccess();
  }
  ~OwnFabricNode() {
    if (ep) {
      EXPECT_EQ(sf_close(&ep->fid), 0);
    }
    if (cq) {
      EXPECT_EQ(sf_close(&cq->fid), 0);
    }
  }
};

// Node 1 of a ping-pong in a thread of its own: answers kRounds messages
// from blocking sf_cq_sread calls (which sleep on its completion channel),
// then waits for its last send. Returns "" or what went wrong.
std::string EchoNode(OwnFabricNode* n) {
  std::vector<uint8_t> in(kMessageBytes), out(kMessageBytes),
      want(kMessageBytes);
  int sends_done = 0;
  // The next completion, skipping (and counting) send completions when
  // `recv` is asked for.
  auto next = [&](bool recv) -> std::string {
    while (true) {
      sf_cq_tagged_entry e;
      const ssize_t got = sf_cq_sread(n->cq, &e, 1, nullptr, kDeviceWaitMs);
      if (got == -SF_EAVAIL) {
        sf_cq_err_entry x{};
        (void)sf_cq_readerr(n->cq, &x, 0);
        return "error completion " + std::to_string(x.err);
      }
      if (got != 1) return std::string("sread: ") + sf_last_error();
      if (e.flags & SF_RECV) {
        if (recv) return "";
        return "an unexpected message";
      }
      ++sends_done;
      if (!recv) return "";
    }
  };
  for (int r = 1; r <= kRounds; ++r) {
    int ctx = 0;
    if (sf_recv(n->ep, in.data(), in.size(), nullptr, SF_ADDR_UNSPEC, &ctx)) {
      return std::string("recv: ") + sf_last_error();
    }
    if (std::string why = next(true); !why.empty()) return why;
    Fill(2 * r - 1, &want);
    if (in != want) return "message " + std::to_string(2 * r - 1) + " wrong";
    if (SendValue(n->ep, n->cq, n->peer, 2 * r, &out) != 0) {
      return std::string("send: ") + sf_last_error();
    }
  }
  while (sends_done < kRounds) {
    if (std::string why = next(false); !why.empty()) return why;
  }
  return "";
}

// The peer answers from another thread with a fabric of its own, so its
// answers come while node 0's loop sleeps in epoll on the completion
// channel: every answer must wake the loop through the fd.
TEST_P(VerbsWaitFdTest, LibuvLoopSleepsUntilAnotherThreadAnswers) {
  OwnFabricNode node0, node1;
  ASSERT_TRUE(node0.Open(SF_WAIT_FD));
  ASSERT_TRUE(node1.Open(SF_WAIT_NONE));
  ASSERT_TRUE(node0.AddPeer(node1.name));
  ASSERT_TRUE(node1.AddPeer(node0.name));
  Loop loop;
  loop.fabric = node0.f.fabric;
  loop.trywait = true;
  loop.count = 1;
  Side& s = loop.sides[0];
  s.cq = node0.cq;
  s.ep = node0.ep;
  s.peer = node0.peer;
  ASSERT_EQ(
      sf_recv(s.ep, s.in.data(), s.in.size(), nullptr, SF_ADDR_UNSPEC, &s.ctx),
      0);
  int fd = -1;
  ASSERT_EQ(sf_control(&node0.cq->fid, SF_GETWAIT, &fd), 0);
  std::string echo_result = "did not run";
  std::thread echo([&] { echo_result = EchoNode(&node1); });
  RunPingPong(&loop, &fd);
  echo.join();
  EXPECT_EQ(echo_result, "");
  // Each answer came while the loop slept: the fd woke it for (nearly)
  // every one.
  EXPECT_GE(loop.callbacks, kRounds / 2);
}

// Node 0 of that ping-pong, blocking in sf_cq_sread too: sends message
// 2r - 1, takes 2r, checks its bytes, kRounds times; then waits for its last
// send. Returns "" or what went wrong.
std::string PingNode(OwnFabricNode* n) {
  std::vector<uint8_t> in(kMessageBytes), out(kMessageBytes),
      want(kMessageBytes);
  int sends_done = 0;
  for (int r = 1; r <= kRounds; ++r) {
    int ctx = 0;
    if (sf_recv(n->ep, in.data(), in.size(), nullptr, SF_ADDR_UNSPEC, &ctx)) {
      return std::string("recv: ") + sf_last_error();
    }
    if (SendValue(n->ep, n->cq, n->peer, 2 * r - 1, &out) != 0) {
      return std::string("send: ") + sf_last_error();
    }
    for (bool got = false; !got;) {
      sf_cq_tagged_entry e;
      if (sf_cq_sread(n->cq, &e, 1, nullptr, kDeviceWaitMs) != 1) {
        return std::string("sread: ") + sf_last_error();
      }
      got = (e.flags & SF_RECV) != 0;
      sends_done += got ? 0 : 1;
    }
    Fill(2 * r, &want);
    if (in != want) return "message " + std::to_string(2 * r) + " wrong";
  }
  while (sends_done < kRounds) {
    sf_cq_tagged_entry e;
    if (sf_cq_sread(n->cq, &e, 1, nullptr, kDeviceWaitMs) != 1) {
      return std::string("sread: ") + sf_last_error();
    }
    ++sends_done;
  }
  return "";
}

// How long sf_cq_sread polls before it sleeps on a device
// ($SOFTFAB_SREAD_SPIN_US, default 20 us): a bad setting is refused and
// opens nothing; with no spin and with one longer than any round trip, a
// ping-pong whose sides both block in sf_cq_sread (in two threads) goes
// through, every byte checked.
TEST_P(VerbsWaitFdTest, SreadSpinIsSettableAndBadSettingsAreRefused) {
  for (const char* bad : {"x", "-1", "1000001", "20us"}) {
    ScopedEnv env("SOFTFAB_SREAD_SPIN_US", bad);
    sf_fabric_attr fa{};
    fa.backend = SF_BACKEND_VERBS;
    sf_fabric* f = nullptr;
    EXPECT_EQ(sf_fabric_open(&fa, &f, nullptr), -SF_EINVAL) << bad;
    EXPECT_EQ(f, nullptr) << bad;
    EXPECT_NE(std::string(sf_last_error()).find("SOFTFAB_SREAD_SPIN_US"),
              std::string::npos)
        << sf_last_error();
  }
  for (const char* spin : {"0", "200000"}) {
    SCOPED_TRACE(std::string("SOFTFAB_SREAD_SPIN_US=") + spin);
    ScopedEnv env("SOFTFAB_SREAD_SPIN_US", spin);
    OwnFabricNode node0, node1;
    ASSERT_TRUE(node0.Open(SF_WAIT_NONE));
    ASSERT_TRUE(node1.Open(SF_WAIT_NONE));
    ASSERT_TRUE(node0.AddPeer(node1.name));
    ASSERT_TRUE(node1.AddPeer(node0.name));
    std::string echo_result = "did not run";
    std::thread echo([&] { echo_result = EchoNode(&node1); });
    const std::string ping_result = PingNode(&node0);
    echo.join();
    EXPECT_EQ(ping_result, "");
    EXPECT_EQ(echo_result, "");
  }
}

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param.name;
}

SOFTFAB_INSTANTIATE_PER_BACKEND(WaitFdTest);
INSTANTIATE_TEST_SUITE_P(Backends, SimWaitFdTest,
                         ::testing::Values(Backend{"sim", SF_BACKEND_SIM},
                                           Backend{"sim_faults", SF_BACKEND_SIM,
                                                   0.01, 0.01, 0.02}),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Backends, VerbsWaitFdTest,
                         ::testing::Values(Backend{"verbs", SF_BACKEND_VERBS}),
                         BackendName);

}  // namespace
