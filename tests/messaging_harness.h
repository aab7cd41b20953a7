// Test harness: N nodes on one simulated fabric, one RDM endpoint each, every
// endpoint's name in every address vector. Drives progress by reading CQs.
#ifndef SOFTFAB_TESTS_MESSAGING_HARNESS_H_
#define SOFTFAB_TESTS_MESSAGING_HARNESS_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/sim/internal/device.h"
#include "backends/sim/internal/qp.h"
#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "tests/test_pattern.h"

namespace softfab::testing {

struct Node {
  transport::Device* device = nullptr;
  transport::ProtectionDomain* pd = nullptr;
  std::unique_ptr<core::CompletionQueue> cq;
  std::unique_ptr<core::AddressVector> av;
  std::unique_ptr<core::Endpoint> ep;
  std::vector<uint64_t> addr;  // addr[j]: node j's index in this node's AV.
};

class Cluster {
 public:
  Cluster(int nodes, const sim::SimConfig& base = {},
          const core::EndpointAttr& attr = {}, size_t cq_size = 4096,
          uint64_t bind_flags = 0) {
    sim::SimConfig config = base;
    config.nodes = nodes;
    fabric_ = sim::CreateSimFabric(config);
    EXPECT_NE(fabric_, nullptr);
    for (int i = 0; i < nodes; ++i) {
      Node n;
      n.device = fabric_->device(i);
      auto pd = n.device->AllocPd();
      EXPECT_TRUE(pd.ok()) << pd.status().message();
      n.pd = *pd;
      n.cq = std::make_unique<core::CompletionQueue>(cq_size);
      n.av = std::make_unique<core::AddressVector>(1024);
      auto ep = core::Endpoint::Create(n.device, n.pd, attr);
      EXPECT_TRUE(ep.ok()) << ep.status().message();
      n.ep = std::move(*ep);
      EXPECT_TRUE(
          n.ep->BindCq(n.cq.get(), core::kSend | core::kRecv | bind_flags)
              .ok());
      EXPECT_TRUE(n.ep->BindAv(n.av.get()).ok());
      EXPECT_TRUE(n.ep->Enable().ok());
      nodes_.push_back(std::move(n));
    }
    for (auto& n : nodes_) {
      for (auto& m : nodes_) {
        auto index = n.av->Insert(m.ep->name());
        EXPECT_TRUE(index.ok());
        n.addr.push_back(*index);
      }
    }
  }

  Node& operator[](int i) { return nodes_[i]; }
  int size() const { return static_cast<int>(nodes_.size()); }
  sim::SimFabric& fabric() { return *fabric_; }

  // Runs progress on every node once.
  void ProgressAll() {
    for (auto& n : nodes_) n.ep->Progress();
  }

  // Reads one completion from node i, driving every node's progress, for at
  // most `rounds` rounds. Returns 1 (entry), -kErrAvail (error pending), or
  // -EAGAIN (nothing came).
  int ReadOne(int i, core::CqEntry* e, int rounds = 100000) {
    for (int r = 0; r < rounds; ++r) {
      ProgressAll();
      const int n = nodes_[i].cq->Read(e, 1);
      if (n != -EAGAIN) return n;
    }
    return -EAGAIN;
  }

