// One endpoint with 64 peers, per backend (nodes 1 to 63 and a second
// endpoint on node 63: the verbs backend opens at most 64 nodes), and the
// traffic that puts the most signaled work on that endpoint's send CQ at once:
// every peer's SF_DELIVERY_COMPLETE messages arriving together (each answered
// by an ack), and rendezvous both ways (each request it takes posts an RDMA
// READ, each READ done an ack, while its own 64 KiB SF_DELIVERY_COMPLETE sends
// are out). Every one of those work requests is signaled, and the endpoint's
// QPs all complete into one send CQ of a fixed size (1,640 entries by default,
// core/endpoint.cc): more outstanding at once than it holds is a CQ overrun,
// which takes every QP of the endpoint down (IBV_EVENT_CQ_ERR; the simulator
// models it and counts it). Each connection's send queue is bounded (72), the
// endpoint's send CQ was not: 2,560 READs posted at once (40 requests from
// each of 64 peers) overran it, and every operation of node 0 failed. The
// send CQ's budget (Endpoint::SendCqHasRoom) now holds such work back until
// completions make room; every message must arrive exactly once, whole, and
// no operation may fail. The delivery-complete case is a guard: its acks are
// bounded by node 0's grants (1,193 for 64 peers), within the room.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api/sim/sim_api.h"
#include "api/softfab/fabric.h"
#include "backends/sim/sim_fabric.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace {

using ::softfab::testing::Backend;
using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

constexpr int kPeers = 64;
constexpr int kNodes = 64;     // the verbs backend's most
constexpr int kTagShift = 20;  // tag = peer << kTagShift | message number
using Payloads = std::vector<std::vector<std::vector<uint8_t>>>;

uint64_t TagOf(int peer, int n) {
  return (static_cast<uint64_t>(peer) << kTagShift) | static_cast<uint64_t>(n);
}
uint32_t SeedOf(uint64_t tag) { return static_cast<uint32_t>(tag * 7 + 1); }

// Node 0's endpoint and its kPeers peers: the endpoints of nodes 1 to 63,
// and peer 64, a second endpoint (with a CQ of its own) on node 63's domain.
class Star {
 public:
  ~Star() {
    if (extra_ep_) {
      EXPECT_EQ(sf_close(&extra_ep_->fid), 0) << sf_last_error();
    }
    if (extra_cq_) {
      EXPECT_EQ(sf_close(&extra_cq_->fid), 0) << sf_last_error();
    }
  }

  // Opens the nodes (`adjust` sets endpoint attributes by node) and peer 64.
  ::testing::AssertionResult Open(
      const Backend& b, std::function<void(int, sf_ep_attr*)> adjust) {
    f.adjust_ep = std::move(adjust);
    if (auto r = f.Open(b, kNodes); !r) return r;
    const int host = kNodes - 1;
    if (auto r = f.AddEndpoint(host, SF_EP_RDM, {&f.peers[host].av->fid}, true,
                               &extra_cq_, &extra_ep_);
        !r) {
      return r;
    }
    uint8_t name[SF_NAME_BYTES];
    size_t len = sizeof name;
    sf_addr_t extra_at_zero = 0;
    if (sf_getname(&extra_ep_->fid, name, &len) != 0 ||
        sf_av_insert(f.peers[0].av, name, 1, &extra_at_zero, 0, nullptr) != 1) {
      return ::testing::AssertionFailure() << "peer 64: " << sf_last_error();
    }
    for (int i = 1; i <= kPeers; ++i) {
      const bool extra = i == kPeers;
      ep_[i] = extra ? extra_ep_ : f.peers[i].ep;
      cq_[i] = extra ? extra_cq_ : f.peers[i].cq;
      zero_[i] = f.peers[extra ? host : i].addr[0];
      at_zero_[i] = extra ? extra_at_zero : f.peers[0].addr[i];
    }
    ep_[0] = f.peers[0].ep;
    cq_[0] = f.peers[0].cq;
    return ::testing::AssertionSuccess();
  }

  sf_ep* ep(int i) { return ep_[i]; }
  sf_cq* cq(int i) { return cq_[i]; }
  // Where `from` sends to reach `to` (one of them is node 0).
  sf_addr_t Dest(int from, int to) {
    return from == 0 ? at_zero_[to] : zero_[from];
  }

