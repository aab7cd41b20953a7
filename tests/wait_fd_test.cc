// The CQ wait fd (SF_WAIT_FD) with poll(2) and inside a libuv event loop: a
// ping-pong between two simulated nodes driven only by fd readiness.
#include <gtest/gtest.h>
#include <poll.h>
#include <uv.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Fixture;

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// Replaces the fixture's CQs by ones with wait fds: the fixture opens plain
// ones, so these tests open their own endpoints on its domains.
struct WaitPair {
  Fixture f;
  sf_cq* cq[2] = {};
  sf_ep* ep[2] = {};
  int fd[2] = {-1, -1};
  sf_addr_t peer_addr[2] = {};

  ::testing::AssertionResult Open() {
    if (auto r = f.Open(SF_BACKEND_SIM, 2); !r) return r;
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
      if (ep[i]) EXPECT_EQ(sf_close(&ep[i]->fid), 0);
      if (cq[i]) EXPECT_EQ(sf_close(&cq[i]->fid), 0);
    }
  }
};

TEST(WaitFdTest, ReadableExactlyWhileThereIsWork) {
  WaitPair w;
  ASSERT_TRUE(w.Open());
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
  // Bad arguments.
  int fd = -1;
  EXPECT_EQ(sf_control(&w.f.peers[0].cq->fid, SF_GETWAIT, &fd), -SF_EINVAL);
  EXPECT_EQ(sf_control(&w.cq[0]->fid, 99, &fd), -SF_ENOSYS);
  EXPECT_EQ(sf_control(&w.cq[0]->fid, SF_GETWAIT, nullptr), -SF_EINVAL);
  EXPECT_EQ(sf_trywait(w.f.fabric, nullptr, 1), -SF_EINVAL);
  sf_fid* plain[] = {&w.f.peers[0].cq->fid};
  EXPECT_EQ(sf_trywait(w.f.fabric, plain, 1), -SF_EINVAL);
  sf_cq_attr ca{};
  ca.format = SF_CQ_FORMAT_CONTEXT;
  ca.wait_obj = SF_WAIT_SET;
  sf_cq* cq = nullptr;
  EXPECT_EQ(sf_cq_open(w.f.peers[0].domain, &ca, &cq, nullptr), -SF_ENOSYS);
}

// A ping-pong of kRounds messages where every read happens in a libuv poll
// callback: the loop ends by itself when the last message is in and the
// fabric is idle (no fd readable, no handle active).
struct Side {
  WaitPair* w = nullptr;
  int me = 0;
  uv_poll_t poll;
  int received = 0;
  int sent = 0;
  char buf[64] = {};
  int ctx = 0;
};
constexpr int kRounds = 200;

void OnReadable(uv_poll_t* handle, int status, int /*events*/) {
  auto* s = static_cast<Side*>(handle->data);
  ASSERT_EQ(status, 0);
  sf_cq_tagged_entry e[8];
  const ssize_t n = sf_cq_read(s->w->cq[s->me], e, 8);
  ASSERT_TRUE(n > 0 || n == -SF_EAGAIN) << n;
  for (ssize_t i = 0; i < n; ++i) {
    if (!(e[i].flags & SF_RECV)) continue;
    ++s->received;
    int value;
    std::memcpy(&value, s->buf, sizeof value);
    EXPECT_EQ(value, s->received * 2 - (s->me == 1 ? 1 : 0));
    if (value == 2 * kRounds) {  // Node 0's last receive.
      uv_poll_stop(handle);
      return;
    }
    const int next = value + 1;
    if (s->received < kRounds) {
      ASSERT_EQ(sf_recv(s->w->ep[s->me], s->buf, sizeof s->buf, nullptr,
                        SF_ADDR_UNSPEC, &s->ctx),
                0);
    } else {
      uv_poll_stop(handle);  // Node 1's last receive: reply, then stop.
    }
    ASSERT_EQ(
        sf_inject(s->w->ep[s->me], &next, sizeof next, s->w->peer_addr[s->me]),
        0);
    ++s->sent;
  }
}

TEST(WaitFdTest, LibuvLoopDrivesAPingPong) {
  WaitPair w;
  ASSERT_TRUE(w.Open());
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  Side sides[2];
  for (int i = 0; i < 2; ++i) {
    sides[i].w = &w;
    sides[i].me = i;
    ASSERT_EQ(sf_recv(w.ep[i], sides[i].buf, sizeof sides[i].buf, nullptr,
                      SF_ADDR_UNSPEC, &sides[i].ctx),
              0);
    ASSERT_EQ(uv_poll_init(&loop, &sides[i].poll, w.fd[i]), 0);
    sides[i].poll.data = &sides[i];
    ASSERT_EQ(uv_poll_start(&sides[i].poll, UV_READABLE, OnReadable), 0);
  }
  const int first = 1;
  ASSERT_EQ(sf_inject(w.ep[0], &first, sizeof first, w.peer_addr[0]), 0);
  // Node 1 receives odd values, node 0 even ones.
  ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_EQ(sides[0].received, kRounds);
  EXPECT_EQ(sides[1].received, kRounds);
  for (Side& s : sides)
    uv_close(reinterpret_cast<uv_handle_t*>(&s.poll), nullptr);
  ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  ASSERT_EQ(uv_loop_close(&loop), 0);
}

}  // namespace
