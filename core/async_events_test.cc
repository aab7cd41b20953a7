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

namespace softfab::core {
namespace {

namespace tp = ::softfab::transport;

// A simulated node's device with events of the test's own in front of the
// device's, and a GID the test may change. Records the handles of the CQs
// and SRQs made through it (an endpoint's, in the order it makes them).
class InjectingDevice final : public tp::Device {
 public:
  explicit InjectingDevice(tp::Device* inner) : inner_(inner) {}
  ~InjectingDevice() override = default;

  void Inject(tp::AsyncEventType type, uint32_t qp_num = 0,
              uint32_t cq_handle = 0, uint32_t srq_handle = 0) {
    tp::AsyncEvent e;
    e.event_type = type;
    e.qp_num = qp_num;
    e.cq_handle = cq_handle;
    e.srq_handle = srq_handle;
    e.port_num = 1;
    e.time_ns = inner_->clock().NowNs();
    injected_.push_back(e);
  }
  void ChangeGid() { gid_changed_ = true; }
  const std::vector<uint32_t>& cq_handles() const { return cq_handles_; }

  const char* name() const override { return inner_->name(); }
  Status QueryDevice(tp::DeviceAttr* attr) const override {
    return inner_->QueryDevice(attr);
  }
  Status QueryPort(uint8_t port_num, tp::PortAttr* attr) const override {
    return inner_->QueryPort(port_num, attr);
  }
  Status QueryGid(uint8_t port_num, int index, tp::Gid* gid) const override {
    Status s = inner_->QueryGid(port_num, index, gid);
    if (s.ok() && gid_changed_) gid->raw[15] ^= 0xFF;
    return s;
  }
  StatusOr<tp::ProtectionDomain*> AllocPd() override {
    return inner_->AllocPd();
  }
  StatusOr<tp::CompletionQueue*> CreateCq(int32_t cqe) override {
    auto cq = inner_->CreateCq(cqe);
    if (cq.ok()) cq_handles_.push_back((*cq)->handle());
    return cq;
  }
  StatusOr<tp::CompletionChannel*> CreateCompChannel() override {
    return inner_->CreateCompChannel();
  }
  StatusOr<tp::CompletionQueue*> CreateCqOnChannel(
      int32_t cqe, tp::CompletionChannel* channel) override {
    auto cq = inner_->CreateCqOnChannel(cqe, channel);
    if (cq.ok()) cq_handles_.push_back((*cq)->handle());
    return cq;
  }
  Status GetAsyncEvent(tp::AsyncEvent* event) override {
    if (!injected_.empty()) {
      *event = injected_.front();
      injected_.pop_front();
      return Status::Ok();
    }
    return inner_->GetAsyncEvent(event);
  }
  std::optional<bool> AsyncEventPending() const override {
    if (!injected_.empty()) return true;
    return inner_->AsyncEventPending();
  }
  const tp::Clock& clock() const override { return inner_->clock(); }
  void ScheduleWakeup(uint64_t t_ns) override { inner_->ScheduleWakeup(t_ns); }
  uint64_t Random() override { return inner_->Random(); }

