// softfab command line: aggregation of a study's records into its summary,
// and the files of a study directory.
#include "tools/softfab/study_report.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "tools/softfab/json_writer.h"

namespace softfab::cli {
namespace {

struct CounterSummary {
  std::string name;
  double mean = 0;
  uint64_t max = 0;
  uint64_t max_seed = 0;
};

struct PhaseSummary {
  std::string name;
  LatencyHistogram histogram;
};

struct ThroughputSummary {
  uint64_t bucket_ns = 0;
  std::vector<double> mean, p10, p90;  // MB/s per bucket.
};

struct WorstSeed {
  uint64_t seed;
  std::string outcome;
  std::string why;
};

struct Summary {
  uint64_t runs = 0, passed = 0, broken = 0;
  uint64_t first_seed = 0, last_seed = 0;
  std::map<std::string, uint64_t> outcomes;  // Sorted by name.
  std::vector<CounterSummary> counters;
  std::vector<PhaseSummary> phases;
  ThroughputSummary throughput;
  std::vector<WorstSeed> worst;
};

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least q of the values at or
  // below it.
  const double n = static_cast<double>(values.size());
  size_t rank = static_cast<size_t>(q * n);
  if (static_cast<double>(rank) < q * n) ++rank;
  return values[rank == 0 ? 0 : rank - 1];
}

// Joins every record's throughput into common buckets: the widest bucket any
// record used, widened further until at most kThroughputBucketsMax remain.
ThroughputSummary SummarizeThroughput(const std::vector<RunRecord>& records) {
  ThroughputSummary t;
  uint64_t end_ns = 0;
  for (const RunRecord& r : records) {
    t.bucket_ns = std::max(t.bucket_ns, r.throughput_bucket_ns);
    end_ns =
        std::max(end_ns, r.throughput_bucket_ns * r.throughput_bytes.size());
  }
  if (t.bucket_ns == 0 || end_ns == 0) return ThroughputSummary{};
  size_t n = static_cast<size_t>((end_ns + t.bucket_ns - 1) / t.bucket_ns);
  if (n > kThroughputBucketsMax) {
    const uint64_t join =
        (n + kThroughputBucketsMax - 1) / kThroughputBucketsMax;
    t.bucket_ns *= join;
    n = static_cast<size_t>((end_ns + t.bucket_ns - 1) / t.bucket_ns);
  }
  std::vector<std::vector<double>> per_bucket(n);
  for (const RunRecord& r : records) {
    std::vector<uint64_t> bytes(n, 0);
    for (size_t i = 0; i < r.throughput_bytes.size(); ++i) {
      const uint64_t start = i * r.throughput_bucket_ns;
      bytes[std::min<size_t>(n - 1, start / t.bucket_ns)] +=
          r.throughput_bytes[i];
    }
    for (size_t i = 0; i < n; ++i) {
      // bytes per ns * 1e9 / 1e6 = MB/s.
      per_bucket[i].push_back(static_cast<double>(bytes[i]) * 1e3 /
                              static_cast<double>(t.bucket_ns));
    }
  }
  for (auto& values : per_bucket) {
    double sum = 0;
    for (double v : values) sum += v;
    t.mean.push_back(sum / static_cast<double>(values.size()));
    t.p10.push_back(Percentile(values, 0.10));
    t.p90.push_back(Percentile(values, 0.90));
  }
  return t;
}

std::string FormatNs(uint64_t ns) {
  char text[32];
  if (ns >= 1'000'000'000) {
    std::snprintf(text, sizeof text, "%.3g s", static_cast<double>(ns) / 1e9);
  } else if (ns >= 1'000'000) {
    std::snprintf(text, sizeof text, "%.4g ms", static_cast<double>(ns) / 1e6);
  } else if (ns >= 1'000) {
    std::snprintf(text, sizeof text, "%.4g us", static_cast<double>(ns) / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%llu ns",
                  static_cast<unsigned long long>(ns));
  }
  return text;
}

Summary Summarize(const StudyIdentity& study,
                  const std::vector<RunRecord>& records) {
  Summary s;
  s.runs = records.size();
  if (!records.empty()) {
    s.first_seed = records.front().seed;
    s.last_seed = records.back().seed;
  }
  std::map<std::string, size_t> counter_index, phase_index;
  for (const RunRecord& r : records) {
    if (r.passed) ++s.passed;
    if (!r.invariant.empty()) ++s.broken;
    ++s.outcomes[r.outcome];
    for (const auto& [name, value] : r.counters) {
      auto [it, fresh] = counter_index.emplace(name, s.counters.size());
      if (fresh) s.counters.push_back({name, 0, 0, r.seed});
      CounterSummary& c = s.counters[it->second];
      c.mean += static_cast<double>(value);
      if (value > c.max) {
        c.max = value;
        c.max_seed = r.seed;
      }
    }
    for (const auto& [name, histogram] : r.phases) {
      auto [it, fresh] = phase_index.emplace(name, s.phases.size());
      if (fresh) s.phases.push_back({name, {}});
      s.phases[it->second].histogram.Merge(histogram);
    }
  }
  for (CounterSummary& c : s.counters) {
    c.mean /= static_cast<double>(s.runs);
  }
  s.throughput = SummarizeThroughput(records);
  // Worst: failed runs by seed, then passing ones by p99 latency.
  std::vector<const RunRecord*> order;
  for (const RunRecord& r : records) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [](const RunRecord* a, const RunRecord* b) {
                     if (a->passed != b->passed) return !a->passed;
                     if (a->passed) return a->WorstP99Ns() > b->WorstP99Ns();
                     return false;
                   });
  for (const RunRecord* r : order) {
    if (s.worst.size() == kWorstSeedsMax) break;
    std::string why = r->why;
    if (r->passed || why.empty()) {
      why = "p99 latency " + FormatNs(r->WorstP99Ns());
      if (!r->passed) {
        why =
            "outcome " + r->outcome + ", expected " + study.expect + "; " + why;
      }
    }
    s.worst.push_back({r->seed, r->outcome, why});
  }
  return s;
}

