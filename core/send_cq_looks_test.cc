// Progress's looks at the send CQ on a device (a poll only reads it): while
// only unsignaled work is out (a stream of injects), the CQ can hold nothing
// but the flushed completions of a failed QP, so progress looks once in
// kQuietSendCqLooks calls (Endpoint::SendCqWorthALook), not on every call.
// What must hold: a failure's completions are still read, within that many
// calls, and by the call after the CQs are armed (a sleeper's); the first
// calls after it do skip the look (else the rule saves nothing); while
// signaled work is out, every call looks. On the simulator
// through a device that says its polls only read (core/test_nodes.h); the
// simulator itself polls every time.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/sim/internal/cq.h"
#include "backends/sim/internal/device.h"
#include "backends/sim/internal/qp.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/test_nodes.h"

namespace softfab::core {
namespace {

using test_support::InjectingDevice;
using test_support::Nodes;

// Node 0's send CQ: the first CQ its endpoint made.
sim::internal::CqImpl* SendCqOfNode0(Nodes& n) {
  auto* dev = static_cast<sim::internal::DeviceImpl*>(n.fabric().device(0));
  const uint32_t handle = n.device0().cq_handles().at(0);
  for (auto& cq : dev->cqs_) {
    if (cq != nullptr && cq->handle() == handle) return cq.get();
  }
  return nullptr;
}

// Failed work requests' completions waiting in `cq`.
size_t FailuresIn(const sim::internal::CqImpl& cq) {
  size_t n = 0;
  for (size_t i = 0; i < cq.count_; ++i) {
    const auto& wc = cq.ring_[(cq.head_ + i) & cq.mask_];
    if (wc.status != transport::WcStatus::kSuccess) ++n;
  }
  for (const auto& wc : cq.overflow_) {
    if (wc.status != transport::WcStatus::kSuccess) ++n;
  }
  return n;
}

// Node 0's RC QP.
sim::internal::QpImpl* RcQpOfNode0(Nodes& n) {
  auto* dev = static_cast<sim::internal::DeviceImpl*>(n.fabric().device(0));
  for (auto& qp : dev->qps_) {
    if (qp != nullptr && qp->init_.qp_type == transport::QpType::kRc) {
      return qp.get();
    }
  }
  return nullptr;
}

// Injects from node 0 to node 1, unsignaled; the QP then fails before any of
// them is acknowledged.
void FailUnderInjects(Nodes& n, int injects) {
  std::vector<uint8_t> out(8, 0x5A);
  iovec iov{out.data(), out.size()};
  for (int i = 0; i < injects; ++i) {
    SendArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.dest = n[0].addr[n.last()];
    a.flags = kInject;
    ASSERT_TRUE(n[0].ep->Send(a).ok()) << i;
  }
  ASSERT_GT(n[0].ep->stats().unsignaled, 0u);
  sim::internal::QpImpl* rc = RcQpOfNode0(n);
  ASSERT_NE(rc, nullptr);
  rc->ToError();  // flushes them, each with a completion of its own
}

EndpointAttr InlineInjects() {
  EndpointAttr attr;
  attr.inline_sends = true;  // injects go without a tx slot, unsignaled
  return attr;
}

void PretendADevice(InjectingDevice& d, EndpointAttr*) {
  d.PretendPollsOnlyRead();
}

// The same with a completion channel, so that its CQs can be armed.
void PretendADeviceWithAChannel(InjectingDevice& d, EndpointAttr* attr) {
  d.PretendPollsOnlyRead();
  auto channel = d.CreateCompChannel();
  if (!channel.ok()) ADD_FAILURE() << channel.status().message();
  attr->channel = channel.ok() ? *channel : nullptr;
}

// Connects, reads a signaled send back (the call that read it looked, so the
// quiet calls count from there), then fails node 0's QP under 5 unsignaled
// injects: the failures waiting in node 0's send CQ, which *send_cq names.
size_t FailAfterALook(Nodes& n, sim::internal::CqImpl** send_cq) {
  n.ConnectAll();
  for (int r = 0; r < 100; ++r) n.ProgressAll();  // nothing signaled is out
  *send_cq = SendCqOfNode0(n);
  if (*send_cq == nullptr || !(*send_cq)->empty()) return 0;
  std::vector<uint8_t> out(8, 1), in(8);
  if (!n.Recv(n.last(), in.data(), in.size()).ok() ||
      !n.Send(0, n.last(), out.data(), out.size(), &out).ok() ||
      n.ReadOne(0) != 1) {
    return 0;
  }
  FailUnderInjects(n, 5);
  return FailuresIn(**send_cq);
}

TEST(SendCqLooksTest, AFailureUnderUnsignaledInjectsIsReadWithinTheLooks) {
  Nodes n(1, true, {}, InlineInjects(), PretendADevice);
  sim::internal::CqImpl* send_cq = nullptr;
  const size_t failures = FailAfterALook(n, &send_cq);
  ASSERT_GT(failures, 0u);
  // The first call skips the look (nothing signaled is out)...
  n[0].ep->Progress();
  EXPECT_EQ(FailuresIn(*send_cq), failures);
  // ...and one within kQuietSendCqLooks (16) reads the failure (what the
  // endpoint then posts on the failed QP may fail at once: fewer is enough).
  int calls = 1;
  while (FailuresIn(*send_cq) >= failures && calls < 16) {
    n[0].ep->Progress();
    ++calls;
  }
  EXPECT_LT(FailuresIn(*send_cq), failures) << "after " << calls << " calls";
}

// An entry in the CQ before it is armed raises no event: a sleeper would not
// wake for it. So the call after an arming looks, whatever the count.
TEST(SendCqLooksTest, TheCallAfterAnArmingLooks) {
  Nodes n(1, true, {}, InlineInjects(), PretendADeviceWithAChannel);
  sim::internal::CqImpl* send_cq = nullptr;
  const size_t failures = FailAfterALook(n, &send_cq);
  ASSERT_GT(failures, 0u);
  n[0].ep->Progress();  // skips
  EXPECT_EQ(FailuresIn(*send_cq), failures);
  ASSERT_TRUE(n[0].ep->ArmCompletions().ok());
  n[0].ep->Progress();  // looks
  EXPECT_LT(FailuresIn(*send_cq), failures);
}

// While signaled work is out, every call looks: a send's completion is read
// by the call whose poll brought it (none waits in the CQ after a call).
TEST(SendCqLooksTest, WhileSignaledWorkIsOutEveryCallLooks) {
  Nodes n(1, true, {}, InlineInjects(), PretendADevice);
  n.ConnectAll();
  for (int r = 0; r < 100; ++r) n.ProgressAll();
  sim::internal::CqImpl* send_cq = SendCqOfNode0(n);
  ASSERT_NE(send_cq, nullptr);
  std::vector<uint8_t> out(8, 1), in(8);
  int sends = 0;
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(n.Recv(n.last(), in.data(), in.size()).ok());
    ASSERT_TRUE(n.Send(0, n.last(), out.data(), out.size(), &sends).ok());
    CqEntry e;
    int calls = 0;
    while (n[0].cq->Read(&e, 1) != 1) {
      ASSERT_LT(++calls, 10000) << "round " << round;
      n[0].ep->Progress();
      ASSERT_TRUE(send_cq->empty()) << "round " << round << " call " << calls;
    }
    ASSERT_EQ(n.ReadOne(n.last()), 1);
  }
}

// The simulator's own device (its polls run its events) looks every time.
TEST(SendCqLooksTest, WherePollsRunTheFabricEveryCallLooks) {
  Nodes n(1, true, {}, InlineInjects());
  n.ConnectAll();
  for (int r = 0; r < 100; ++r) n.ProgressAll();
  sim::internal::CqImpl* send_cq = SendCqOfNode0(n);
  ASSERT_NE(send_cq, nullptr);
  FailUnderInjects(n, 5);
  ASSERT_GT(FailuresIn(*send_cq), 0u);
  n[0].ep->Progress();
  EXPECT_EQ(FailuresIn(*send_cq), 0u);
}

}  // namespace
}  // namespace softfab::core
