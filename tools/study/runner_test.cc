// RunSeed over the workload kinds the shipped scenarios do not use:
// ping-pong, all-to-all with two endpoints per node on shared receive
// contexts and match-complete sends through every kind of packet fault; a
// scenario the simulator refuses ends as setup_failed with the reason.
#include "tools/study/runner.h"

#include <gtest/gtest.h>

namespace softfab::study {
namespace {

Scenario Parse(const std::string& text) {
  std::string error;
  auto s = ParseScenario(text, "inline.yaml", &error);
  EXPECT_TRUE(s.ok()) << error;
  return s.ok() ? *s : Scenario{};
}

void ExpectAllDelivered(const Scenario& s, uint64_t messages) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    RunOptions o;
    o.seed = seed;
    const SeedResult r = RunSeed(s, o);
    EXPECT_EQ(r.outcome, "ok") << "seed " << seed << ": " << r.invariant_detail;
    EXPECT_EQ(r.invariant, "") << "seed " << seed << ": " << r.invariant_detail;
    EXPECT_TRUE(r.passed);
    EXPECT_EQ(r.counts.messages_delivered, messages);
    EXPECT_EQ(r.counts.messages_sent, messages);
    uint64_t samples = 0;
    for (const LatencyHistogram& h : r.latency) samples += h.count;
    EXPECT_EQ(samples, messages);
    uint64_t bytes = 0;
    for (uint64_t b : r.throughput.bytes) bytes += b;
    EXPECT_EQ(bytes, r.counts.bytes_delivered);
  }
}

TEST(RunnerTest, PingPongThroughLoss) {
  ExpectAllDelivered(Parse(R"(name: pp
topology: {nodes: 2}
workload: {kind: pingpong, sizes: [8, 16KiB], messages: 50, api: tagged}
faults:
  packets:
    - {kind: drop, probability: 0.02}
)"),
                     100);
}

TEST(RunnerTest, AllToAllOnSharedReceiveContextsThroughEveryFault) {
  ExpectAllDelivered(Parse(R"(name: a2a
topology: {nodes: 4}
workload:
  kind: alltoall
  sizes: {distribution: uniform, min: 0, max: 20000}
  messages: 20
  endpoints_per_node: 2
  srq_depth: 16
  completion: match
  rc_timeout: 8
faults:
  packets:
    - {kind: drop, probability: 0.01}
    - {kind: duplicate, probability: 0.01, delay: 1us}
    - {kind: reorder, probability: 0.02, delay: 3us}
    - {kind: delay_exponential, probability: 0.05, delay: 2us}
    - {kind: corrupt, probability: 0.01}
)"),
                     4 * 3 * 2 * 20);
}

TEST(RunnerTest, RefusedConfigurationIsSetupFailed) {
  Scenario s = Parse(R"(name: bad
topology: {nodes: 2}
workload: {kind: stream, sizes: 8, messages: 1}
)");
  s.faults.packet_faults.push_back({});
  s.faults.packet_faults.back().probability = 2;  // past the file's checks
  RunOptions o;
  const SeedResult r = RunSeed(s, o);
  EXPECT_EQ(r.outcome, "setup_failed");
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.invariant_detail, "");
}

}  // namespace
}  // namespace softfab::study