bool WriteFile(const std::string& path, const std::string& text,
               std::string* error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool MakeDirs(const std::string& dir, std::string* error) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string prefix = dir.substr(0, pos);
    if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) {
      *error = "cannot create " + prefix + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace

uint64_t RunRecord::Counter(const std::string& name) const {
  for (const auto& [n, v] : counters) {
    if (n == name) return v;
  }
  return 0;
}

uint64_t RunRecord::WorstP99Ns() const {
  uint64_t worst = 0;
  for (const auto& [name, histogram] : phases) {
    worst = std::max(worst, histogram.Quantile(0.99));
  }
  return worst;
}

std::string ReplayCommand(const StudyIdentity& study, uint64_t seed) {
  return "softfab replay " + study.path + " --seed " + std::to_string(seed) +
         " --trace seed-" + std::to_string(seed) + ".trace --pcap seed-" +
         std::to_string(seed) + ".pcap";
}

std::string ResultsJson(const StudyIdentity& study,
                        const std::vector<RunRecord>& records) {
  const Summary s = Summarize(study, records);
  JsonWriter j;
  j.BeginObject().Newline();
  j.Key("format").String("softfab-study-1").Newline();
  j.Key("scenario").BeginObject();
  j.Key("name").String(study.name).Key("path").String(study.path);
  j.Key("expect").String(study.expect).EndObject().Newline();
  j.Key("seeds").BeginObject().Key("first").Uint(s.first_seed);
  j.Key("last").Uint(s.last_seed).Key("count").Uint(s.runs).EndObject();
  j.Newline().Key("summary").BeginObject().Newline();
  j.Key("runs").Uint(s.runs).Key("passed").Uint(s.passed);
  j.Key("failed").Uint(s.runs - s.passed);
  j.Key("broken_invariants").Uint(s.broken).Newline();
  j.Key("outcomes").BeginObject();
  for (const auto& [name, count] : s.outcomes) j.Key(name).Uint(count);
  j.EndObject().Newline().Key("counters").BeginObject();
  for (const CounterSummary& c : s.counters) {
    j.Newline().Key(c.name).BeginObject().Key("mean").Double(c.mean);
    j.Key("max").Uint(c.max).Key("max_seed").Uint(c.max_seed).EndObject();
  }
  j.EndObject().Newline().Key("latency_phases").BeginArray();
  for (const PhaseSummary& p : s.phases) {
    const LatencyHistogram& h = p.histogram;
    j.Newline().BeginObject().Key("phase").String(p.name);
    j.Key("samples").Uint(h.total()).Key("p50_ns").Uint(h.Quantile(0.5));
    j.Key("p99_ns").Uint(h.Quantile(0.99)).Key("max_ns").Uint(h.max_ns());
    j.Key("cdf").BeginArray();
    uint64_t seen = 0;
    for (size_t i = 0; i < h.buckets(); ++i) {
      if (h.count(i) == 0) continue;
      seen += h.count(i);
      j.BeginArray().Uint(
          std::min(LatencyHistogram::UpperBound(i), h.max_ns()));
      j.Double(static_cast<double>(seen) / static_cast<double>(h.total()));
      j.EndArray();
    }
    j.EndArray().EndObject();
  }
  j.EndArray().Newline().Key("throughput").BeginObject();
  j.Key("bucket_ns").Uint(s.throughput.bucket_ns);
  for (const auto& [key, values] :
       {std::pair{"mean_mb_per_s", &s.throughput.mean},
        std::pair{"p10_mb_per_s", &s.throughput.p10},
        std::pair{"p90_mb_per_s", &s.throughput.p90}}) {
    j.Newline().Key(key).BeginArray();
    for (double v : *values) j.Double(v);
    j.EndArray();
  }
  j.EndObject().Newline().Key("worst").BeginArray();
  for (const WorstSeed& w : s.worst) {
    j.Newline().BeginObject().Key("seed").Uint(w.seed);
    j.Key("outcome").String(w.outcome).Key("why").String(w.why);
    j.Key("replay").String(ReplayCommand(study, w.seed)).EndObject();
  }
  j.EndArray().EndObject().Newline();
  // Per-seed columns for the plots, then each seed's full result.
  j.Key("per_seed").BeginObject();
  j.Newline().Key("seed").BeginArray();
  for (const RunRecord& r : records) j.Uint(r.seed);
  j.EndArray();
  for (const char* name : {kRetransmissions, kRnrNaks, kFlushes}) {
    j.Newline().Key(name).BeginArray();
    for (const RunRecord& r : records) j.Uint(r.Counter(name));
    j.EndArray();
  }
  j.Newline().Key("failed_seeds").BeginArray();
  for (const RunRecord& r : records) {
    if (!r.passed) j.Uint(r.seed);
  }
  j.EndArray().EndObject().Newline();
  j.Key("results").BeginArray();
  for (const RunRecord& r : records) j.Newline().Raw(r.json);
  j.Newline().EndArray().Newline().EndObject();
  return j.text() + "\n";
}

std::string SummaryText(const StudyIdentity& study,
                        const std::vector<RunRecord>& records) {
  const Summary s = Summarize(study, records);
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "study %s (%s): seeds %llu-%llu, %llu runs, expected outcome "
                "%s\n\n",
                study.name.c_str(), study.path.c_str(),
                static_cast<unsigned long long>(s.first_seed),
                static_cast<unsigned long long>(s.last_seed),
                static_cast<unsigned long long>(s.runs), study.expect.c_str());
  out += line;
  std::snprintf(line, sizeof line, "  %-28s %10s\n", "outcome", "runs");
  out += line;
  for (const auto& [name, count] : s.outcomes) {
    std::snprintf(line, sizeof line, "  %-28s %10llu\n", name.c_str(),
                  static_cast<unsigned long long>(count));
    out += line;
  }
  std::snprintf(line, sizeof line, "\n  %-28s %10s %10s %10s\n", "counter",
                "mean", "max", "max seed");
  out += line;
  for (const CounterSummary& c : s.counters) {
    std::snprintf(line, sizeof line, "  %-28s %10.4g %10llu %10llu\n",
                  c.name.c_str(), c.mean,
                  static_cast<unsigned long long>(c.max),
                  static_cast<unsigned long long>(c.max_seed));
    out += line;
  }
  if (!s.phases.empty()) {
    std::snprintf(line, sizeof line, "\n  %-28s %10s %10s %10s %10s\n",
                  "latency phase", "samples", "p50", "p99", "max");
    out += line;
  }
  for (const PhaseSummary& p : s.phases) {
    const LatencyHistogram& h = p.histogram;
    std::snprintf(line, sizeof line, "  %-28s %10llu %10s %10s %10s\n",
                  p.name.c_str(), static_cast<unsigned long long>(h.total()),
                  FormatNs(h.Quantile(0.5)).c_str(),
                  FormatNs(h.Quantile(0.99)).c_str(),
                  FormatNs(h.max_ns()).c_str());
    out += line;
  }
  out += "\n  worst seeds:\n";
  for (const WorstSeed& w : s.worst) {
    std::snprintf(line, sizeof line, "    seed %-8llu %-18s %s\n",
                  static_cast<unsigned long long>(w.seed), w.outcome.c_str(),
                  w.why.c_str());
    out += line;
    out += "      " + ReplayCommand(study, w.seed) + "\n";
  }
  std::snprintf(line, sizeof line,
                "\nresult: %llu runs, %llu passed, %llu failed, %llu broke an "
                "invariant\n",
                static_cast<unsigned long long>(s.runs),
                static_cast<unsigned long long>(s.passed),
                static_cast<unsigned long long>(s.runs - s.passed),
                static_cast<unsigned long long>(s.broken));
  out += line;
  return out;
}

