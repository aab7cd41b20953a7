// Tests of what event-driven verbs programs use through sfv_*: the list of
// real devices (sfv_get_device_list, names, opening, the reason when there is
// none) and completion channels (arm, wait on the fd with poll(2), take the
// event, ack, re-arm; blocking and O_NONBLOCK gets; solicited-only arming;
// EBUSY while events are unacked or CQs use the channel), on the simulator and
// on a real device.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "api/softfab/verbs.h"
#include "tests/support/sfv_test_util.h"

namespace softfab::sfv_testing {
namespace {

TEST(SfvDeviceListTest, NoDeviceIsAnEmptyListAndAReason) {
  int n = -1;
  sfv_device** list = sfv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  if (n > 0) {
    sfv_free_device_list(list);
    GTEST_SKIP() << "this host has RDMA devices; see ListedDevicesOpen";
  }
  EXPECT_EQ(n, 0);
  EXPECT_EQ(list[0], nullptr);
  EXPECT_STRNE(sfv_last_error(), "");
  sfv_free_device_list(list);
}

TEST(SfvDeviceListTest, ListedDevicesOpenAndKeepTheirNames) {
  int n = 0;
  sfv_device** list = sfv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  if (n == 0) {
    sfv_free_device_list(list);
    GTEST_SKIP() << "no RDMA device to test on (" << sfv_last_error() << ")";
  }
  ASSERT_EQ(list[n], nullptr);
  std::string names;
  for (int i = 0; i < n; ++i) {
    ASSERT_NE(sfv_get_device_name(list[i]), nullptr);
    EXPECT_STRNE(sfv_get_device_name(list[i]), "");
    EXPECT_NE(sfv_get_device_guid(list[i]), 0u);
    names += std::string(sfv_get_device_name(list[i])) + " ";
  }
  std::printf("devices: %s\n", names.c_str());
  const char* want = RequestedDevice();
  sfv_device* dev = list[0];
  for (int i = 0; want != nullptr && i < n; ++i) {
    if (std::strcmp(sfv_get_device_name(list[i]), want) == 0) dev = list[i];
  }
  const std::string name = sfv_get_device_name(dev);
  const uint64_t guid = sfv_get_device_guid(dev);
  sfv_context* a = sfv_open_device(dev);
  ASSERT_NE(a, nullptr) << sfv_last_error();
  sfv_context* b = sfv_open_device(dev);
  ASSERT_NE(b, nullptr) << sfv_last_error();
  EXPECT_NE(a, b);
  // Contexts outlive the list, and so does what they say about the device.
  sfv_free_device_list(list);
  EXPECT_EQ(sfv_get_device_name(a->device), name);
  EXPECT_EQ(sfv_get_device_guid(b->device), guid);
  EXPECT_EQ(a->num_comp_vectors, 1);
  sfv_device_attr attr;
  ASSERT_EQ(sfv_query_device(a, &attr), 0);
  EXPECT_EQ(attr.node_guid, guid);
  EXPECT_EQ(attr.phys_port_cnt, 1);
  sfv_port_attr port;
  ASSERT_EQ(sfv_query_port(a, 1, &port), 0);
  EXPECT_EQ(port.state, SFV_PORT_ACTIVE);
  EXPECT_EQ(port.gid_tbl_len, 1);
  EXPECT_EQ(sfv_query_port(a, 2, &port), EINVAL);
  sfv_gid gid;
  ASSERT_EQ(sfv_query_gid(a, 1, 0, &gid), 0);
  EXPECT_EQ(sfv_query_gid(a, 1, 1, &gid), EINVAL);
  EXPECT_EQ(sfv_close_device(a), 0);
  EXPECT_EQ(sfv_close_device(b), 0);
  errno = 0;
  EXPECT_EQ(sfv_get_device_name(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

class SfvChannelTest : public SfvBackendTest {
 protected:
  // Whether the channel's fd becomes readable: on the simulator after running
  // the fabric until it is idle, on a device within `wait_ms`.
  bool Readable(sfv_comp_channel* ch, int wait_ms = static_cast<int>(kWaitMs)) {
    Drive();
    pollfd p{ch->fd, POLLIN, 0};
    const int r = poll(&p, 1, sim() ? 0 : wait_ms);
    return r == 1 && (p.revents & POLLIN) != 0;
  }
  static void SetNonBlocking(sfv_comp_channel* ch) {
    const int flags = fcntl(ch->fd, F_GETFL);
    ASSERT_GE(flags, 0);
    ASSERT_EQ(fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK), 0);
  }
  // A channel on side 0, a CQ on it (cq_context `cq_context`) and a QP of
  // side 0 on that CQ connected to one on side 1 with `receives` receives.
  void ChannelPair(sfv_comp_channel** ch, sfv_cq** cq, sfv_qp** a, sfv_qp** b,
                   int receives, void* cq_context = nullptr) {
    *ch = Channel(0);
    ASSERT_NE(*ch, nullptr);
    *cq = Cq(0, 16, *ch, cq_context);
    ASSERT_NE(*cq, nullptr);
    ASSERT_NO_FATAL_FAILURE(Pair(*cq, a, b, receives));
  }
  // Takes one event (0 and the CQ, or -1 with errno).
  static int TakeEvent(sfv_comp_channel* ch, sfv_cq** cq,
                       void** cq_context = nullptr) {
    void* ignored = nullptr;
    return sfv_get_cq_event(ch, cq,
                            cq_context != nullptr ? cq_context : &ignored);
  }
  // A QP on side 0 whose CQ is `cq`, connected to one on side 1 (which uses
  // `peer_cq`, or side 1's CQ), with `receives` receives posted on side 1.
  void Pair(sfv_cq* cq, sfv_qp** a, sfv_qp** b, int receives,
            sfv_cq* peer_cq = nullptr) {
    *a = Qp(0, nullptr, SFV_QPT_RC, cq);
    *b = Qp(1, nullptr, SFV_QPT_RC, peer_cq);
    ASSERT_NE(*a, nullptr);
    ASSERT_NE(*b, nullptr);
    ASSERT_NO_FATAL_FAILURE(Connect(*a, 1, (*b)->qp_num));
    ASSERT_NO_FATAL_FAILURE(Connect(*b, 0, (*a)->qp_num));
    for (int i = 0; i < receives; ++i) {
      ASSERT_EQ(Recv(*b, 1, 100 + i, 64 * i, 64), 0);
    }
  }
};
INSTANTIATE_TEST_SUITE_P(Backends, SfvChannelTest,
                         ::testing::Values(Backend::kSim, Backend::kDevice),
                         BackendName);

TEST_P(SfvChannelTest, ArmWaitOnTheFdTakeAckAndRearm) {
  int marker = 0;
  sfv_comp_channel* ch;
  sfv_cq* cq;
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ChannelPair(&ch, &cq, &a, &b, 3, &marker));
  EXPECT_EQ(ch->context, s_[0].ctx);
  EXPECT_GE(ch->fd, 0);
  EXPECT_EQ(cq->channel, ch);
  EXPECT_EQ(ch->refcnt, 1);
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(sfv_req_notify_cq(cq, 0), 0);
    EXPECT_FALSE(Readable(ch, 0)) << "round " << round;
    ASSERT_EQ(Send(a, round, 8), 0);
    ASSERT_TRUE(Readable(ch)) << "round " << round;
    sfv_cq* got = nullptr;
    void* got_context = nullptr;
    ASSERT_EQ(TakeEvent(ch, &got, &got_context), 0) << sfv_last_error();
    EXPECT_EQ(got, cq);
    EXPECT_EQ(got_context, &marker);
    EXPECT_FALSE(Readable(ch, 0)) << "one arm, one event";
    sfv_ack_cq_events(cq, 1);
    sfv_wc wc;
    ASSERT_EQ(PollOne(cq, &wc), 1);
    EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, SFV_WC_SEND);
    EXPECT_EQ(wc.wr_id, static_cast<uint64_t>(round));
    ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);  // b's receive, on no channel
  }
  // Not armed: a completion raises nothing.
  ASSERT_EQ(Send(a, 7, 8), 0);
  sfv_wc wc;
  ASSERT_EQ(PollOne(cq, &wc), 1);
  EXPECT_FALSE(Readable(ch, 200));
  EXPECT_EQ(sfv_destroy_comp_channel(ch), EBUSY);
}

