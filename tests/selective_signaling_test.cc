// Selective signaling (core/send_queue.cc), per backend, through sf_*: sends
// nobody waits for (injects) go to the device unsignaled, most of them, and
// finish with the next signaled work to that peer. What must hold:
// - every message arrives exactly once, in order, with its bytes, and the
//   sends that asked for an entry get exactly one each;
// - on the simulator, an inject stream reads about one send completion in
//   signal_every() (16) instead of one per send;
// - unsignaled work that nothing later retires (the last injects to a peer)
//   is retired when something waits for what it holds: tx slots that ran out
//   (tx_size 8, one inject to each of 8 peers, then more), or a fenced send
//   behind it. Without the kick both wait for ever.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/sim/sim_api.h"
#include "api/softfab/fabric.h"
#include "backends/sim/sim_fabric.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

constexpr size_t kLen = 24;
constexpr int kRounds = 200000;

class SelectiveSignalingTest : public ::softfab::testing::PerBackendTest {
 protected:
  // Reads every node's CQ once (entries of node 0 are kept).
  void ProgressAll(Fixture& f) {
    for (size_t i = 0; i < f.peers.size(); ++i) {
      sf_cq_tagged_entry e[16];
      const ssize_t n = sf_cq_read(f.peers[i].cq, e, 16);
      ASSERT_TRUE(n >= 0 || n == -SF_EAGAIN)
          << "node " << i << ": " << n << " " << sf_last_error();
      for (ssize_t k = 0; k < n; ++k) {
        if (i == 0) sender_entries_.push_back(e[k]);
        if (i != 0) received_[i].push_back(e[k]);
      }
    }
  }
  // Posts `fn` until it stops saying EAGAIN, progressing everyone between.
  template <typename Post>
  void Retry(Fixture& f, Post fn) {
    for (int r = 0; r < kRounds; ++r) {
      const ssize_t rc = fn();
      if (rc == 0) return;
      ASSERT_EQ(rc, -SF_EAGAIN) << sf_last_error();
      ASSERT_NO_FATAL_FAILURE(ProgressAll(f));
    }
    FAIL() << "still EAGAIN after " << kRounds << " rounds";
  }
  // Progresses until node `i` has received `n` messages.
  void WaitReceived(Fixture& f, int i, size_t n) {
    for (int r = 0; r < kRounds && received_[i].size() < n; ++r) {
      ASSERT_NO_FATAL_FAILURE(ProgressAll(f));
    }
    ASSERT_EQ(received_[i].size(), n) << "node " << i;
  }
  // Posts `n` receives at node `i` for tags 0..n-1, into bufs_[i].
  void PostReceives(Fixture& f, int i, int n) {
    bufs_[i].assign(n, std::vector<uint8_t>(kLen, 0));
    for (int k = 0; k < n; ++k) {
      ASSERT_EQ(
          sf_trecv(f.peers[i].ep, bufs_[i][k].data(), kLen, nullptr,
                   SF_ADDR_UNSPEC, static_cast<uint64_t>(k), 0, &bufs_[i][k]),
          0)
          << sf_last_error();
    }
  }
  // Node `i` got tags 0..n-1 once each, in order, with the bytes of
  // Pattern(kLen, seed(i, k)).
  template <typename Seed>
  void ExpectArrivedInOrder(int i, int n, Seed seed) {
    ASSERT_EQ(received_[i].size(), static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(received_[i][k].tag, static_cast<uint64_t>(k)) << i << "/" << k;
      EXPECT_EQ(received_[i][k].op_context, &bufs_[i][k]) << i << "/" << k;
      EXPECT_EQ(bufs_[i][k], Pattern(kLen, seed(i, k))) << i << "/" << k;
    }
  }
  uint64_t Completions(Fixture& f) {
    return softfab::sf_sim_fabric(f.fabric)->stats().completions;
  }

  std::vector<sf_cq_tagged_entry> sender_entries_;
  std::vector<std::vector<sf_cq_tagged_entry>> received_ =
      std::vector<std::vector<sf_cq_tagged_entry>>(16);
  std::vector<std::vector<std::vector<uint8_t>>> bufs_ =
      std::vector<std::vector<std::vector<uint8_t>>>(16);
};

