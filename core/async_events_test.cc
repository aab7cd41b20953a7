// The async event dispatcher and the endpoint's handling of each event, on
// the simulator: events the fault plan cannot raise (device fatal, CQ and
// SRQ errors, a GID change) are injected by a device that passes everything
// else to the simulated one. And a guard: reading the events changes
// nothing in a run that has none to act on (the same digest and the same
// completions with and without the reader).
#include "core/async_events.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/event_queue.h"
#include "core/flags.h"
#include "core/prov_errno.h"
#include "core/test_nodes.h"

namespace softfab::core {
namespace {

namespace tp = ::softfab::transport;
using test_support::InjectingDevice;
using test_support::Nodes;

// The next error event of endpoint i's EQ, or an error status.
StatusOr<EqEvent> ErrorEvent(Nodes& n, int i) {
  n.ProgressAll();
  return n[i].eq->ReadError();
}

TEST(AsyncEventsCoreTest, DeviceFatalBreaksEveryEndpointOnTheDevice) {
  Nodes n(2);
  ASSERT_NO_FATAL_FAILURE(n.ConnectAll());
  // A send waits on each connection for an answer that will not come
  // (match-complete, and the peer posts no receive).
  uint8_t buf[64] = {};
  int ctx[2];
  for (int i = 0; i < 2; ++i) {
    iovec iov{buf, sizeof buf};
    SendArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.dest = n[i].addr[n.last()];
    a.context = &ctx[i];
    a.flags = kMatchComplete;
    ASSERT_TRUE(n[i].ep->Send(a).ok());
  }
  for (int r = 0; r < 100; ++r) n.ProgressAll();
  n.device0().Inject(tp::AsyncEventType::kDeviceFatal);
  for (int i = 0; i < 2; ++i) {
    auto ev = ErrorEvent(n, i);
    ASSERT_TRUE(ev.ok()) << i;
    EXPECT_EQ(ev->err, EIO);
    EXPECT_EQ(ev->prov_errno, kProvDeviceFatal);
    EXPECT_EQ(ev->fid, &n[i]);
    CqEntry e;
    ASSERT_EQ(n.ReadOne(i, &e), -CompletionQueue::kErrAvail) << i;
    CqErrEntry x;
    ASSERT_TRUE(n[i].cq->ReadError(&x).ok());
    EXPECT_EQ(x.op_context, &ctx[i]);
    EXPECT_EQ(x.prov_errno, kProvDeviceFatal);
    // Every later post is refused, naming the cause.
    const Status s = n.Send(i, n.last(), buf, sizeof buf, nullptr);
    EXPECT_EQ(s.code(), EIO);
    EXPECT_NE(std::string(s.message()).find("SF_PROV_DEVICE_FATAL"),
              std::string::npos)
        << s.message();
    EXPECT_EQ(n.Recv(i, buf, sizeof buf).code(), EIO);
    // A broken endpoint stays broken: with every failed operation reported,
    // a send still makes no new connection (issue 20 item 5: only a failed
    // peer reconnects).
    for (int r = 0; r < 100; ++r) n.ProgressAll();
    EXPECT_EQ(n.Send(i, n.last(), buf, sizeof buf, nullptr).code(), EIO);
    EXPECT_EQ(n[i].ep->stats().reconnects, 0u);
  }
  EXPECT_TRUE(n.reader0().device_fatal());
  EXPECT_EQ(n.reader0().stats().device_fatal, 1u);
  // The other node's endpoint is another device's: untouched.
  EXPECT_TRUE(n.Recv(n.last(), buf, sizeof buf).ok());
}

TEST(AsyncEventsCoreTest, CqErrorBreaksOnlyTheEndpointOwningTheCq) {
  Nodes n(2);
  ASSERT_NO_FATAL_FAILURE(n.ConnectAll());
  // Each endpoint makes its send CQ, then its receive CQ.
  ASSERT_EQ(n.device0().cq_handles().size(), 4u);
  const uint32_t second_ep_recv_cq = n.device0().cq_handles()[3];
  n.device0().Inject(tp::AsyncEventType::kCqErr, 0, second_ep_recv_cq);
  auto ev = ErrorEvent(n, 1);
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->prov_errno, kProvCqError);
  EXPECT_FALSE(ErrorEvent(n, 0).ok());
  uint8_t buf[8] = {};
  EXPECT_EQ(n.Send(1, n.last(), buf, sizeof buf, nullptr).code(), EIO);
  EXPECT_TRUE(n.Send(0, n.last(), buf, sizeof buf, nullptr).ok());
  // A CQ no endpoint owns (the sfv_* layer's, say) is nobody's business.
  n.device0().Inject(tp::AsyncEventType::kCqErr, 0, 999999);
  n.ProgressAll();
  EXPECT_EQ(n.reader0().stats().queue_errors, 1u);
  EXPECT_GE(n.reader0().stats().ignored, 1u);
}

TEST(AsyncEventsCoreTest, GidChangeIsReportedOnlyWhenTheNameNoLongerFits) {
  Nodes n(1);
  n.device0().Inject(tp::AsyncEventType::kGidChange);
  EXPECT_FALSE(ErrorEvent(n, 0).ok());  // Another GID of the port changed.
  n.device0().ChangeGid();
  n.device0().Inject(tp::AsyncEventType::kGidChange);
  auto ev = ErrorEvent(n, 0);
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->err, EADDRNOTAVAIL);
  EXPECT_EQ(ev->prov_errno, kProvAddressChanged);
  EXPECT_EQ(n.reader0().stats().address_changes, 2u);
  // Informational events change nothing.
  n.device0().Inject(tp::AsyncEventType::kSmChange);
  n.device0().Inject(tp::AsyncEventType::kPkeyChange);
  EXPECT_FALSE(ErrorEvent(n, 0).ok());
}

