// softfab command line: joining per-seed results into a study's summary.
#include "tools/softfab/study_summary.h"

#include <algorithm>
#include <cstdio>

namespace softfab::cli {
namespace {

// Nearest rank: the smallest value with at least a fraction q of the values
// at or below it.
double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  size_t rank = static_cast<size_t>(q * n);
  if (static_cast<double>(rank) < q * n) ++rank;
  return values[rank == 0 ? 0 : rank - 1];
}

// Every result's throughput in common buckets: the widest bucket any result
// used, widened until at most kSummaryBucketsMax remain.
ThroughputSummary SummarizeThroughput(
    const std::vector<study::SeedResult>& results) {
  ThroughputSummary t;
  uint64_t end_ns = 0;
  for (const study::SeedResult& r : results) {
    t.bucket_ns = std::max(t.bucket_ns, r.throughput.bucket_ns);
    end_ns =
        std::max(end_ns, r.throughput.bucket_ns * r.throughput.bytes.size());
  }
  if (t.bucket_ns == 0 || end_ns == 0) return ThroughputSummary{};
  size_t n = static_cast<size_t>((end_ns + t.bucket_ns - 1) / t.bucket_ns);
  if (n > kSummaryBucketsMax) {
    t.bucket_ns *= (n + kSummaryBucketsMax - 1) / kSummaryBucketsMax;
    n = static_cast<size_t>((end_ns + t.bucket_ns - 1) / t.bucket_ns);
  }
  std::vector<std::vector<double>> per_bucket(n);
  for (const study::SeedResult& r : results) {
    std::vector<uint64_t> bytes(n, 0);
    for (size_t i = 0; i < r.throughput.bytes.size(); ++i) {
      const uint64_t start = i * r.throughput.bucket_ns;
      bytes[std::min<size_t>(n - 1, start / t.bucket_ns)] +=
          r.throughput.bytes[i];
    }
    for (size_t i = 0; i < n; ++i) {
      // Bytes per ns times 1e9 / 1e6 is MB/s.
      per_bucket[i].push_back(static_cast<double>(bytes[i]) * 1e3 /
                              static_cast<double>(t.bucket_ns));
    }
  }
  for (const std::vector<double>& values : per_bucket) {
    double sum = 0;
    for (double v : values) sum += v;
    t.mean.push_back(sum / static_cast<double>(values.size()));
    t.p10.push_back(Percentile(values, 0.10));
    t.p90.push_back(Percentile(values, 0.90));
  }
  return t;
}

uint64_t ErrorCompletions(const study::SeedCounts& c) {
  uint64_t n = 0;
  for (const auto& [name, count] : c.errors) n += count;
  return n;
}

// The counters the summary shows, in its order.
std::vector<std::pair<const char*, uint64_t>> Counters(
    const study::SeedResult& r) {
  const study::SeedCounts& c = r.counts;
  return {{"messages_delivered", c.messages_delivered},
          {"bytes_delivered", c.bytes_delivered},
          {"packets_dropped", c.packets_dropped},
          {"retransmissions", c.retransmissions},
          {"rnr_naks", c.rnr_naks},
          {"flushes", c.flushes},
          {"error_completions", ErrorCompletions(c)},
          {"eagain", c.eagain},
          {"duration_ns", r.duration_ns}};
}

}  // namespace

std::string FormatNs(uint64_t ns) {
  char text[32];
  const double v = static_cast<double>(ns);
  if (ns >= 1'000'000'000) {
    std::snprintf(text, sizeof text, "%.3g s", v / 1e9);
  } else if (ns >= 1'000'000) {
    std::snprintf(text, sizeof text, "%.4g ms", v / 1e6);
  } else if (ns >= 1'000) {
    std::snprintf(text, sizeof text, "%.4g us", v / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%llu ns",
                  static_cast<unsigned long long>(ns));
  }
  return text;
}

uint64_t WorstP99Ns(const study::SeedResult& result) {
  uint64_t worst = 0;
  for (const study::LatencyHistogram& h : result.latency) {
    if (h.count > 0) worst = std::max(worst, h.QuantileNs(0.99));
  }
  return worst;
}

StudySummary Summarize(const std::vector<study::SeedResult>& results,
                       const std::string& expect) {
  StudySummary s;
  s.runs = results.size();
  if (!results.empty()) {
    s.first_seed = results.front().seed;
    s.last_seed = results.back().seed;
  }
  std::map<std::string, size_t> phase_index;
  for (const study::SeedResult& r : results) {
    if (r.passed) ++s.passed;
    if (!r.invariant.empty()) ++s.broken;
    ++s.outcomes[r.outcome];
    const auto counters = Counters(r);
    if (s.counters.empty()) {
      for (const auto& [name, value] : counters) {
        s.counters.push_back({name, 0, value, r.seed});
      }
    }
    for (size_t i = 0; i < counters.size(); ++i) {
      CounterSummary& c = s.counters[i];
      c.mean += static_cast<double>(counters[i].second);
      if (counters[i].second > c.max) {
        c.max = counters[i].second;
        c.max_seed = r.seed;
      }
    }
    for (const study::LatencyHistogram& h : r.latency) {
      auto [it, fresh] = phase_index.emplace(h.phase, s.phases.size());
      if (fresh) {
        s.phases.push_back(study::LatencyHistogram{});
        s.phases.back().phase = h.phase;
      }
      s.phases[it->second].Merge(h);
    }
  }
  for (CounterSummary& c : s.counters) c.mean /= static_cast<double>(s.runs);
  s.throughput = SummarizeThroughput(results);

  std::vector<const study::SeedResult*> order;
  for (const study::SeedResult& r : results) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [](const study::SeedResult* a, const study::SeedResult* b) {
                     if (a->passed != b->passed) return !a->passed;
                     return a->passed && WorstP99Ns(*a) > WorstP99Ns(*b);
                   });
  for (const study::SeedResult* r : order) {
    if (s.worst.size() == kWorstSeedsMax) break;
    std::string why = "p99 latency " + FormatNs(WorstP99Ns(*r));
    if (!r->invariant.empty()) {
      why = "broke " + r->invariant + ": " + r->invariant_detail;
    } else if (!r->passed) {
      why = "outcome " + r->outcome + ", expected " + expect +
            (WorstP99Ns(*r) > 0 ? "; " + why : "");
    }
    s.worst.push_back({r->seed, r->outcome, why});
  }
  return s;
}

}  // namespace softfab::cli