TEST_P(SelectiveSignalingTest, InjectsArriveOnceEachAndEntriesComeForSends) {
  Fixture f;
  constexpr int kCount = 1600;
  f.adjust_ep = [](int node, sf_ep_attr* a) {
    if (node == 1) a->rx_size = kCount;  // every receive posted at once
  };
  ASSERT_TRUE(f.Open(backend(), 2));
  ASSERT_NO_FATAL_FAILURE(PostReceives(f, 1, kCount));
  const bool counted = backend().backend == SF_BACKEND_SIM &&
                       backend().drop == 0 && backend().duplicate == 0;
  const uint64_t before = counted ? Completions(f) : 0;
  // Every 8th a tsend with a context (signaled: its entry is awaited), the
  // rest injects.
  std::vector<std::vector<uint8_t>> out(kCount);
  std::vector<int> contexts(kCount);
  int entries_wanted = 0;
  for (int k = 0; k < kCount; ++k) {
    out[k] = Pattern(kLen, k + 1);
    sf_ep* ep = f.peers[0].ep;
    const sf_addr_t to = f.peers[0].addr[1];
    if (k % 8 == 7) {
      ++entries_wanted;
      ASSERT_NO_FATAL_FAILURE(Retry(f, [&] {
        return sf_tsend(ep, out[k].data(), kLen, nullptr, to,
                        static_cast<uint64_t>(k), &contexts[k]);
      }));
    } else {
      ASSERT_NO_FATAL_FAILURE(Retry(f, [&] {
        return sf_tinject(ep, out[k].data(), kLen, to,
                          static_cast<uint64_t>(k));
      }));
    }
  }
  ASSERT_NO_FATAL_FAILURE(WaitReceived(f, 1, kCount));
  for (int r = 0;
       r < kRounds && static_cast<int>(sender_entries_.size()) < entries_wanted;
       ++r) {
    ASSERT_NO_FATAL_FAILURE(ProgressAll(f));
  }
  ExpectArrivedInOrder(1, kCount, [](int, int k) { return k + 1; });
  ASSERT_EQ(static_cast<int>(sender_entries_.size()), entries_wanted);
  for (const sf_cq_tagged_entry& e : sender_entries_) {
    ASSERT_NE(e.op_context, nullptr);
    const int k =
        static_cast<int>(static_cast<int*>(e.op_context) - contexts.data());
    EXPECT_EQ(k % 8, 7) << "an entry for an inject";
    EXPECT_TRUE(e.flags & SF_SEND);
  }
  if (counted) {
    // kCount receive completions; the sends' own: one per tsend (200) and
    // about one inject in 16 (88); credit write-backs (one per 16 messages
    // received, mostly unsignaled). One completion per work request would
    // be more than 2 x kCount.
    const uint64_t used = Completions(f) - before;
    RecordProperty("completions", static_cast<int>(used));
    EXPECT_LE(used, kCount + kCount / 4) << "completions read: " << used;
    EXPECT_GE(used, static_cast<uint64_t>(kCount + entries_wanted));
  }
}

TEST_P(SelectiveSignalingTest, UnsignaledInjectsAreRetiredWhenTxSlotsRunOut) {
  Fixture f;
  constexpr int kPeers = 8;
  // 8 tx slots at node 0: its runs of unsignaled work are 1 long
  // (signal_every() = tx_size / 4), so one inject to each peer holds every
  // slot, and nothing after them to those peers would retire them.
  f.adjust_ep = [](int node, sf_ep_attr* a) {
    if (node == 0) a->tx_size = kPeers;
  };
  ASSERT_TRUE(f.Open(backend(), kPeers + 1));
  constexpr int kEach = 5;
  for (int i = 1; i <= kPeers; ++i) {
    ASSERT_NO_FATAL_FAILURE(PostReceives(f, i, kEach));
  }
  auto seed = [](int i, int k) { return 100 * i + k; };
  std::vector<std::vector<uint8_t>> out;
  for (int k = 0; k < kEach; ++k) {
    for (int i = 1; i <= kPeers; ++i) {
      out.push_back(Pattern(kLen, seed(i, k)));
      const uint8_t* data = out.back().data();
      ASSERT_NO_FATAL_FAILURE(Retry(f, [&] {
        return sf_tinject(f.peers[0].ep, data, kLen, f.peers[0].addr[i],
                          static_cast<uint64_t>(k));
      }));
    }
  }
  for (int i = 1; i <= kPeers; ++i) {
    ASSERT_NO_FATAL_FAILURE(WaitReceived(f, i, kEach));
    ExpectArrivedInOrder(i, kEach, seed);
  }
  EXPECT_TRUE(sender_entries_.empty()) << "an inject wrote an entry";
}

TEST_P(SelectiveSignalingTest, AFencedSendBehindUnsignaledInjectsGoesOut) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  ASSERT_NO_FATAL_FAILURE(PostReceives(f, 1, 4));
  auto seed = [](int, int k) { return 7 + k; };
  std::vector<std::vector<uint8_t>> out;
  for (int k = 0; k < 4; ++k) out.push_back(Pattern(kLen, seed(1, k)));
  // Connected first (the injects then go out at once, unsignaled).
  ASSERT_NO_FATAL_FAILURE(Retry(f, [&] {
    return sf_tinject(f.peers[0].ep, out[0].data(), kLen, f.peers[0].addr[1],
                      0);
  }));
  ASSERT_NO_FATAL_FAILURE(WaitReceived(f, 1, 1));
  for (int k = 1; k < 3; ++k) {
    ASSERT_EQ(sf_tinject(f.peers[0].ep, out[k].data(), kLen, f.peers[0].addr[1],
                         static_cast<uint64_t>(k)),
              0)
        << sf_last_error();
  }
  // Deferred until the injects before it are complete: only a kick
  // completes them (nothing else is posted to that peer).
  iovec iov{out[3].data(), kLen};
  int context = 0;
  sf_msg_tagged m =
      softfab::testing::TaggedMsg(&iov, f.peers[0].addr[1], 3, &context);
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_FENCE | SF_COMPLETION), 0)
      << sf_last_error();
  for (int r = 0; r < kRounds && sender_entries_.empty(); ++r) {
    ASSERT_NO_FATAL_FAILURE(ProgressAll(f));
  }
  ASSERT_EQ(sender_entries_.size(), 1u) << "the fenced send never completed";
  EXPECT_EQ(sender_entries_[0].op_context, &context);
  ASSERT_NO_FATAL_FAILURE(WaitReceived(f, 1, 4));
  ExpectArrivedInOrder(1, 4, seed);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(SelectiveSignalingTest);

}  // namespace
