// Scenario files: a good one read whole (units, defaults, faults, phases),
// and each kind of bad file (syntax error, unknown field, wrong type,
// out-of-range value, missing section or field) refused with its located
// message, FILE:LINE:COL: field '...': expected ..., got ...
#include "tools/study/scenario.h"

#include <gtest/gtest.h>

#include <string>

namespace softfab::study {
namespace {

constexpr char kGood[] = R"(name: good
description: every section
expect: retry_exceeded
topology:
  nodes: 3
  default_link: {latency: 1.5us, bandwidth: 25Gbps, mtu: 1024}
  links:
    - {nodes: [0, 2], latency: 10us, bandwidth: unlimited}
  max_srq_wr: 64
  personality: mlx5
workload:
  kind: alltoall
  api: tagged
  sizes: {distribution: log_uniform, min: 0, max: 64KiB}
  messages: 10
  endpoints_per_node: 2
  srq_depth: 8
  window: 4
  credits: 16
  rc_timeout: 10
  completion: delivery
  deadline: 2s
faults:
  packets:
    - {kind: drop, probability: 0.25, from: 0, to: 1, qp: 257, ops: [send, ack], start: 1ms, end: 2ms, count_max: 3}
    - {kind: delay_exponential, delay: 5us}
  timed:
    - {at: 1ms, kind: link_down, node: 0, peer: 1}
    - {at: 3ms, kind: receiver_stall, node: 1, duration: 500us}
phases:
  - {name: early, start: 0}
  - {name: late, start: 1ms}
report: {throughput_bucket: 50us}
)";

TEST(ScenarioTest, ReadsEverySection) {
  std::string error;
  auto s = ParseScenario(kGood, "good.yaml", &error);
  ASSERT_TRUE(s.ok()) << error;
  EXPECT_EQ(s->name, "good");
  EXPECT_EQ(s->expect, "retry_exceeded");
  EXPECT_EQ(s->topology.nodes, 3);
  EXPECT_EQ(s->topology.default_link.latency_ns, 1500u);
  EXPECT_EQ(s->topology.default_link.bandwidth_bps, 25'000'000'000ull);
  EXPECT_EQ(s->topology.default_link.mtu_bytes, 1024u);
  ASSERT_EQ(s->topology.links.size(), 1u);
  EXPECT_EQ(s->topology.links[0].node_b, 2);
  EXPECT_EQ(s->topology.links[0].bandwidth_bps, 0u);
  EXPECT_EQ(s->topology.links[0].mtu_bytes, 1024u);  // from the default
  EXPECT_EQ(s->topology.personality, sim::DevicePersonality::kMlx5);
  EXPECT_EQ(s->workload.kind, WorkloadKind::kAllToAll);
  EXPECT_EQ(s->workload.sizes.mode, SizeMode::kDistribution);
  EXPECT_EQ(s->workload.sizes.max_bytes, 65536u);
  EXPECT_EQ(s->workload.completion, CompletionLevel::kDelivery);
  EXPECT_EQ(s->workload.deadline_ns, 2'000'000'000ull);
  ASSERT_EQ(s->faults.packet_faults.size(), 2u);
  const sim::PacketFault& d = s->faults.packet_faults[0];
  EXPECT_EQ(d.kind, sim::PacketFaultKind::kDrop);
  EXPECT_EQ(d.probability, 0.25);
  EXPECT_EQ(d.qp_num, 257u);
  EXPECT_EQ(d.opcode_mask, sim::kFaultOpSend | sim::kFaultOpAck);
  EXPECT_EQ(d.start_ns, 1'000'000u);
  EXPECT_EQ(d.end_ns, 2'000'000u);
  EXPECT_EQ(d.count_max, 3u);
  EXPECT_EQ(s->faults.packet_faults[1].opcode_mask, sim::kFaultOpAll);
  ASSERT_EQ(s->faults.timed_faults.size(), 2u);
  EXPECT_EQ(s->faults.timed_faults[1].duration_ns, 500'000u);
  ASSERT_EQ(s->phases.size(), 2u);
  EXPECT_EQ(s->phases[1].start_ns, 1'000'000u);
  EXPECT_EQ(s->throughput_bucket_ns, 50'000u);
  // The path fault gets its pair's own link in the simulator's config.
  const sim::SimConfig c = SimConfigFor(*s, 7);
  EXPECT_EQ(c.master_seed, 7u);
  EXPECT_EQ(c.links.size(), 2u);
  EXPECT_EQ(c.max_srq_wr, 64);
}

TEST(ScenarioTest, DefaultsFillWhatIsLeftOut) {
  std::string error;
  auto s = ParseScenario(
      "name: small\ntopology: {nodes: 2}\n"
      "workload: {kind: stream, sizes: 0, messages: 1}\n",
      "small.yaml", &error);
  ASSERT_TRUE(s.ok()) << error;
  EXPECT_EQ(s->expect, "ok");
  ASSERT_EQ(s->phases.size(), 1u);
  EXPECT_EQ(s->phases[0].name, "all");
  EXPECT_EQ(s->workload.sizes.fixed_bytes, 0u);
}

struct BadCase {
  const char* what;
  std::string text;
  const char* message;  // the whole located message
};

std::string WithWorkload(const std::string& workload_lines) {
  return "name: bad\ntopology:\n  nodes: 2\nworkload:\n" + workload_lines;
}

TEST(ScenarioTest, BadFilesGetLocatedMessages) {
  const BadCase cases[] = {
      {"syntax", "name: bad\ntopology: {nodes: 2\n",
       "bad.yaml:3:1: syntax: end of map flow not found"},
      {"unknown field",
       WithWorkload("  kind: stream\n  sizes: 8\n  messages: 1\n"
                    "  windw: 4\n"),
       "bad.yaml:8:3: field 'workload.windw': expected one of the known "
       "fields (kind, api, ep, sizes, messages, endpoints_per_node, "
       "srq_depth, window, credits, rc_timeout, completion, target, "
       "deadline), got an unknown field"},
      {"out of range",
       WithWorkload("  kind: stream\n  sizes: 8\n  messages: 0\n"),
       "bad.yaml:7:13: field 'workload.messages': expected an integer in "
       "[1, 1000000], got '0'"},
      {"probability out of range",
       WithWorkload("  kind: stream\n  sizes: 8\n  messages: 1\n") +
           "faults:\n  packets:\n    - {kind: drop, probability: 1.5}\n",
       "bad.yaml:10:33: field 'faults.packets[0].probability': expected a "
       "probability in [0, 1], got '1.5'"},
      {"wrong kind of value",
       WithWorkload("  kind: stream\n  sizes: {fixed: 8}\n  messages: 1\n"),
       "bad.yaml:6:11: field 'workload.sizes.fixed': expected one of the "
       "known "
       "fields (distribution, min, max), got an unknown field"},
      {"duration without unit",
       WithWorkload("  kind: stream\n  sizes: 8\n  messages: 1\n"
                    "  deadline: 5\n"),
       "bad.yaml:8:13: field 'workload.deadline': expected a duration with "
       "a unit (ns, us, ms, s) in ns in [1000, 3600000000000], got '5'"},
      {"missing section", "name: bad\ntopology:\n  nodes: 2\n",
       "bad.yaml:1:1: field 'workload': expected a section (a map), got "
       "nothing (the section is missing)"},
      {"missing field",
       "name: bad\ntopology:\n  nodes: 2\nworkload:\n  kind: stream\n"
       "  messages: 1\n",
       "bad.yaml:5:3: field 'workload.sizes': expected the field, got nothing "
       "(the field is missing)"},
      {"msg endpoints on a shared receive context",
       WithWorkload("  kind: stream\n  sizes: 8\n  messages: 1\n"
                    "  ep: msg\n  srq_depth: 4\n"),
       "bad.yaml:9:14: field 'workload.srq_depth': expected 0 with ep: msg "
       "(each connection has its own receives), got '4'"},
      {"node out of range",
       WithWorkload("  kind: stream\n  sizes: 8\n  messages: 1\n") +
           "faults:\n  timed:\n    - {at: 1ms, kind: qp_error, node: 5, "
           "qp: 257}\n",
       "bad.yaml:10:39: field 'faults.timed[0].node': expected an integer "
       "in [0, 1], got '5'"},
  };
  for (const BadCase& c : cases) {
    std::string error;
    auto s = ParseScenario(c.text, "bad.yaml", &error);
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(error, c.message) << c.what;
  }
}

TEST(ScenarioTest, MissingFileIsNamed) {
  std::string error;
  auto s = LoadScenario("no/such/scenario.yaml", &error);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(error,
            "no/such/scenario.yaml:1:1: cannot open the file (No such file "
            "or directory)");
}

TEST(ScenarioTest, WhatIsNotARegularFileIsRefusedUnread) {
  std::string error;
  auto s = LoadScenario("/dev/zero", &error);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(error,
            "/dev/zero:1:1: not a regular file: a scenario is a YAML file");
}

TEST(ScenarioTest, AProgramsFabricHasTopologyAndFaultsOnly) {
  std::string error;
  auto s = ParseScenario(
      "name: p\ntopology: {nodes: 4}\nfaults:\n  packets:\n"
      "    - {kind: drop, probability: 0.5}\n",
      "p.yaml", &error, ScenarioUse::kProgram);
  ASSERT_TRUE(s.ok()) << error;
  EXPECT_EQ(s->topology.nodes, 4);
  ASSERT_EQ(s->faults.packet_faults.size(), 1u);
  const sim::SimConfig c = SimConfigFor(*s, 9);
  EXPECT_EQ(c.nodes, 4);
  EXPECT_EQ(c.master_seed, 9u);
  // The same file without a workload is not a study.
  EXPECT_FALSE(
      ParseScenario("name: p\ntopology: {nodes: 4}\n", "p.yaml", &error).ok());
  EXPECT_EQ(error,
            "p.yaml:1:1: field 'workload': expected a section (a map), got "
            "nothing (the section is missing)");
  // A study's file is refused for programs, with the reason.
  EXPECT_FALSE(
      ParseScenario(kGood, "good.yaml", &error, ScenarioUse::kProgram).ok());
  EXPECT_NE(error.find("good.yaml:12:3: field 'workload': expected no such "
                       "section: with `softfab run`"),
            std::string::npos)
      << error;
  EXPECT_FALSE(ParseScenario("name: p\ntopology: {nodes: 2}\nfaults:\n"
                             "  timed:\n    - {at: 1ms, kind: app_pause, "
                             "node: 0, duration: 1ms}\n",
                             "p.yaml", &error, ScenarioUse::kProgram)
                   .ok());
  EXPECT_NE(error.find("field 'faults.timed': expected no app_pause"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace softfab::study