  // Progress everywhere, or on the peers only (node 0's device takes what
  // they send, and node 0 reads none of it yet).
  void Progress() {
    ASSERT_EQ(sf_cq_read(cq_[0], nullptr, 0), 0);
    ProgressPeers();
  }
  void ProgressPeers() {
    for (int i = 1; i <= kPeers; ++i)
      ASSERT_EQ(sf_cq_read(cq_[i], nullptr, 0), 0);
  }
  // Reads one entry of peer i while driving all.
  ssize_t ReadOne(int i, sf_cq_tagged_entry* e) {
    for (int r = 0; r < 200000; ++r) {
      const ssize_t n = sf_cq_read(cq_[i], e, 1);
      if (n != -SF_EAGAIN) return n;
      Progress();
    }
    return -SF_EAGAIN;
  }

  Fixture f;

 private:
  sf_ep* ep_[kPeers + 1] = {};
  sf_cq* cq_[kPeers + 1] = {};
  sf_addr_t zero_[kPeers + 1] = {};     // node 0, as peer i names it
  sf_addr_t at_zero_[kPeers + 1] = {};  // peer i, as node 0 names it
  sf_ep* extra_ep_ = nullptr;
  sf_cq* extra_cq_ = nullptr;
};

// Which message of which peer each arrival at node 0 is: each must come
// exactly once, with the bytes that were sent.
class Arrivals {
 public:
  explicit Arrivals(const std::vector<int>& sent) : sent_(sent) {
    got_.resize(sent.size());
    for (size_t i = 1; i < sent.size(); ++i) got_[i].assign(sent[i], false);
  }
  // Checks entry `e` (its bytes in `bytes`) against what its peer sent.
  void Check(const sf_cq_tagged_entry& e, const std::vector<uint8_t>& bytes,
             const Payloads& payload) {
    const int peer = static_cast<int>(e.tag >> kTagShift);
    const int k = static_cast<int>(e.tag & ((1u << kTagShift) - 1));
    ASSERT_GE(peer, 1);
    ASSERT_LT(peer, static_cast<int>(sent_.size()));
    ASSERT_LT(k, sent_[peer]);
    EXPECT_FALSE(got_[peer][k]) << "twice: " << peer << "/" << k;
    got_[peer][k] = true;
    EXPECT_EQ(e.len, bytes.size());
    EXPECT_EQ(bytes, payload[peer][k]) << peer << "/" << k;
  }

 private:
  const std::vector<int>& sent_;
  std::vector<std::vector<bool>> got_;
};

class SendCqBudgetTest : public ::softfab::testing::PerBackendTest {
 protected:
  // CQ overruns the simulated fabric saw (0 on a device: there an overrun
  // shows as failed operations, which the checks below catch too).
  uint64_t Overruns(Star& s) {
    if (backend().backend != SF_BACKEND_SIM) return 0;
    return softfab::sf_sim_fabric(s.f.fabric)->stats().cq_overruns;
  }

  // Connects node 0 with every peer: one message from each, then quiet.
  void Connect(Star& s) {
    std::vector<uint8_t> buf(8);
    sf_cq_tagged_entry e;
    for (int i = 1; i <= kPeers; ++i) {
      ASSERT_EQ(sf_trecv(s.ep(0), buf.data(), buf.size(), nullptr,
                         SF_ADDR_UNSPEC, 0, ~uint64_t{0}, nullptr),
                0);
      ASSERT_EQ(sf_tsend(s.ep(i), buf.data(), buf.size(), nullptr, s.Dest(i, 0),
                         0, nullptr),
                0)
          << sf_last_error();
      ASSERT_EQ(s.ReadOne(0, &e), 1) << sf_last_error();
      ASSERT_EQ(s.ReadOne(i, &e), 1) << sf_last_error();
    }
    for (int r = 0; r < 2000; ++r) ASSERT_NO_FATAL_FAILURE(s.Progress());
  }

  // Sends from `from` to `to` (tagged, SF_DELIVERY_COMPLETE; numbered from
  // `first`) until the endpoint says -SF_EAGAIN or `max` went; returns how
  // many went. The buffers stay in `out` (a rendezvous is read from them).
  int SendUntilRefused(Star& s, int from, int to, size_t size, int max,
                       int tag_peer, std::vector<std::vector<uint8_t>>* out,
                       int first = 0) {
    int n = 0;
    while (n < max) {
      const uint64_t tag = TagOf(tag_peer, first + n);
      out->push_back(Pattern(size, SeedOf(tag)));
      iovec iov{out->back().data(), size};
      sf_msg_tagged m =
          softfab::testing::TaggedMsg(&iov, s.Dest(from, to), tag, nullptr);
      const ssize_t rc = sf_tsendmsg(s.ep(from), &m, SF_DELIVERY_COMPLETE);
      if (rc != 0) {
        EXPECT_EQ(rc, -SF_EAGAIN) << sf_last_error();
        out->pop_back();
        break;
      }
      ++n;
    }
    return n;
  }

