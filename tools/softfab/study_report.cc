// softfab command line: a study's summary as text and as results.json, and
// the files of a study directory.
#include "tools/softfab/study_report.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "tools/softfab/json_writer.h"
#include "tools/softfab/study_summary.h"
#include "tools/study/result_json.h"

namespace softfab::cli {
namespace {

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

void WriteLatency(const study::LatencyHistogram& h, JsonWriter& j) {
  j.BeginObject().Key("phase").String(h.phase).Key("samples").Uint(h.count);
  j.Key("p50_ns").Uint(h.count ? h.QuantileNs(0.5) : 0);
  j.Key("p99_ns").Uint(h.count ? h.QuantileNs(0.99) : 0);
  j.Key("max_ns").Uint(h.max_ns).Key("cdf").BeginArray();
  // One point per non-empty bucket: its upper end (clipped to the maximum)
  // and the fraction of samples up to there.
  uint64_t seen = 0;
  for (int i = 0; i < study::LatencyHistogram::kBuckets; ++i) {
    const uint64_t n = h.buckets[static_cast<size_t>(i)];
    if (n == 0) continue;
    seen += n;
    const uint64_t upper = i + 1 < study::LatencyHistogram::kBuckets
                               ? study::LatencyHistogram::LowerNs(i + 1) - 1
                               : h.max_ns;
    j.BeginArray().Uint(std::min(upper, h.max_ns));
    j.Double(static_cast<double>(seen) / static_cast<double>(h.count));
    j.EndArray();
  }
  j.EndArray().EndObject();
}

void WriteSummary(const StudyIdentity& study, const StudySummary& s,
                  JsonWriter& j) {
  j.Key("summary").BeginObject().Newline();
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
  for (const study::LatencyHistogram& h : s.phases) {
    j.Newline();
    WriteLatency(h, j);
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
  j.EndArray().EndObject();
}

}  // namespace

std::string ReplayCommand(const StudyIdentity& study, uint64_t seed) {
  const std::string s = std::to_string(seed);
  return "softfab replay " + study.path + " --seed " + s + " --trace seed-" +
         s + ".trace --pcap seed-" + s + ".pcap";
}

std::string ResultsJson(const StudyIdentity& study,
                        const std::vector<study::SeedResult>& results) {
  const StudySummary s = Summarize(results, study.expect);
  JsonWriter j;
  j.BeginObject().Newline();
  j.Key("format").String("softfab-study-1").Newline();
  j.Key("scenario").BeginObject();
  j.Key("name").String(study.name).Key("path").String(study.path);
  j.Key("expect").String(study.expect).EndObject().Newline();
  j.Key("seeds").BeginObject().Key("first").Uint(s.first_seed);
  j.Key("last").Uint(s.last_seed).Key("count").Uint(s.runs).EndObject();
  j.Newline();
  WriteSummary(study, s, j);
  // Per-seed columns for the plots, then each seed's full result.
  j.Newline().Key("per_seed").BeginObject();
  j.Newline().Key("seed").BeginArray();
  for (const study::SeedResult& r : results) j.Uint(r.seed);
  j.EndArray();
  for (const auto& [name, field] :
       {std::pair{"retransmissions", &study::SeedCounts::retransmissions},
        std::pair{"rnr_naks", &study::SeedCounts::rnr_naks},
        std::pair{"flushes", &study::SeedCounts::flushes}}) {
    j.Newline().Key(name).BeginArray();
    for (const study::SeedResult& r : results) j.Uint(r.counts.*field);
    j.EndArray();
  }
  j.Newline().Key("failed_seeds").BeginArray();
  for (const study::SeedResult& r : results) {
    if (!r.passed) j.Uint(r.seed);
  }
  j.EndArray().EndObject().Newline();
  j.Key("results").BeginArray();
  for (const study::SeedResult& r : results) {
    j.Newline().Raw(study::ResultToJson(r));
  }
  j.Newline().EndArray().Newline().EndObject();
  return j.text() + "\n";
}

std::string SummaryText(const StudyIdentity& study,
                        const std::vector<study::SeedResult>& results) {
  const StudySummary s = Summarize(results, study.expect);
  std::string out;
  char line[1024];
  auto add = [&](const char* format, auto... values) {
    std::snprintf(line, sizeof line, format, values...);
    out += line;
  };
  using ull = unsigned long long;
  add("study %s (%s): seeds %llu-%llu, %llu runs, expected outcome %s\n\n",
      study.name.c_str(), study.path.c_str(), ull{s.first_seed},
      ull{s.last_seed}, ull{s.runs}, study.expect.c_str());
  add("  %-24s %10s\n", "outcome", "runs");
  for (const auto& [name, count] : s.outcomes) {
    add("  %-24s %10llu\n", name.c_str(), ull{count});
  }
  add("\n  %-24s %12s %12s %10s\n", "counter per seed", "mean", "max",
      "max seed");
  for (const CounterSummary& c : s.counters) {
    add("  %-24s %12.2f %12llu %10llu\n", c.name.c_str(), c.mean, ull{c.max},
        ull{c.max_seed});
  }
  if (!s.phases.empty()) {
    add("\n  %-24s %10s %10s %10s %10s\n", "latency phase", "samples", "p50",
        "p99", "max");
  }
  for (const study::LatencyHistogram& h : s.phases) {
    add("  %-24s %10llu %10s %10s %10s\n", h.phase.c_str(), ull{h.count},
        FormatNs(h.count ? h.QuantileNs(0.5) : 0).c_str(),
        FormatNs(h.count ? h.QuantileNs(0.99) : 0).c_str(),
        FormatNs(h.max_ns).c_str());
  }
  out += "\n  worst seeds:\n";
  for (const WorstSeed& w : s.worst) {
    add("    seed %-8llu %-20s %s\n", ull{w.seed}, w.outcome.c_str(),
        w.why.c_str());
    out += "      " + ReplayCommand(study, w.seed) + "\n";
  }
  add("\nresult: %llu runs, %llu passed, %llu failed, %llu broke an "
      "invariant\n",
      ull{s.runs}, ull{s.passed}, ull{s.runs - s.passed}, ull{s.broken});
  return out;
}

bool WriteStudyDir(const std::string& dir, const StudyIdentity& study,
                   const std::vector<study::SeedResult>& results,
                   const std::string& plot_script, std::string* warning,
                   std::string* error) {
  if (!MakeDirs(dir, error)) return false;
  std::string csv = study::CsvHeader() + "\n", jsonl;
  for (const study::SeedResult& r : results) {
    csv += study::ResultToCsvRow(r) + "\n";
    jsonl += study::ResultToJson(r) + "\n";
  }
  const std::string json_path = dir + "/" + kResultsJson;
  if (!WriteFile(json_path, ResultsJson(study, results), error) ||
      !WriteFile(dir + "/" + kResultsCsv, csv, error) ||
      !WriteFile(dir + "/" + kSeedsJsonl, jsonl, error)) {
    return false;
  }
  if (plot_script.empty()) {
    *warning = "no plots: tools/report/plot_study.py not found";
    return true;
  }
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

bool PrepareOutputDir(const std::string& dir, std::string* error) {
  if (!MakeDirs(dir, error)) return false;
  // Writable: a probe file created and removed (permissions, a read-only
  // mount and a full inode table all show here, not after the study).
  const std::string probe = dir + "/.softfab-write-check";
  std::ofstream out(probe);
  if (!out) {
    *error = "cannot write in " + dir + ": " + std::strerror(errno);
    return false;
  }
  out.close();
  std::remove(probe.c_str());
  return true;
}

bool PrepareOutputFile(const std::string& path, std::string* error) {
  std::ofstream out(path, std::ios::app);
  if (!out) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace softfab::cli
