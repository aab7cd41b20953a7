// SeedResult to and from one line of JSON, and to one CSV row. Written here
// (fixed key order, exact integers, the digest as 16 hex digits); read back
// with yaml-cpp's parser, since JSON's flow syntax is YAML.
#include "tools/study/result_json.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace softfab::study {

namespace {

void Quote(const std::string& s, std::string* out) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Appends `"key": ` (after a comma unless first).
void Key(const char* key, bool first, std::string* out) {
  if (!first) *out += ", ";
  Quote(key, out);
  *out += ": ";
}

void Uint(const char* key, uint64_t v, std::string* out, bool first = false) {
  Key(key, first, out);
  *out += std::to_string(v);
}

void Text(const char* key, const std::string& v, std::string* out,
          bool first = false) {
  Key(key, first, out);
  Quote(v, out);
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// Reading: every field must be present with the right shape; a missing or
// mistyped one names itself.
class In {
 public:
  explicit In(std::string* error) : error_(error) {}
  bool ok() const { return ok_; }

  YAML::Node Get(const YAML::Node& map, const char* key) {
    if (!ok_) return YAML::Node();
    YAML::Node n = map[key];
    if (!n.IsDefined()) Fail(std::string("missing field '") + key + "'");
    return n;
  }
  uint64_t U64(const YAML::Node& map, const char* key) {
    const YAML::Node n = Get(map, key);
    if (!ok_) return 0;
    try {
      return n.as<uint64_t>();
    } catch (const YAML::Exception&) {
      Fail(std::string("field '") + key + "' is not an unsigned integer");
      return 0;
    }
  }
  std::string Str(const YAML::Node& map, const char* key) {
    const YAML::Node n = Get(map, key);
    if (!ok_) return "";
    if (!n.IsScalar()) Fail(std::string("field '") + key + "' is not text");
    return ok_ ? n.Scalar() : "";
  }
  bool Bool(const YAML::Node& map, const char* key) {
    const YAML::Node n = Get(map, key);
    if (!ok_) return false;
    try {
      return n.as<bool>();
    } catch (const YAML::Exception&) {
      Fail(std::string("field '") + key + "' is not true or false");
      return false;
    }
  }
  void Fail(const std::string& why) {
    if (ok_) *error_ = why;
    ok_ = false;
  }

 private:
  std::string* error_;
  bool ok_ = true;
};

// The counters, in the order JSON and CSV list them.
struct CountField {
  const char* name;
  uint64_t SeedCounts::*field;
};
constexpr CountField kCounts[] = {
    {"messages_posted", &SeedCounts::messages_posted},
    {"messages_sent", &SeedCounts::messages_sent},
    {"messages_delivered", &SeedCounts::messages_delivered},
    {"bytes_delivered", &SeedCounts::bytes_delivered},
    {"packets_sent", &SeedCounts::packets_sent},
    {"packets_dropped", &SeedCounts::packets_dropped},
    {"retransmissions", &SeedCounts::retransmissions},
    {"rnr_naks", &SeedCounts::rnr_naks},
    {"flushes", &SeedCounts::flushes},
    {"eagain", &SeedCounts::eagain},
    {"events", &SeedCounts::events},
};

}  // namespace

std::string ResultToJson(const SeedResult& r) {
  std::string o = "{";
  Uint("seed", r.seed, &o, true);
  Text("scenario", r.scenario, &o);
  Text("outcome", r.outcome, &o);
  Text("expected", r.expected, &o);
  Key("passed", false, &o);
  o += r.passed ? "true" : "false";
  Text("invariant", r.invariant, &o);
  Text("invariant_detail", r.invariant_detail, &o);
  Text("digest", Hex(r.digest), &o);
  Uint("duration_ns", r.duration_ns, &o);
  Key("counts", false, &o);
  o += "{";
  bool first = true;
  for (const CountField& c : kCounts) {
    Uint(c.name, r.counts.*c.field, &o, first);
    first = false;
  }
  Key("errors", false, &o);
  o += "{";
  first = true;
  for (const auto& [name, n] : r.counts.errors) {
    Uint(name.c_str(), n, &o, first);
    first = false;
  }
  o += "}}";
  Key("latency", false, &o);
  o += "[";
  for (size_t p = 0; p < r.latency.size(); ++p) {
    const LatencyHistogram& h = r.latency[p];
    if (p) o += ", ";
    o += "{";
    Text("phase", h.phase, &o, true);
    Uint("count", h.count, &o);
    Uint("sum_ns", h.sum_ns, &o);
    Uint("min_ns", h.count ? h.min_ns : 0, &o);
    Uint("max_ns", h.max_ns, &o);
    Key("buckets", false, &o);
    o += "[";
    bool any = false;
    for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
      if (h.buckets[i] == 0) continue;
      if (any) o += ", ";
      any = true;
      o += "[" + std::to_string(LatencyHistogram::LowerNs(i)) + ", " +
           std::to_string(h.buckets[i]) + "]";
    }
    o += "]}";
  }
  o += "]";
  Key("throughput", false, &o);
  o += "{";
  Uint("bucket_ns", r.throughput.bucket_ns, &o, true);
  Key("bytes", false, &o);
  o += "[";
  for (size_t i = 0; i < r.throughput.bytes.size(); ++i) {
    if (i) o += ", ";
    o += std::to_string(r.throughput.bytes[i]);
  }
  o += "]}}";
  return o;
}