  // Reads node `node`'s completions until `want` arrived, driving every
  // node; error completions fail the test (each counted as one arrived).
  // Successful entries go to `got` when it is given.
  void Drain(Star& s, int node, int want,
             std::vector<sf_cq_tagged_entry>* got = nullptr) {
    int seen = 0, errors = 0;
    sf_cq_err_entry first{};
    for (int r = 0; r < 400000 && seen < want; ++r) {
      sf_cq_tagged_entry e;
      const ssize_t n = sf_cq_read(s.cq(node), &e, 1);
      if (n == 1) {
        ++seen;
        if (got != nullptr) got->push_back(e);
      } else if (n == -SF_EAVAIL) {
        sf_cq_err_entry x{};
        ASSERT_EQ(sf_cq_readerr(s.cq(node), &x, 0), 1);
        if (errors++ == 0) first = x;
        ++seen;
      } else {
        ASSERT_EQ(n, -SF_EAGAIN);
        ASSERT_NO_FATAL_FAILURE(s.Progress());
      }
    }
    EXPECT_EQ(errors, 0) << "node " << node << ": error completions, the first "
                         << first.err << " (prov_errno " << first.prov_errno
                         << ")";
    ASSERT_EQ(seen, want) << "node " << node;
  }
};

TEST_P(SendCqBudgetTest, DeliveryCompleteFromSixtyFourPeersAtOnce) {
  // Eager messages: node 0 answers each with an ack as it arrives (none is
  // received yet: they wait as unexpected messages).
  constexpr size_t kSize = 64;
  Star s;
  ASSERT_TRUE(s.Open(backend(), nullptr));
  ASSERT_NO_FATAL_FAILURE(Connect(s));
  const uint64_t overruns_before = Overruns(s);
  Payloads payload(kPeers + 1);
  std::vector<int> sent(kPeers + 1, 0);
  int total = 0;
  for (int i = 1; i <= kPeers; ++i) {
    sent[i] = SendUntilRefused(s, i, 0, kSize, 1 << 12, i, &payload[i]);
    total += sent[i];
  }
  // All of them reach node 0's device before it polls: it acks them all in
  // one go (every grant node 0 made: 1,193 with 64 peers and the default
  // attributes).
  ASSERT_GT(total, 1000);
  for (int r = 0; r < 2000; ++r) ASSERT_NO_FATAL_FAILURE(s.ProgressPeers());
  // Every sender's messages delivered (acked), none failed.
  for (int i = 1; i <= kPeers; ++i) {
    ASSERT_NO_FATAL_FAILURE(Drain(s, i, sent[i])) << "sender " << i;
  }
  EXPECT_EQ(Overruns(s), overruns_before) << "node 0's send CQ overran";
  // Then each arrives exactly once, whole.
  Arrivals arrivals(sent);
  std::vector<uint8_t> in(kSize);
  for (int n = 0; n < total; ++n) {
    ASSERT_EQ(sf_trecv(s.ep(0), in.data(), kSize, nullptr, SF_ADDR_UNSPEC, 0,
                       ~uint64_t{0}, nullptr),
              0);
    sf_cq_tagged_entry e;
    ASSERT_EQ(s.ReadOne(0, &e), 1) << "message " << n;
    ASSERT_NO_FATAL_FAILURE(arrivals.Check(e, in, payload));
  }
  for (int r = 0; r < 500; ++r) ASSERT_NO_FATAL_FAILURE(s.Progress());
  sf_cq_tagged_entry e;
  EXPECT_EQ(sf_cq_read(s.cq(0), &e, 1), -SF_EAGAIN) << "one more arrived";
}

