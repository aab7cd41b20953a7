// fabtests functional/msg_epoll on sf_*: an SF_EP_MSG connection whose CQs
// have wait fds (SF_WAIT_FD), each in an epoll set with the CQ's fid as the
// event's data. The client sends a message and the server receives it, each
// side sleeping in epoll_wait only when sf_trywait says it may (fi_trywait's
// rule), and an epoll event names the CQ it was registered for. Both sides
// run in one thread: each sleeps once the other has posted.
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsMsgEpoll : public FabtestsCase {
 protected:
  void TearDown() override {
    if (epfd_ >= 0) close(epfd_);
  }

  // alloc_epoll_res: `cq`'s wait fd in the epoll set, its fid as data.
  void Watch(sf_cq* cq) {
    int fd = -1;
    ASSERT_EQ(sf_control(&cq->fid, SF_GETWAIT, &fd), 0) << sf_last_error();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &cq->fid;
    ASSERT_EQ(epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev), 0);
  }

  // send_recv's wait loop: read `cq`; when empty, sleep in epoll_wait if
  // sf_trywait allows. Every wake-up names `cq`. Returns the entry.
  sf_cq_tagged_entry WaitOne(sf_cq* cq) {
    sf_cq_tagged_entry e{};
    sf_fid* fids[] = {&cq->fid};
    ::softfab::testing::Deadline deadline(::softfab::testing::kDeviceWaitMs);
    ssize_t n;
    while ((n = sf_cq_read(cq, &e, 1)) == -SF_EAGAIN && !deadline.passed()) {
      const int rc = sf_trywait(f.fabric, fids, 1);
      if (rc != 0) {
        EXPECT_EQ(rc, -SF_EAGAIN) << sf_last_error();
        continue;
      }
      epoll_event ev{};
      const int woke = epoll_wait(epfd_, &ev, 1, deadline.left_ms());
      if (woke == 1) {
        EXPECT_EQ(ev.data.ptr, &cq->fid) << "woken for another CQ";
      }
    }
    EXPECT_EQ(n, 1) << sf_last_error();
    return e;
  }

  Closer closer_;
  int epfd_ = -1;
};

TEST_P(FabtestsMsgEpoll, SendRecvWaitingOnEpoll) {
  ASSERT_TRUE(f.Open(backend(), 2));
  Listener l;
  ASSERT_TRUE(l.Open(f, closer_));
  sf_eq* ceq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &ceq, nullptr), 0);
  closer_.Add(&ceq->fid);
  MsgEndpoint client, server;
  ASSERT_TRUE(client.Open(f, closer_, 1, ceq, nullptr, SF_WAIT_FD));
  ASSERT_TRUE(Connect(f, closer_, l, client, ceq, &server, SF_WAIT_FD));
  epfd_ = epoll_create1(0);
  ASSERT_GE(epfd_, 0);
  Watch(client.cq);
  Watch(server.cq);

  const char message[] = "Hello from Client!";
  char in[64] = {};
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_recv(server.ep, in, sizeof in, nullptr, SF_ADDR_UNSPEC, &rctx),
            0);
  ASSERT_EQ(sf_send(client.ep, message, sizeof message, nullptr, SF_ADDR_UNSPEC,
                    &sctx),
            0)
      << sf_last_error();
  // The client: its send completes.
  sf_cq_tagged_entry e = WaitOne(client.cq);
  EXPECT_EQ(e.op_context, &sctx);
  // The server: the message arrives.
  e = WaitOne(server.cq);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, sizeof message);
  EXPECT_STREQ(in, message);
  EXPECT_EQ(sf_shutdown(client.ep, 0), 0);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsMsgEpoll);

}  // namespace
}  // namespace softfab::fabtests