bool WriteStudyDir(const std::string& dir, const StudyIdentity& study,
                   const std::vector<RunRecord>& records,
                   const std::string& csv_header,
                   const std::string& plot_script, std::string* warning,
                   std::string* error) {
  if (!MakeDirs(dir, error)) return false;
  std::string csv = csv_header + "\n", jsonl;
  for (const RunRecord& r : records) {
    csv += r.csv + "\n";
    jsonl += r.json + "\n";
  }
  const std::string json_path = dir + "/" + kResultsJson;
  if (!WriteFile(json_path, ResultsJson(study, records), error) ||
      !WriteFile(dir + "/" + kResultsCsv, csv, error) ||
      !WriteFile(dir + "/" + kSeedsJsonl, jsonl, error)) {
    return false;
  }
  if (plot_script.empty()) return true;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    // Plots are a by-product: their chatter goes to stderr, never stdout.
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execl("/usr/bin/python3", "python3", plot_script.c_str(), json_path.c_str(),
          dir.c_str(), static_cast<char*>(nullptr));
    std::fprintf(stderr, "cannot run /usr/bin/python3: %s\n",
                 std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    *warning = "the plots and index.html were not drawn (" + plot_script +
               " failed; it needs /usr/bin/python3 with matplotlib)";
  }
  return true;
}

}  // namespace softfab::cli
