// A device's deferred reposts (EndpointAttr::defer_reposts, Endpoint::Repost):
// a message's receive buffer goes back to the shared receive queue while the
// endpoint waits for the next message, not in the progress call that hands
// the message to the application; and never after the credit that lets the
// peer fill it again. On the simulator through a device that says its polls
// only read (core/test_nodes.h), so that progress stops polling at a short
// batch as it does on a device; the simulator itself posts at once.
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/sim/internal/cq.h"
#include "backends/sim/internal/device.h"
#include "backends/sim/internal/srq.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/test_nodes.h"

namespace softfab::core {
namespace {

using test_support::InjectingDevice;
using test_support::Nodes;

sim::internal::DeviceImpl* Node0(Nodes& n) {
  return static_cast<sim::internal::DeviceImpl*>(n.fabric().device(0));
}

// Receive buffers posted on node 0's shared receive queue now.
uint32_t PostedBuffers(Nodes& n) {
  uint32_t posted = 0;
  for (const auto& srq : Node0(n)->srqs_) {
    if (srq != nullptr) posted += srq->ring_.count();
  }
  return posted;
}

// Completions waiting in node 0's receive CQ (the second its endpoint made):
// arrivals whose buffers progress has not seen yet.
size_t Unpolled(Nodes& n) {
  const uint32_t handle = n.device0().cq_handles().at(1);
  for (const auto& cq : Node0(n)->cqs_) {
    if (cq != nullptr && cq->handle() == handle) {
      return cq->count_ + cq->overflow_.size();
    }
  }
  ADD_FAILURE() << "no receive CQ";
  return 0;
}

EndpointAttr Deferring() {
  EndpointAttr attr;
  attr.credits = 64;  // write-backs of 16
  attr.defer_reposts = true;
  return attr;
}

void PretendADevice(InjectingDevice& d, EndpointAttr*) {
  d.PretendPollsOnlyRead();
}

// Connects node 0 and node 1; the buffers then on node 0's queue (all).
uint32_t Connect(Nodes& n) {
  n.ConnectAll();
  for (int r = 0; r < 100; ++r) n.ProgressAll();
  return PostedBuffers(n);
}

// Node 0 posts `messages` receives of 8 bytes into `in`, node 1 sends each.
void ReceivesAndSends(Nodes& n, int messages, std::vector<uint8_t>* in,
                      const std::vector<uint8_t>& out) {
  in->assign(8 * messages, 0);
  for (int i = 0; i < messages; ++i) {
    ASSERT_TRUE(n.Recv(0, &(*in)[8 * i], 8).ok());
  }
  for (int i = 0; i < messages; ++i) {
    ASSERT_TRUE(n.Send(n.last(), 0, out.data(), out.size(), nullptr).ok());
  }
}

TEST(DeferredRepostsTest, ABufferGoesBackWhileTheNextMessageIsAwaited) {
  Nodes n(1, true, {}, Deferring(), PretendADevice);
  const uint32_t total = Connect(n);
  ASSERT_GT(total, 0u);
  std::vector<uint8_t> out(8), in(8);
  for (int i = 0; i < 10; ++i) {  // no write-back falls due in these
    out[0] = static_cast<uint8_t>(i);
    ASSERT_TRUE(n.Recv(0, in.data(), in.size()).ok());
    ASSERT_TRUE(n.Send(n.last(), 0, out.data(), out.size(), nullptr).ok());
    CqEntry e;
    int calls = 0;
    while (n[0].cq->Read(&e, 1) != 1) {
      ASSERT_LT(++calls, 10000) << i;
      n[0].ep->Progress();
    }
    EXPECT_EQ(in, out) << i;
    // The call that handed the message over did not post its buffer...
    EXPECT_EQ(PostedBuffers(n), total - 1) << i;
    // ...the next one, finding nothing, did.
    n[0].ep->Progress();
    EXPECT_EQ(PostedBuffers(n), total) << i;
    ASSERT_EQ(n.ReadOne(n.last()), 1);  // the send's completion
  }
  EXPECT_EQ(n[0].ep->stats().credit_writes, 0u);
}

TEST(DeferredRepostsTest, EveryBufferIsBackBeforeItsCreditIsWritten) {
  Nodes n(1, true, {}, Deferring(), PretendADevice);
  const uint32_t total = Connect(n);
  constexpr int kMessages = 40;
  std::vector<uint8_t> out(8, 7), in;
  ReceivesAndSends(n, kMessages, &in, out);
  // Progress alone (a read of the CQ would drive it too, unwatched).
  int writes = 0;
  for (int calls = 0; calls < 1000 && writes < 2; ++calls) {
    const uint64_t before = n[0].ep->stats().credit_writes;
    n[0].ep->Progress();
    if (n[0].ep->stats().credit_writes != before) {
      ++writes;
      // Every buffer progress has seen is back on the queue.
      EXPECT_EQ(PostedBuffers(n) + Unpolled(n), total) << "call " << calls;
    }
  }
  EXPECT_EQ(writes, 2);  // 40 freed, write-backs of 16
  for (int i = 0; i < kMessages; ++i) ASSERT_EQ(n.ReadOne(0), 1) << i;
  EXPECT_EQ(in, std::vector<uint8_t>(in.size(), 7));
}

// A stream whose write-backs are rarer than a chain is long (a grant of 256
// writes back every 64): the chain goes when 32 buffers wait.
TEST(DeferredRepostsTest, AChainGoesWhenFull) {
  EndpointAttr attr = Deferring();
  attr.credits = 256;
  Nodes n(1, true, {}, attr, PretendADevice);
  const uint32_t total = Connect(n);
  constexpr int kMessages = 48;
  std::vector<uint8_t> out(8, 9), in;
  ReceivesAndSends(n, kMessages, &in, out);
  size_t most_off = 0;
  for (int calls = 0; calls < kMessages; ++calls) {
    n[0].ep->Progress();
    const size_t off = total - PostedBuffers(n) - Unpolled(n);
    EXPECT_LE(off, 32u) << "call " << calls;
    most_off = std::max(most_off, off);
  }
  EXPECT_EQ(most_off, 32u);  // one chain gathered whole (none was idle)
  EXPECT_EQ(n[0].ep->stats().credit_writes, 0u);
  for (int i = 0; i < kMessages; ++i) ASSERT_EQ(n.ReadOne(0), 1) << i;
  EXPECT_EQ(in, std::vector<uint8_t>(in.size(), 9));
}

// A kick (a signaled credit write that retires unsignaled work, here for a
// fenced send behind an inject) writes the credits back too: it finds every
// buffer progress has seen back on the queue, the one handed over in the
// same call included.
TEST(DeferredRepostsTest, AKickWritesBackOnlyBuffersOnTheQueue) {
  Nodes n(1, true, {}, Deferring(), PretendADevice);
  const uint32_t total = Connect(n);
  std::vector<uint8_t> out(8, 3), in(8), back(8, 4);
  iovec iov{out.data(), out.size()};
  SendArgs inject;
  inject.iov = &iov;
  inject.iov_count = 1;
  inject.dest = n[0].addr[n.last()];
  inject.flags = kInject;
  ASSERT_TRUE(n[0].ep->Send(inject).ok());
  SendArgs fenced = inject;
  fenced.flags = kFence;
  fenced.context = &fenced;
  ASSERT_TRUE(n[0].ep->Send(fenced).ok());
  ASSERT_TRUE(n.Recv(0, in.data(), in.size()).ok());
  ASSERT_TRUE(n.Send(n.last(), 0, back.data(), back.size(), nullptr).ok());
  int kicks = 0;
  for (int calls = 0; calls < 1000 && kicks == 0; ++calls) {
    const uint64_t before = n[0].ep->stats().kicks;
    n[0].ep->Progress();
    if (n[0].ep->stats().kicks != before) {
      ++kicks;
      EXPECT_EQ(PostedBuffers(n) + Unpolled(n), total) << "call " << calls;
    }
  }
  EXPECT_EQ(kicks, 1);
  CqEntry e;
  ASSERT_EQ(n.ReadOne(0, &e), 1);
  ASSERT_EQ(n.ReadOne(0, &e), 1);
  EXPECT_EQ(in, back);
}

}  // namespace
}  // namespace softfab::core
