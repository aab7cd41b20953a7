// Soak (issue 13): fault_test's exactly-once traffic under a harsher plan,
// over many seeds. Every packet, the connection manager's datagrams included:
// 5% lost, 5% duplicated, 10% held back (reordered); and the link between
// the receiver and each sender flaps (down 1 ms, twice). Two senders each
// send 40 tagged messages (eager, empty and rendezvous sizes) to a third
// node; every message must arrive exactly once with its bytes, nothing past
// its buffer, and every send must complete without error.
//
// Long: tagged manual and soak, run by CI with a time bound
// (`bazel test //tests:soak_test --test_timeout=...`). SOFTFAB_SOAK_SEEDS
// (default 1000) seeds from SOFTFAB_SOAK_FIRST (default 1); a failing seed
// prints the command that replays it alone: SOFTFAB_SOAK_SEED=<n>.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/exactly_once_traffic.h"
#include "tests/messaging_harness.h"

namespace softfab::testing {
namespace {

sim::SimConfig HarshConfig(uint64_t seed) {
  sim::SimConfig c = PacketFaultConfig(seed, 0.05, 0.05, 0.10);
  // Flaps of the paths to the receiver, at times that vary with the seed.
  for (int32_t sender : {0, 2}) {
    sim::SimLinkConfig link;  // A path fault needs its pair listed.
    link.node_a = sender;
    link.node_b = 1;
    c.links.push_back(link);
    for (uint64_t at_ms : {1 + seed % 3, 6 + seed % 5}) {
      sim::TimedFault down;
      down.kind = sim::TimedFaultKind::kLinkDown;
      down.time_ns = at_ms * 1'000'000 + static_cast<uint64_t>(sender) * 1000;
      down.node = sender;
      down.peer_node = 1;
      sim::TimedFault up = down;
      up.kind = sim::TimedFaultKind::kLinkUp;
      up.time_ns = down.time_ns + 1'000'000;
      c.faults.timed_faults.push_back(down);
      c.faults.timed_faults.push_back(up);
    }
  }
  return c;
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

TEST(SoakTest, ExactlyOnceOverManySeedsOfHarshFaults) {
  uint64_t first = EnvOr("SOFTFAB_SOAK_FIRST", 1);
  uint64_t seeds = EnvOr("SOFTFAB_SOAK_SEEDS", 1000);
  if (std::getenv("SOFTFAB_SOAK_SEED")) {
    first = EnvOr("SOFTFAB_SOAK_SEED", 1);
    seeds = 1;
  }
  int failed = 0;
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    Cluster c(3, HarshConfig(seed));
    std::string why = RunExactlyOnceTraffic(c, seed, 40);
    if (why.empty() && c.fabric().stats().packets_dropped == 0) {
      why = "the fault plan dropped nothing";
    }
    if (!why.empty()) {
      ++failed;
      ADD_FAILURE() << "seed " << seed << ": " << why
                    << "\n  replay: bazel test //tests:soak_test "
                       "--test_env=SOFTFAB_SOAK_SEED="
                    << seed;
    }
  }
  ::testing::Test::RecordProperty("seeds", std::to_string(seeds));
  ::testing::Test::RecordProperty("failed", std::to_string(failed));
}

}  // namespace
}  // namespace softfab::testing
