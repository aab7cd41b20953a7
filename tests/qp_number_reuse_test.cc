// An endpoint whose device gives QP numbers again (as rxe and ConnectX do once
// their numbers wrap; the simulator's SimConfig::qp_number_cycle brings it
// into a short test): a peer's connection made anew forgets the number of
// the connection before its previous one, and must not forget it when the
// device has given that number to another peer's connection since. Before
// 33de8c8 it did, and that other peer's messages were dropped as strays.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>

#include "backends/sim/sim_fabric.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "tests/messaging_harness.h"

namespace softfab::testing {
namespace {

// Fails node 0's connection to node `peer`: a send of node 0's on it is
// flushed when its QP goes to ERROR, and reported failed.
void FailConnection(Cluster& c, int peer) {
  static const uint64_t kDoomed = 13;
  int ctx = 0;
  iovec iov;
  ASSERT_TRUE(c[0].ep
                  ->Send(TSend(&kDoomed, sizeof kDoomed, c[0].addr[peer], 1,
                               &ctx, &iov))
                  .ok());
  sim::internal::QpImpl* qp = SimRcQp(c, 0, peer);
  ASSERT_NE(qp, nullptr);
  qp->ToError();
  core::CqEntry e;
  ASSERT_EQ(c.ReadOne(0, &e), -core::CompletionQueue::kErrAvail);
  core::CqErrEntry x;
  ASSERT_TRUE(c[0].cq->ReadError(&x).ok());
  EXPECT_EQ(x.op_context, &ctx);
  EXPECT_EQ(x.err, EIO);
}

// Node 0 connects anew to node `peer` (its first send after the failure
// makes the connection) and a message gets through.
void Reconnect(Cluster& c, int peer) {
  static const uint64_t kHello = 42;
  uint64_t in = 0;
  iovec riov, siov;
  ASSERT_TRUE(
      c[peer].ep->Recv(TRecv(&in, sizeof in, 2, 0, nullptr, &riov)).ok());
  Status s;
  for (int r = 0; r < 100000; ++r) {
    s = c[0].ep->Send(
        TSend(&kHello, sizeof kHello, c[0].addr[peer], 2, nullptr, &siov));
    if (s.code() != EAGAIN && s.code() != EHOSTUNREACH) break;
    c.ProgressAll();
  }
  ASSERT_TRUE(s.ok()) << s.message();
  core::CqEntry e;
  ASSERT_EQ(c.ReadOne(peer, &e), 1);
  ASSERT_EQ(c.ReadOne(0, &e), 1);
  EXPECT_EQ(in, kHello);
}

TEST(QpNumberReuseTest, AnotherPeersConnectionKeepsANumberGivenAgain) {
  sim::SimConfig config;
  config.qp_number_cycle = 4;  // node 0: its UD QP and three RC QPs
  Cluster c(4, config);
  // Node 0's first connection to node 1 takes the number after the UD QP's.
  ExpectDelivered(c, 0, 1, 8);
  sim::internal::QpImpl* first = SimRcQp(c, 0, 1);
  ASSERT_NE(first, nullptr);
  const uint32_t x = first->qp_num();
  // It fails and is made anew (on the next number); node 3 takes the last.
  FailConnection(c, 1);
  Reconnect(c, 1);
  ASSERT_NE(SimRcQp(c, 0, 1)->qp_num(), x);
  ExpectDelivered(c, 0, 3, 8);
  // Node 2 connects to node 0, whose device gives it x again.
  ExpectDelivered(c, 2, 0, 8);
  ASSERT_NE(SimRcQp(c, 0, 2), nullptr);
  ASSERT_EQ(SimRcQp(c, 0, 2)->qp_num(), x);
  // Node 1's connection fails again and is made anew: node 0 forgets the
  // number of node 1's connection before the previous one, x, which now
  // names node 2's.
  FailConnection(c, 1);
  Reconnect(c, 1);
  EXPECT_EQ(c[0].ep->stats().reconnects, 2u);
  // Node 2's messages still arrive on x: none is taken for a stray.
  for (int i = 0; i < 3; ++i) ExpectDelivered(c, 2, 0, 8);
}

}  // namespace
}  // namespace softfab::testing
