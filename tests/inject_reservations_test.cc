// Small injects sent inline without a tx op of their own (core/send.cc,
// PostInject) and the completion queue room they hold, on the simulator:
// - at transmit level (the default) each holds one CQ reservation until its
//   work request retires, so its failure can always be reported; once they
//   retire the room is back, and none writes an entry;
// - an endpoint destroyed with such injects in flight gives their room back
//   (the CQ may serve other endpoints);
// - at inject-complete level they hold none, before or after.
// The endpoint's injects_inline count shows they took the inline path.
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>

#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "tests/messaging_harness.h"

namespace softfab::testing {
namespace {

constexpr int kInjects = 5;

core::EndpointAttr InlineAttr(uint64_t op_flags = 0) {
  core::EndpointAttr attr;
  attr.inline_sends = true;  // as the API sets it for the simulators
  attr.op_flags = op_flags;
  return attr;
}

// Injects kInjects 8-byte messages from node 0 to node 1, tags 0.., without
// progress in between; every one must go inline.
void InjectFromZero(Cluster& c, const uint8_t (&out)[8]) {
  const uint64_t inline_before = c[0].ep->stats().injects_inline;
  iovec iov;
  for (int i = 0; i < kInjects; ++i) {
    core::SendArgs a = TSend(out, sizeof out, c[0].addr[1],
                             static_cast<uint64_t>(i), nullptr, &iov);
    a.flags = core::kInject;
    ASSERT_TRUE(c[0].ep->Send(a).ok()) << i;
  }
  ASSERT_EQ(c[0].ep->stats().injects_inline, inline_before + kInjects);
}

TEST(InjectReservationsTest, InlineInjectsHoldRoomUntilTheyRetire) {
  Cluster c(2, {}, InlineAttr());
  ExpectDelivered(c, 0, 1, 8);  // connected, credits granted
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const size_t room = c[0].cq->room();
  const uint8_t out[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_NO_FATAL_FAILURE(InjectFromZero(c, out));
  EXPECT_EQ(c[0].cq->room(), room - kInjects);
  // Each arrives; the sender's room comes back as their requests retire.
  uint8_t in[8];
  iovec riov;
  for (int i = 0; i < kInjects; ++i) {
    ASSERT_TRUE(c[1].ep
                    ->Recv(TRecv(in, sizeof in, static_cast<uint64_t>(i), 0,
                                 nullptr, &riov))
                    .ok());
    core::CqEntry e;
    ASSERT_EQ(c.ReadOne(1, &e), 1) << i;
    EXPECT_EQ(e.tag, static_cast<uint64_t>(i));
  }
  // Unsignaled work retires with the next signaled work to the peer.
  ExpectDelivered(c, 0, 1, 8);
  for (int r = 0; r < 1000 && c[0].cq->room() != room; ++r) c.ProgressAll();
  EXPECT_EQ(c[0].cq->room(), room);
  core::CqEntry e;
  EXPECT_EQ(c[0].cq->Read(&e, 1), -EAGAIN);  // an inject writes no entry
  // Destroyed with all of them retired, the endpoint gives nothing back
  // twice.
  c[0].ep.reset();
  EXPECT_EQ(c[0].cq->room(), room);
}

TEST(InjectReservationsTest, AnEndpointDestroyedWithInjectsInFlightGivesRoom) {
  Cluster c(2, {}, InlineAttr());
  ExpectDelivered(c, 0, 1, 8);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const size_t room = c[0].cq->room();
  const uint8_t out[8] = {};
  ASSERT_NO_FATAL_FAILURE(InjectFromZero(c, out));
  ASSERT_EQ(c[0].cq->room(), room - kInjects);
  c[0].ep.reset();  // none has retired
  EXPECT_EQ(c[0].cq->room(), room);
}

TEST(InjectReservationsTest, InjectCompleteInjectsHoldNoRoom) {
  Cluster c(2, {}, InlineAttr(core::kInjectComplete));
  ExpectDelivered(c, 0, 1, 8);
  for (int r = 0; r < 1000; ++r) c.ProgressAll();
  const size_t room = c[0].cq->room();
  const uint8_t out[8] = {};
  ASSERT_NO_FATAL_FAILURE(InjectFromZero(c, out));
  EXPECT_EQ(c[0].cq->room(), room);
  c[0].ep.reset();
  EXPECT_EQ(c[0].cq->room(), room);
}

}  // namespace
}  // namespace softfab::testing