StatusOr<SeedResult> ResultFromJson(const std::string& json,
                                    std::string* error) {
  YAML::Node root;
  try {
    root = YAML::Load(json);
  } catch (const YAML::Exception& e) {
    *error = "not JSON: " + e.msg;
    return Status(EINVAL, "result is not JSON");
  }
  In in(error);
  if (!root.IsMap()) {
    in.Fail("a result is a JSON object");
    return Status(EINVAL, "result is not an object");
  }
  SeedResult r;
  r.seed = in.U64(root, "seed");
  r.scenario = in.Str(root, "scenario");
  r.outcome = in.Str(root, "outcome");
  r.expected = in.Str(root, "expected");
  r.passed = in.Bool(root, "passed");
  r.invariant = in.Str(root, "invariant");
  r.invariant_detail = in.Str(root, "invariant_detail");
  const std::string digest = in.Str(root, "digest");
  if (in.ok()) {
    char* end = nullptr;
    r.digest = std::strtoull(digest.c_str(), &end, 16);
    if (digest.size() != 16 || end != digest.c_str() + 16) {
      in.Fail("field 'digest' is not 16 hex digits");
    }
  }
  r.duration_ns = in.U64(root, "duration_ns");
  const YAML::Node counts = in.Get(root, "counts");
  if (in.ok()) {
    for (const CountField& c : kCounts)
      r.counts.*c.field = in.U64(counts, c.name);
    const YAML::Node errors = in.Get(counts, "errors");
    if (in.ok() && !errors.IsMap()) in.Fail("field 'errors' is not an object");
    if (in.ok()) {
      for (const auto& kv : errors) {
        r.counts.errors[kv.first.Scalar()] =
            in.U64(errors, kv.first.Scalar().c_str());
      }
    }
  }
  const YAML::Node latency = in.Get(root, "latency");
  if (in.ok() && !latency.IsSequence())
    in.Fail("field 'latency' is not a list");
  for (size_t p = 0; in.ok() && p < latency.size(); ++p) {
    const YAML::Node l = latency[p];
    LatencyHistogram h;
    h.phase = in.Str(l, "phase");
    h.count = in.U64(l, "count");
    h.sum_ns = in.U64(l, "sum_ns");
    h.min_ns = in.U64(l, "min_ns");
    if (h.count == 0) h.min_ns = UINT64_MAX;
    h.max_ns = in.U64(l, "max_ns");
    const YAML::Node b = in.Get(l, "buckets");
    if (in.ok() && !b.IsSequence()) in.Fail("field 'buckets' is not a list");
    for (size_t i = 0; in.ok() && i < b.size(); ++i) {
      if (!b[i].IsSequence() || b[i].size() != 2) {
        in.Fail("a bucket is not [lower_ns, count]");
        break;
      }
      try {
        const int at = LatencyHistogram::BucketOf(b[i][0].as<uint64_t>());
        h.buckets[at] += b[i][1].as<uint64_t>();
      } catch (const YAML::Exception&) {
        in.Fail("a bucket is not two unsigned integers");
      }
    }
    r.latency.push_back(std::move(h));
  }
  const YAML::Node t = in.Get(root, "throughput");
  if (in.ok()) {
    r.throughput.bucket_ns = in.U64(t, "bucket_ns");
    const YAML::Node bytes = in.Get(t, "bytes");
    if (in.ok() && !bytes.IsSequence()) in.Fail("field 'bytes' is not a list");
    try {
      for (size_t i = 0; in.ok() && i < bytes.size(); ++i) {
        r.throughput.bytes.push_back(bytes[i].as<uint64_t>());
      }
    } catch (const YAML::Exception&) {
      in.Fail("throughput bytes are not unsigned integers");
    }
  }
  if (!in.ok()) return Status(EINVAL, "result JSON refused");
  return r;
}

namespace {

void CsvField(const std::string& v, std::string* out) {
  if (v.find_first_of(",\"\n") == std::string::npos) {
    *out += v;
    return;
  }
  *out += '"';
  for (char c : v) {
    if (c == '"') *out += '"';
    *out += c;
  }
  *out += '"';
}

}  // namespace

std::string CsvHeader() {
  std::string h =
      "seed,scenario,outcome,expected,passed,invariant,digest,duration_ns";
  for (const CountField& c : kCounts) {
    if (c.field == &SeedCounts::events) continue;
    h += std::string(",") + c.name;
  }
  return h + ",errors,latency_p50_ns,latency_p99_ns,latency_max_ns";
}

std::string ResultToCsvRow(const SeedResult& r) {
  std::string row = std::to_string(r.seed) + ",";
  CsvField(r.scenario, &row);
  row += ",";
  CsvField(r.outcome, &row);
  row += ",";
  CsvField(r.expected, &row);
  row += r.passed ? ",true," : ",false,";
  CsvField(r.invariant, &row);
  row += "," + Hex(r.digest) + "," + std::to_string(r.duration_ns);
  for (const CountField& c : kCounts) {
    if (c.field == &SeedCounts::events) continue;
    row += "," + std::to_string(r.counts.*c.field);
  }
  std::string errors;
  for (const auto& [name, n] : r.counts.errors) {
    if (!errors.empty()) errors += ";";
    errors += name + "=" + std::to_string(n);
  }
  row += ",";
  CsvField(errors, &row);
  LatencyHistogram all;
  for (const LatencyHistogram& h : r.latency) all.Merge(h);
  row += "," + std::to_string(all.QuantileNs(0.5)) + "," +
         std::to_string(all.QuantileNs(0.99)) + "," +
         std::to_string(all.count ? all.max_ns : 0);
  return row;
}

}  // namespace softfab::study
