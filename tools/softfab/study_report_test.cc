// Tests of the study summary: counts, worst seeds, throughput buckets and the
// JSON text the report writes.
#include "tools/softfab/study_report.h"

#include <gtest/gtest.h>

#include "tools/softfab/json_writer.h"
#include "tools/study/result_json.h"

namespace softfab::cli {
namespace {

study::SeedResult Record(uint64_t seed, bool passed, uint64_t latency_ns,
                         uint64_t retransmissions) {
  study::SeedResult r;
  r.seed = seed;
  r.scenario = "lossy";
  r.expected = "ok";
  r.passed = passed;
  r.outcome = passed ? "ok" : "retry_exceeded";
  if (!passed && seed % 2 == 0) {
    r.invariant = "exactly_once";
    r.invariant_detail = "message 3 delivered twice";
  }
  r.counts.retransmissions = retransmissions;
  r.counts.flushes = seed;
  study::LatencyHistogram h;
  h.phase = "eager";
  for (int i = 0; i < 10; ++i) h.Add(latency_ns);
  r.latency = {h};
  r.throughput.bucket_ns = 1000;
  r.throughput.bytes = {4096, 4096 * seed};
  return r;
}

const StudyIdentity kStudy{"lossy", "examples/scenarios/lossy.yaml", "ok"};

TEST(StudyReportTest, SummaryCountsAndWorstSeeds) {
  std::vector<study::SeedResult> records = {
      Record(1, true, 5000, 3), Record(2, false, 100, 9),
      Record(3, true, 90000, 1), Record(4, false, 100, 0)};
  const std::string text = SummaryText(kStudy, records);
  EXPECT_NE(text.find("result: 4 runs, 2 passed, 2 failed, 2 broke an "
                      "invariant"),
            std::string::npos)
      << text;
  // Failed seeds first (by seed), then the slowest passing one.
  const size_t s2 = text.find("seed 2 "), s4 = text.find("seed 4 "),
               s3 = text.find("seed 3 "), s1 = text.find("seed 1 ");
  ASSERT_NE(s1, std::string::npos) << text;
  EXPECT_LT(s2, s4);
  EXPECT_LT(s4, s3);
  EXPECT_LT(s3, s1);
  EXPECT_NE(text.find("broke exactly_once: message 3 delivered twice"),
            std::string::npos);
  EXPECT_NE(text.find("softfab replay examples/scenarios/lossy.yaml --seed 2"),
            std::string::npos);
}

TEST(StudyReportTest, JsonHoldsSummaryColumnsAndResults) {
  std::vector<study::SeedResult> records = {Record(1, true, 5000, 3),
                                            Record(2, false, 100, 9)};
  const std::string json = ResultsJson(kStudy, records);
  EXPECT_EQ(json, ResultsJson(kStudy, records));
  for (const std::string& part : std::vector<std::string>{
           "\"format\": \"softfab-study-1\"", "\"first\": 1, \"last\": 2",
           "\"runs\": 2, \"passed\": 1, \"failed\": 1",
           "\"outcomes\": {\"ok\": 1, \"retry_exceeded\": 1}",
           "\"retransmissions\": {\"mean\": 6, \"max\": 9, \"max_seed\": 2}",
           "\"bucket_ns\": 1000", "\"mean_mb_per_s\": [4096, 6144]",
           "\"p90_mb_per_s\": [4096, 8192]", "\"failed_seeds\": [2]",
           "\"results\": [\n    " + study::ResultToJson(records[0]) +
               ",\n    " + study::ResultToJson(records[1]) + "\n  ]"}) {
    EXPECT_NE(json.find(part), std::string::npos) << part << "\n" << json;
  }
}

TEST(JsonWriterTest, QuotesAndNumbers) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  JsonWriter j;
  j.BeginObject().Key("x").Double(0.5).Key("n").Double(1.0 / 0.0);
  j.Key("a").BeginArray().Uint(1).Int(-2).Bool(true).EndArray().EndObject();
  EXPECT_EQ(j.text(), "{\"x\": 0.5, \"n\": null, \"a\": [1, -2, true]}");
}

}  // namespace
}  // namespace softfab::cli
