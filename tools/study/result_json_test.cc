// SeedResult as JSON and CSV: every field survives the round trip byte for
// byte, text with quotes and commas is escaped, the CSV row has the header's
// columns, and the latency histogram's buckets and quantiles are right.
#include "tools/study/result_json.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace softfab::study {
namespace {

SeedResult Sample() {
  SeedResult r;
  r.seed = 42;
  r.scenario = "name, with \"quotes\"";
  r.outcome = "flushed";
  r.expected = "ok";
  r.invariant = "order";
  r.invariant_detail = "flow 0 got message 3\tbefore 2\n";
  r.digest = 0x00ab'cdef'0123'4567ull;
  r.duration_ns = 123456789;
  r.counts.messages_posted = 10;
  r.counts.messages_delivered = 9;
  r.counts.rnr_naks = 7;
  r.counts.errors["EIO/WR_FLUSH_ERR"] = 2;
  r.counts.errors["ECANCELED"] = 1;
  LatencyHistogram a, b;
  a.phase = "before";
  for (uint64_t ns : {5ull, 1000ull, 1001ull, 70'000'000ull}) a.Add(ns);
  b.phase = "after";  // empty
  r.latency = {a, b};
  r.throughput.bucket_ns = 1000;
  r.throughput.bytes = {0, 10, 0, 3};
  return r;
}

TEST(ResultJsonTest, RoundTripIsExact) {
  const std::string json = ResultToJson(Sample());
  EXPECT_EQ(json.find('\n'), std::string::npos);
  std::string error;
  auto back = ResultFromJson(json, &error);
  ASSERT_TRUE(back.ok()) << error;
  EXPECT_EQ(back->scenario, Sample().scenario);
  EXPECT_EQ(back->invariant_detail, Sample().invariant_detail);
  EXPECT_EQ(back->digest, Sample().digest);
  EXPECT_EQ(back->counts.errors, Sample().counts.errors);
  EXPECT_EQ(back->latency[0].buckets, Sample().latency[0].buckets);
  EXPECT_EQ(back->latency[1].min_ns, UINT64_MAX);
  EXPECT_EQ(ResultToJson(*back), json);
}

TEST(ResultJsonTest, RefusesWhatItDidNotWrite) {
  std::string error;
  EXPECT_FALSE(ResultFromJson("{\"seed\": 1", &error).ok());
  EXPECT_FALSE(ResultFromJson("[1, 2]", &error).ok());
  std::string json = ResultToJson(Sample());
  json.replace(json.find("\"digest\""), 8, "\"digets\"");
  EXPECT_FALSE(ResultFromJson(json, &error).ok());
  EXPECT_EQ(error, "missing field 'digest'");
}

TEST(ResultJsonTest, CsvRowHasTheHeadersColumns) {
  const std::string header = CsvHeader();
  const std::string row = ResultToCsvRow(Sample());
  // Commas outside quotes.
  auto columns = [](const std::string& line) {
    int n = 1;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) ++n;
    }
    return n;
  };
  EXPECT_EQ(columns(row), columns(header));
  EXPECT_EQ(row.rfind("42,\"name, with \"\"quotes\"\"\",flushed,ok,false,order,"
                      "00abcdef01234567,123456789,",
                      0),
            0u)
      << row;
  EXPECT_NE(row.find(",ECANCELED=1;EIO/WR_FLUSH_ERR=2,"), std::string::npos);
}

TEST(LatencyHistogramTest, BucketsAndQuantiles) {
  const uint64_t values[] = {0, 1, 15, 16, 17, 1000, 123456789, UINT64_MAX};
  for (uint64_t v : values) {
    const int b = LatencyHistogram::BucketOf(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, LatencyHistogram::kBuckets);
    EXPECT_LE(LatencyHistogram::LowerNs(b), v);
    if (b + 1 < LatencyHistogram::kBuckets) {
      EXPECT_GT(LatencyHistogram::LowerNs(b + 1), v);
      // 12.5% resolution above 16 ns.
      EXPECT_LE(LatencyHistogram::LowerNs(b + 1) - LatencyHistogram::LowerNs(b),
                std::max<uint64_t>(1, LatencyHistogram::LowerNs(b) / 8));
    }
  }
  LatencyHistogram h;
  for (uint64_t i = 1; i <= 100; ++i) h.Add(i * 1000);
  EXPECT_EQ(h.QuantileNs(0), 1000u);
  EXPECT_EQ(h.QuantileNs(1), 100000u);
  const uint64_t p50 = h.QuantileNs(0.5);
  EXPECT_LE(p50, 50000u);
  EXPECT_GE(p50, 50000u * 7 / 8);
}

TEST(ThroughputTest, FoldsToStayBounded) {
  Throughput t;
  t.bucket_ns = 10;
  t.Add(5, 1);
  t.Add(15, 2);
  t.Add(10 * kThroughputBucketsMax + 5, 4);  // doubles the width once
  EXPECT_EQ(t.bucket_ns, 20u);
  ASSERT_LE(t.bytes.size(), static_cast<size_t>(kThroughputBucketsMax));
  EXPECT_EQ(t.bytes[0], 3u);
  EXPECT_EQ(t.bytes.back(), 4u);
}

}  // namespace
}  // namespace softfab::study