TEST_P(SfvChannelTest, BlockingGetWaitsAndNonBlockingGetSaysEagain) {
  sfv_comp_channel* ch;
  sfv_cq* cq;
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ChannelPair(&ch, &cq, &a, &b, 2));
  // Blocking (the default): the event comes after the call starts.
  ASSERT_EQ(sfv_req_notify_cq(cq, 0), 0);
  ASSERT_EQ(Send(a, 1, 8), 0);
  sfv_cq* got = nullptr;
  ASSERT_EQ(TakeEvent(ch, &got), 0) << sfv_last_error();
  EXPECT_EQ(got, cq);
  sfv_ack_cq_events(cq, 1);
  sfv_wc wc;
  ASSERT_EQ(PollOne(cq, &wc), 1);
  if (sim()) {
    // Nothing armed and nothing left to run: no event can ever come, so the
    // simulator answers EAGAIN where ibv_get_cq_event would block forever.
    errno = 0;
    EXPECT_EQ(TakeEvent(ch, &got), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_NE(std::string(sfv_last_error()).find("ran out of events"),
              std::string::npos)
        << sfv_last_error();
  }
  // O_NONBLOCK: EAGAIN at once when nothing is pending...
  ASSERT_NO_FATAL_FAILURE(SetNonBlocking(ch));
  errno = 0;
  EXPECT_EQ(TakeEvent(ch, &got), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(sfv_req_notify_cq(cq, 0), 0);
  ASSERT_EQ(Send(a, 2, 8), 0);
  if (sim()) {
    // ... and on the simulator without running the fabric, so the event of
    // a completion not yet made is not there.
    const uint64_t before = sfv_sim_now_ns(fabric_);
    errno = 0;
    EXPECT_EQ(TakeEvent(ch, &got), -1);
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(sfv_sim_now_ns(fabric_), before);
  }
  ASSERT_TRUE(Readable(ch));
  ASSERT_EQ(TakeEvent(ch, &got), 0) << sfv_last_error();
  EXPECT_EQ(got, cq);
  sfv_ack_cq_events(cq, 1);
  ASSERT_EQ(PollOne(cq, &wc), 1);
  EXPECT_EQ(wc.wr_id, 2u);
}

// sfv_wait_comp_channels is how a C program waits on any backend: it returns
// once a channel has an event (on the simulator by running the fabric, which
// nothing else does while the program waits), takes none itself, ends at its
// timeout when nothing comes (in virtual time on the simulator, exactly), and
// refuses bad arguments.
TEST_P(SfvChannelTest, WaitCompChannelsWaitsOnEveryBackend) {
  sfv_comp_channel* ch;
  sfv_cq* cq;
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ChannelPair(&ch, &cq, &a, &b, 2));
  sfv_comp_channel* quiet = Channel(1);
  ASSERT_NE(quiet, nullptr);
  sfv_comp_channel* both[] = {quiet, ch};
  ASSERT_EQ(sfv_req_notify_cq(cq, 0), 0);
  ASSERT_EQ(Send(a, 1, 8), 0);
  ASSERT_EQ(sfv_wait_comp_channels(both, 2, static_cast<int>(kWaitMs)), 1)
      << sfv_last_error();
  pollfd p{ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 1) << "the event is there, not taken";
  SetNonBlocking(ch);
  sfv_cq* got = nullptr;
  ASSERT_EQ(TakeEvent(ch, &got), 0) << sfv_last_error();
  EXPECT_EQ(got, cq);
  sfv_ack_cq_events(cq, 1);
  sfv_wc wc;
  ASSERT_EQ(PollOne(cq, &wc), 1);
  ASSERT_EQ(PollOne(s_[1].cq, &wc), 1);
  // Nothing armed, nothing in flight: the timeout ends the wait.
  const uint64_t sim_before = sim() ? sfv_sim_now_ns(fabric_) : 0;
  const uint64_t wall_before = NowMs();
  EXPECT_EQ(sfv_wait_comp_channels(both, 2, 30), 0) << sfv_last_error();
  if (sim()) {
    EXPECT_EQ(sfv_sim_now_ns(fabric_), sim_before + 30'000'000u);
  } else {
    EXPECT_GE(NowMs() - wall_before, 30u);
  }
  errno = 0;
  EXPECT_EQ(sfv_wait_comp_channels(nullptr, 1, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(sfv_wait_comp_channels(both, 0, 0), -1);
  sfv_comp_channel* with_null[] = {ch, nullptr};
  EXPECT_EQ(sfv_wait_comp_channels(with_null, 2, 0), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(SfvChannelTest, UnackedEventsKeepTheCqAndBusyChannelsStay) {
  sfv_comp_channel* ch;
  sfv_cq* cq;
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(ChannelPair(&ch, &cq, &a, &b, 1));
  ASSERT_EQ(sfv_req_notify_cq(cq, 0), 0);
  ASSERT_EQ(Send(a, 1, 8), 0);
  ASSERT_TRUE(Readable(ch));
  sfv_cq* got = nullptr;
  ASSERT_EQ(TakeEvent(ch, &got), 0) << sfv_last_error();
  sfv_wc wc;
  ASSERT_EQ(PollOne(cq, &wc), 1);
  ASSERT_EQ(sfv_destroy_qp(a), 0);
  Forget(a);
  // Taken, not acked: ibv_destroy_cq would wait forever; this says EBUSY.
  EXPECT_EQ(sfv_destroy_cq(cq), EBUSY);
  EXPECT_EQ(sfv_destroy_comp_channel(ch), EBUSY);  // the CQ uses it
  EXPECT_EQ(sfv_close_device(s_[0].ctx), EBUSY);
  sfv_ack_cq_events(cq, 5);  // acks only the one taken
  ASSERT_EQ(sfv_destroy_cq(cq), 0);
  Forget(cq);
  EXPECT_EQ(ch->refcnt, 0);
  ASSERT_EQ(sfv_destroy_comp_channel(ch), 0);
  Forget(ch);
}

TEST_P(SfvChannelTest, SolicitedOnlyWakesForASolicitedReceive) {
  sfv_comp_channel* ch = Channel(1);
  ASSERT_NE(ch, nullptr);
  sfv_cq* rcq = Cq(1, 16, ch);
  ASSERT_NE(rcq, nullptr);
  sfv_qp* a;
  sfv_qp* b;
  ASSERT_NO_FATAL_FAILURE(Pair(s_[0].cq, &a, &b, 2, rcq));
  ASSERT_EQ(sfv_req_notify_cq(rcq, 1), 0);
  ASSERT_EQ(Send(a, 1, 8), 0);  // not solicited
  sfv_wc wc;
  ASSERT_EQ(PollOne(s_[0].cq, &wc), 1);  // delivered
  EXPECT_FALSE(Readable(ch, 200));
  ASSERT_EQ(Send(a, 2, 8, SFV_SEND_SOLICITED), 0);
  ASSERT_TRUE(Readable(ch));
  sfv_cq* got = nullptr;
  ASSERT_EQ(TakeEvent(ch, &got), 0) << sfv_last_error();
  EXPECT_EQ(got, rcq);
  sfv_ack_cq_events(rcq, 1);
  for (uint64_t id : {100u, 101u}) {
    ASSERT_EQ(PollOne(rcq, &wc), 1);
    EXPECT_EQ(wc.status, SFV_WC_SUCCESS);
    EXPECT_EQ(wc.wr_id, id);
  }
}

TEST_P(SfvChannelTest, BadArgumentsAreRefused) {
  errno = 0;
  EXPECT_EQ(sfv_create_comp_channel(nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(sfv_destroy_comp_channel(nullptr), EINVAL);
  EXPECT_EQ(sfv_req_notify_cq(nullptr, 0), EINVAL);
  sfv_cq* got = nullptr;
  void* got_context = nullptr;
  errno = 0;
  EXPECT_EQ(sfv_get_cq_event(nullptr, &got, &got_context), -1);
  EXPECT_EQ(errno, EINVAL);
  sfv_ack_cq_events(nullptr, 1);  // ignored
  sfv_comp_channel* ch = Channel(0);
  ASSERT_NE(ch, nullptr);
  errno = 0;
  EXPECT_EQ(sfv_get_cq_event(ch, nullptr, &got_context), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(sfv_create_cq(s_[1].ctx, 8, nullptr, ch, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_STREQ(sfv_last_error(), "channel of another context");
  EXPECT_EQ(sfv_close_device(s_[0].ctx), EBUSY);  // the channel is open
  // Arming a CQ without a channel is accepted and does nothing.
  EXPECT_EQ(sfv_req_notify_cq(s_[0].cq, 0), 0);
}

}  // namespace
}  // namespace softfab::sfv_testing