 private:
  tp::Device* inner_;
  std::deque<tp::AsyncEvent> injected_;
  bool gid_changed_ = false;
  std::vector<uint32_t> cq_handles_;
};

// One endpoint's objects.
struct Ep {
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<AddressVector> av;
  std::unique_ptr<EventQueue> eq;
  std::unique_ptr<Endpoint> ep;
  std::vector<uint64_t> addr;  // Every endpoint's index in this one's AV.
};

// Endpoints on two simulated nodes: node 0's through an InjectingDevice,
// each with an event queue; with `read_events`, a dispatcher per node.
class Nodes {
 public:
  explicit Nodes(int eps_on_node0, bool read_events = true,
                 const sim::SimConfig& base = {}) {
    sim::SimConfig config = base;
    config.nodes = 2;
    fabric_ = sim::CreateSimFabric(config);
    if (fabric_ == nullptr) {
      ADD_FAILURE() << "simulator configuration refused";
      return;
    }
    injecting_ = std::make_unique<InjectingDevice>(fabric_->device(0));
    devices_[0] = injecting_.get();
    devices_[1] = fabric_->device(1);
    for (int n = 0; n < 2; ++n) {
      auto pd = devices_[n]->AllocPd();
      EXPECT_TRUE(pd.ok());
      pds_[n] = *pd;
      if (read_events) {
        readers_[n] = std::make_unique<AsyncEventDispatcher>(devices_[n]);
      }
    }
    eps_.reserve(eps_on_node0 + 1);  // Their addresses are the EQs' fids.
    for (int i = 0; i < eps_on_node0 + 1; ++i) {
      const int n = i < eps_on_node0 ? 0 : 1;
      Ep e;
      EndpointAttr attr;
      attr.async_events = readers_[n].get();
      e.cq = std::make_unique<CompletionQueue>(4096);
      e.av = std::make_unique<AddressVector>(64);
      e.eq = std::make_unique<EventQueue>(64);
      auto ep = Endpoint::Create(devices_[n], pds_[n], attr);
      EXPECT_TRUE(ep.ok()) << ep.status().message();
      e.ep = std::move(*ep);
      EXPECT_TRUE(e.ep->BindCq(e.cq.get(), kSend | kRecv).ok());
      EXPECT_TRUE(e.ep->BindAv(e.av.get()).ok());
      EXPECT_TRUE(e.ep->BindEq(e.eq.get()).ok());
      EXPECT_TRUE(e.ep->Enable().ok());
      eps_.push_back(std::move(e));
      eps_.back().ep->set_user_handle(&eps_.back());
    }
    for (Ep& a : eps_) {
      for (Ep& b : eps_) {
        auto index = a.av->Insert(b.ep->name());
        EXPECT_TRUE(index.ok());
        a.addr.push_back(*index);
      }
    }
  }

  Ep& operator[](int i) { return eps_[i]; }
  int size() const { return static_cast<int>(eps_.size()); }
  int last() const { return size() - 1; }  // The endpoint on node 1.
  InjectingDevice& device0() { return *injecting_; }
  AsyncEventDispatcher& reader0() { return *readers_[0]; }
  sim::SimFabric& fabric() { return *fabric_; }

  void ProgressAll() {
    for (Ep& e : eps_) e.ep->Progress();
  }
  // Sends `bytes` bytes from endpoint `from` to `to` (context `ctx`).
  Status Send(int from, int to, const void* buf, size_t bytes, void* ctx) {
    iovec iov{const_cast<void*>(buf), bytes};
    SendArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.dest = eps_[from].addr[to];
    a.context = ctx;
    return eps_[from].ep->Send(a);
  }
  Status Recv(int at, void* buf, size_t bytes) {
    iovec iov{buf, bytes};
    RecvArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    return eps_[at].ep->Recv(a);
  }
  // One message from each endpoint on node 0 to node 1, received.
  void ConnectAll() {
    std::vector<uint8_t> out(8), in(8 * last());
    for (int i = 0; i < last(); ++i) {
      ASSERT_TRUE(Recv(last(), &in[8 * i], 8).ok());
      ASSERT_TRUE(Send(i, last(), out.data(), 8, nullptr).ok());
    }
    for (int i = 0; i < last(); ++i) {
      ASSERT_EQ(ReadOne(i), 1);
      ASSERT_EQ(ReadOne(last()), 1);
    }
  }
  // Reads one entry of endpoint i's CQ, driving all: 1, -kErrAvail or
  // -EAGAIN.
  int ReadOne(int i, CqEntry* e = nullptr, int rounds = 100000) {
    CqEntry scratch;
    for (int r = 0; r < rounds; ++r) {
      ProgressAll();
      const int n = eps_[i].cq->Read(e ? e : &scratch, 1);
      if (n != -EAGAIN) return n;
    }
    return -EAGAIN;
  }

 private:
  std::unique_ptr<sim::SimFabric> fabric_;
  std::unique_ptr<InjectingDevice> injecting_;
  tp::Device* devices_[2] = {};
  tp::ProtectionDomain* pds_[2] = {};
  // Declared before the endpoints: they outlive them.
  std::unique_ptr<AsyncEventDispatcher> readers_[2];
  std::vector<Ep> eps_;
};

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