 private:
  std::unique_ptr<sim::SimFabric> fabric_;
  std::vector<Node> nodes_;
};

// Node `node`'s RC QP connected to node `peer` (the simulator's LID of node i
// is i + 1), or with peer < 0 its last RC QP; null if there is none.
inline sim::internal::QpImpl* SimRcQp(Cluster& c, int node, int peer = -1) {
  auto* dev = static_cast<sim::internal::DeviceImpl*>(c.fabric().device(node));
  sim::internal::QpImpl* rc = nullptr;
  for (auto& qp : dev->qps_) {
    if (qp != nullptr && qp->init_.qp_type == transport::QpType::kRc &&
        (peer < 0 || qp->attr_.ah_attr.dlid == peer + 1)) {
      rc = qp.get();
    }
  }
  return rc;
}

inline core::SendArgs TSend(const void* buf, size_t len, uint64_t dest,
                            uint64_t tag, void* context, iovec* iov) {
  iov->iov_base = const_cast<void*>(buf);
  iov->iov_len = len;
  core::SendArgs a;
  a.iov = iov;
  a.iov_count = 1;
  a.dest = dest;
  a.tag = tag;
  a.context = context;
  a.tagged = true;
  return a;
}

inline core::RecvArgs TRecv(void* buf, size_t len, uint64_t tag,
                            uint64_t ignore, void* context, iovec* iov) {
  iov->iov_base = buf;
  iov->iov_len = len;
  core::RecvArgs a;
  a.iov = iov;
  a.iov_count = 1;
  a.tag = tag;
  a.ignore = ignore;
  a.context = context;
  a.tagged = true;
  return a;
}

// Posts send `a` at node `from`, retried while every node's progress runs
// (for credits or room), at most 1000 times; whether it was taken.
inline bool SendRetrying(Cluster& c, int from, const core::SendArgs& a) {
  for (int r = 0; r < 1000; ++r) {
    const bool sent = c[from].ep->Send(a).ok();
    c.ProgressAll();
    if (sent) return true;
  }
  return false;
}

// An untagged multi-recv buffer of `len` bytes at `buf`, into `iov`.
inline core::RecvArgs MultiRecv(void* buf, size_t len, void* context,
                                iovec* iov) {
  *iov = iovec{buf, len};
  core::RecvArgs a;
  a.iov = iov;
  a.iov_count = 1;
  a.context = context;
  a.flags = core::kMultiRecv;
  return a;
}

// A tagged receive of core::Endpoint::kIovMax pieces of `piece` bytes, the
// k-th at `base` + k x `stride`, into `iov` (kIovMax entries).
inline core::RecvArgs PiecesRecv(uint8_t* base, size_t piece, size_t stride,
                                 uint64_t tag, void* context, iovec* iov) {
  for (size_t k = 0; k < core::Endpoint::kIovMax; ++k) {
    iov[k] = iovec{base + k * stride, piece};
  }
  core::RecvArgs a;
  a.iov = iov;
  a.iov_count = core::Endpoint::kIovMax;
  a.tag = tag;
  a.tagged = true;
  a.context = context;
  return a;
}

// Sends `size` bytes from node `from` to node `to` (tag 9) and expects them
// whole at the receiver and the send completed without error.
inline void ExpectDelivered(Cluster& c, int from, int to, size_t size) {
  SCOPED_TRACE(std::to_string(size) + " bytes " + std::to_string(from) +
               " -> " + std::to_string(to));
  const std::vector<uint8_t> out = Pattern(size, static_cast<int>(size));
  std::vector<uint8_t> in(size, 0);
  iovec riov, siov;
  ASSERT_TRUE(
      c[to].ep->Recv(TRecv(in.data(), size, 9, 0, nullptr, &riov)).ok());
  ASSERT_TRUE(
      c[from]
          .ep
          ->Send(TSend(out.data(), size, c[from].addr[to], 9, nullptr, &siov))
          .ok());
  core::CqEntry e;
  int n = c.ReadOne(to, &e);
  if (n == -core::CompletionQueue::kErrAvail) {
    core::CqErrEntry x;
    ASSERT_TRUE(c[to].cq->ReadError(&x).ok());
    FAIL() << "receive failed: err " << x.err << " prov " << x.prov_errno;
  }
  ASSERT_EQ(n, 1);
  EXPECT_EQ(in, out);
  n = c.ReadOne(from, &e);
  if (n == -core::CompletionQueue::kErrAvail) {
    core::CqErrEntry x;
    ASSERT_TRUE(c[from].cq->ReadError(&x).ok());
    FAIL() << "send failed: err " << x.err << " prov " << x.prov_errno;
  }
  EXPECT_EQ(n, 1);
}

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_MESSAGING_HARNESS_H_
