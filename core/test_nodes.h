// Test support for the core: endpoints on two simulated nodes, node 0's
// through a device that passes everything to the simulated one but events
// of the test's own, a GID the test may change, and (on request) the
// promise that its polls only read, as a real device makes. Used by the
// async events' tests, the send CQ's looks and the deferred reposts' tests.
#ifndef SOFTFAB_CORE_TEST_NODES_H_
#define SOFTFAB_CORE_TEST_NODES_H_

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <cerrno>
#include <deque>
#include <memory>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/async_events.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/event_queue.h"
#include "core/flags.h"

namespace softfab::core::test_support {

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
  // Says its polls only read the CQ, as a real device does (the simulator's
  // run its events): the core then takes a device's ways.
  void PretendPollsOnlyRead() { polls_only_read_ = true; }
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
  bool PollsOnlyRead() const override {
    return polls_only_read_ || inner_->PollsOnlyRead();
  }

 private:
  tp::Device* inner_;
  std::deque<tp::AsyncEvent> injected_;
  bool gid_changed_ = false;
  bool polls_only_read_ = false;
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
// `like`: the endpoints' attributes (their event readers are set here);
// `setup`: called with node 0's device and its endpoints' attributes (a copy
// of `like`) before any endpoint is made.
class Nodes {
 public:
  explicit Nodes(int eps_on_node0, bool read_events = true,
                 const sim::SimConfig& base = {}, const EndpointAttr& like = {},
                 void (*setup)(InjectingDevice&, EndpointAttr*) = nullptr) {
    sim::SimConfig config = base;
    config.nodes = 2;
    fabric_ = sim::CreateSimFabric(config);
    if (fabric_ == nullptr) {
      ADD_FAILURE() << "simulator configuration refused";
      return;
    }
    injecting_ = std::make_unique<InjectingDevice>(fabric_->device(0));
    EndpointAttr like0 = like;
    if (setup != nullptr) setup(*injecting_, &like0);
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
      EndpointAttr attr = n == 0 ? like0 : like;
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

}  // namespace softfab::core::test_support

#endif  // SOFTFAB_CORE_TEST_NODES_H_