TEST_P(SendCqBudgetTest, RendezvousBothWaysWithSixtyFourPeersAtOnce) {
  constexpr size_t kToZero = 16 * 1024;    // each peer's messages to node 0
  constexpr int kToZeroEach = 40;          // within its 64 credits
  constexpr size_t kFromZero = 64 * 1024;  // node 0's to each peer
  constexpr int kFromZeroEach = 4;         // its tx_size, 256, over 64 peers
  Star s;
  // Node 0 may post a receive for every request it holds.
  ASSERT_TRUE(s.Open(backend(), [](int i, sf_ep_attr* a) {
    if (i == 0) a->rx_size = 1 << 13;
  }));
  ASSERT_NO_FATAL_FAILURE(Connect(s));
  const uint64_t overruns_before = Overruns(s);
  // Every peer sends node 0 rendezvous requests, as its credits allow, until
  // kToZeroEach went; node 0 keeps them as unexpected messages (no receive
  // is posted), each within the credits the peer has (so each credit comes
  // back and the next request can go).
  Payloads to_zero(kPeers + 1);
  std::vector<int> sent(kPeers + 1, 0);
  int total = 0;
  for (int r = 0; r < 10000 && total < kPeers * kToZeroEach; ++r) {
    for (int i = 1; i <= kPeers; ++i) {
      const int n = SendUntilRefused(s, i, 0, kToZero, kToZeroEach - sent[i], i,
                                     &to_zero[i], sent[i]);
      sent[i] += n;
      total += n;
    }
    ASSERT_NO_FATAL_FAILURE(s.Progress());
  }
  ASSERT_EQ(total, kPeers * kToZeroEach);
  for (int r = 0; r < 2000; ++r) ASSERT_NO_FATAL_FAILURE(s.Progress());
  // Node 0 sends each peer 64 KiB messages, as many as its tx_size allows,
  // into receives the peers posted.
  std::vector<std::vector<uint8_t>> at_peer(kPeers + 1);
  for (int i = 1; i <= kPeers; ++i) {
    at_peer[i].resize(kFromZero * kFromZeroEach);
    for (int k = 0; k < kFromZeroEach; ++k) {
      ASSERT_EQ(sf_trecv(s.ep(i), &at_peer[i][k * kFromZero], kFromZero,
                         nullptr, s.Dest(i, 0), TagOf(0, k), 0, nullptr),
                0);
    }
  }
  Payloads from_zero(kPeers + 1);
  int from_zero_total = 0;
  for (int i = 1; i <= kPeers; ++i) {
    const int n =
        SendUntilRefused(s, 0, i, kFromZero, kFromZeroEach, 0, &from_zero[i]);
    ASSERT_EQ(n, kFromZeroEach) << "peer " << i;
    from_zero_total += n;
  }
  // Then node 0 posts a receive for every request it holds, without polling
  // in between: each starts a READ at once (more than its send CQ holds).
  std::vector<std::vector<uint8_t>> in(total, std::vector<uint8_t>(kToZero));
  for (int n = 0; n < total; ++n) {
    ASSERT_EQ(sf_trecv(s.ep(0), in[n].data(), kToZero, nullptr, SF_ADDR_UNSPEC,
                       0, ~uint64_t{0}, &in[n]),
              0)
        << sf_last_error();
  }
  // Everything completes: node 0's receives and sends, the peers' sends and
  // receives, none in error.
  std::vector<sf_cq_tagged_entry> at_zero;
  ASSERT_NO_FATAL_FAILURE(Drain(s, 0, total + from_zero_total, &at_zero));
  EXPECT_EQ(Overruns(s), overruns_before) << "node 0's send CQ overran";
  for (int i = 1; i <= kPeers; ++i) {
    ASSERT_NO_FATAL_FAILURE(Drain(s, i, sent[i] + kFromZeroEach))
        << "peer " << i;
  }
  // Each message to node 0 arrived exactly once, whole.
  Arrivals arrivals(sent);
  int received = 0;
  for (const sf_cq_tagged_entry& e : at_zero) {
    if (!(e.flags & SF_RECV)) continue;
    ++received;
    ASSERT_NO_FATAL_FAILURE(arrivals.Check(
        e, *static_cast<const std::vector<uint8_t>*>(e.op_context), to_zero));
  }
  EXPECT_EQ(received, total);
  // And each of node 0's messages at its peer.
  for (int i = 1; i <= kPeers; ++i) {
    for (int k = 0; k < kFromZeroEach; ++k) {
      EXPECT_TRUE(std::equal(from_zero[i][k].begin(), from_zero[i][k].end(),
                             at_peer[i].begin() + k * kFromZero))
          << "peer " << i << " message " << k;
    }
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(SendCqBudgetTest);

}  // namespace