TEST(AsyncEventsCoreTest, AQpFatalOfTheConnectionManagerBreaksTheEndpoint) {
  Nodes n(1);
  ASSERT_NO_FATAL_FAILURE(n.ConnectAll());
  // The CM's UD QP is the endpoint's first (256); its RC QP is 257.
  n.device0().Inject(tp::AsyncEventType::kQpFatal, 256);
  auto ev = ErrorEvent(n, 0);
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->err, EIO);
  EXPECT_EQ(ev->prov_errno, kProvQpFatal);
  uint8_t buf[8] = {};
  const Status s = n.Send(0, n.last(), buf, sizeof buf, nullptr);
  EXPECT_EQ(s.code(), EIO);
  EXPECT_NE(std::string(s.message()).find("connection manager's"),
            std::string::npos)
      << s.message();
}

// The guard: a lossy run with a link flap between the two nodes (no event at
// either port) gives the same digest and the same completions, at the same
// virtual times, whether the events are read or not.
TEST(AsyncEventsCoreTest, ReadingTheEventsChangesNothingInARunWithoutAny) {
  auto run = [](bool read_events, std::vector<uint64_t>* seen) {
    sim::SimConfig config;
    config.master_seed = 11;
    sim::PacketFault drop;
    drop.kind = sim::PacketFaultKind::kDrop;
    drop.probability = 0.02;
    config.faults.packet_faults = {drop};
    sim::TimedFault down{sim::TimedFaultKind::kLinkDown, 300'000, 0, 1};
    sim::TimedFault up{sim::TimedFaultKind::kLinkUp, 900'000, 0, 1};
    config.faults.timed_faults = {down, up};
    sim::SimLinkConfig pair;
    pair.node_a = 0;
    pair.node_b = 1;
    config.links = {pair};
    Nodes n(2, read_events, config);
    std::vector<uint8_t> buf(20000, 1), in(20000);
    for (int m = 0; m < 200; ++m) {
      const int from = m % 2;
      const size_t len = m % 5 == 0 ? 20000 : 100;
      EXPECT_TRUE(n.Recv(n.last(), in.data(), in.size()).ok());
      while (n.Send(from, n.last(), buf.data(), len, nullptr).code() ==
             EAGAIN) {
        n.ProgressAll();
      }
      CqEntry e;
      EXPECT_EQ(n.ReadOne(from, &e), 1) << m;
      EXPECT_EQ(n.ReadOne(n.last(), &e), 1) << m;
      seen->push_back(e.len);
      seen->push_back(n.fabric().clock().NowNs());
    }
    // The faults did their part.
    EXPECT_GT(n.fabric().stats().packets_dropped, 0u);
    EXPECT_GT(n.fabric().stats().retransmits, 0u);
    EXPECT_GT(n.fabric().clock().NowNs(), 900'000u);
    return n.fabric().digest();
  };
  std::vector<uint64_t> with, without;
  const uint64_t digest_with = run(true, &with);
  const uint64_t digest_without = run(false, &without);
  EXPECT_EQ(digest_with, digest_without);
  EXPECT_EQ(with, without);
}

}  // namespace
}  // namespace softfab::core
