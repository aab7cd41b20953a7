// Reading a scenario file (YAML, yaml-cpp) into a Scenario, with located
// errors (FILE:LINE:COL: field 'a.b': expected ..., got ...), and the
// simulator configuration it describes. The schema is documented in
// examples/scenarios/README.md; every field read here is listed there.
#include "tools/study/scenario.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "tools/study/yaml_reader.h"

namespace softfab::study {

namespace {

using namespace yaml_reader;  // NOLINT: this file's vocabulary.

bool ReadLink(Reader& r, const YAML::Node& n, const std::string& field,
              int32_t nodes, bool pair, LinkSpec* link) {
  if (pair) {
    if (!r.OnlyKeys(n, field, {"nodes", "latency", "bandwidth", "mtu"})) {
      return false;
    }
    const YAML::Node ends = n["nodes"];
    if (!ends.IsSequence() || ends.size() != 2) {
      return r.Fail(ends.IsDefined() ? ends.Mark() : n.Mark(), field + ".nodes",
                    "a list of two node numbers", Reader::Describe(ends));
    }
    int64_t a = 0, b = 0;
    if (!r.Int(ends[0], field + ".nodes", 0, nodes - 1, &a) ||
        !r.Int(ends[1], field + ".nodes", 0, nodes - 1, &b)) {
      return false;
    }
    link->node_a = static_cast<int32_t>(a);
    link->node_b = static_cast<int32_t>(b);
  } else if (!r.OnlyKeys(n, field, {"latency", "bandwidth", "mtu"})) {
    return false;
  }
  int64_t mtu = link->mtu_bytes;
  const bool ok =
      Optional(n, "latency",
               [&](const YAML::Node& v) {
                 return r.Duration(v, field + ".latency", 0, 10'000'000'000ull,
                                   &link->latency_ns);
               }) &&
      Optional(n, "bandwidth",
               [&](const YAML::Node& v) {
                 return r.Rate(v, field + ".bandwidth", &link->bandwidth_bps);
               }) &&
      Optional(n, "mtu", [&](const YAML::Node& v) {
        if (!r.Int(v, field + ".mtu", 256, 4096, &mtu)) return false;
        if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 &&
            mtu != 4096) {
          return r.Fail(v.Mark(), field + ".mtu",
                        "one of 256, 512, 1024, 2048, 4096",
                        Reader::Describe(v));
        }
        return true;
      });
  link->mtu_bytes = static_cast<uint32_t>(mtu);
  return ok;
}

bool ReadTopology(Reader& r, const YAML::Node& t, Topology* topo) {
  if (!r.OnlyKeys(
          t, "topology",
          {"nodes", "default_link", "links", "max_srq_wr", "personality"})) {
    return false;
  }
  int64_t nodes = 0;
  const YAML::Node n = t["nodes"];
  if (!n.IsDefined()) {
    return r.Fail(t.Mark(), "topology.nodes", "the number of nodes (2..64)",
                  "nothing (the field is missing)");
  }
  if (!r.Int(n, "topology.nodes", 2, 64, &nodes)) return false;
  topo->nodes = static_cast<int32_t>(nodes);
  int64_t srq = topo->max_srq_wr;
  int personality = 0;
  if (!Optional(t, "default_link",
                [&](const YAML::Node& v) {
                  return ReadLink(r, v, "topology.default_link", topo->nodes,
                                  false, &topo->default_link);
                }) ||
      !Optional(t, "max_srq_wr",
                [&](const YAML::Node& v) {
                  return r.Int(v, "topology.max_srq_wr", 16, 16384, &srq);
                }) ||
      !Optional(t, "personality", [&](const YAML::Node& v) {
        return r.Enum(v, "topology.personality", {"rxe", "mlx5"}, &personality);
      })) {
    return false;
  }
  topo->max_srq_wr = static_cast<int32_t>(srq);
  topo->personality = static_cast<sim::DevicePersonality>(personality);
  const YAML::Node links = t["links"];
  if (links.IsDefined()) {
    if (!links.IsSequence()) {
      return r.Fail(links.Mark(), "topology.links", "a list of links",
                    Reader::Describe(links));
    }
    for (size_t i = 0; i < links.size(); ++i) {
      LinkSpec l = topo->default_link;
      if (!ReadLink(r, links[i], "topology.links[" + std::to_string(i) + "]",
                    topo->nodes, true, &l)) {
        return false;
      }
      topo->links.push_back(l);
    }
  }
  return true;
}

bool ReadSizes(Reader& r, const YAML::Node& n, SizeSpec* s) {
  const std::string f = "workload.sizes";
  constexpr uint64_t kMax = 1ull << 24;  // 16 MiB: a study, not a benchmark
  if (n.IsScalar()) {
    s->mode = SizeMode::kFixed;
    return r.Bytes(n, f, 0, kMax, &s->fixed_bytes);
  }
  if (n.IsSequence()) {
    if (n.size() == 0 || n.size() > 1024) {
      return r.Fail(n.Mark(), f, "a list of 1 to 1024 sizes",
                    "a list of " + std::to_string(n.size()));
    }
    s->mode = SizeMode::kList;
    for (size_t i = 0; i < n.size(); ++i) {
      uint64_t b = 0;
      if (!r.Bytes(n[i], f, 0, kMax, &b)) return false;
      s->list_bytes.push_back(b);
    }
    return true;
  }
  if (n.IsMap()) {
    if (!r.OnlyKeys(n, f, {"distribution", "min", "max"})) return false;
    int d = 0;
    const YAML::Node dist = n["distribution"];
    const YAML::Node lo = n["min"];
    const YAML::Node hi = n["max"];
    if (!dist.IsDefined() || !lo.IsDefined() || !hi.IsDefined()) {
      return r.Fail(n.Mark(), f, "distribution, min and max", "some missing");
    }
    if (!r.Enum(dist, f + ".distribution", {"uniform", "log_uniform"}, &d) ||
        !r.Bytes(lo, f + ".min", 0, kMax, &s->min_bytes) ||
        !r.Bytes(hi, f + ".max", s->min_bytes, kMax, &s->max_bytes)) {
      return false;
    }
    s->mode = SizeMode::kDistribution;
    s->distribution = static_cast<SizeDistribution>(d);
    return true;
  }
  return r.Fail(n.Mark(), f,
                "a size, a list of sizes, or {distribution, min, max}",
                Reader::Describe(n));
}

bool ReadWorkload(Reader& r, const YAML::Node& w, int32_t nodes, Workload* wl) {
  if (!r.OnlyKeys(w, "workload",
                  {"kind", "api", "ep", "sizes", "messages",
                   "endpoints_per_node", "srq_depth", "window", "credits",
                   "rc_timeout", "completion", "target", "deadline"})) {
    return false;
  }
  for (const char* required : {"kind", "sizes", "messages"}) {
    if (!w[required].IsDefined()) {
      return r.Fail(w.Mark(), std::string("workload.") + required, "the field",
                    "nothing (the field is missing)");
    }
  }
  int kind = 0, api = 0, ep = 0, completion = 0;
  int64_t messages = 0, eps = 1, srq = 0, window = wl->window, credits = 0,
          rc_timeout = 0, target = 0;
  const bool ok =
      r.Enum(w["kind"], "workload.kind",
             {"pingpong", "stream", "alltoall", "incast"}, &kind) &&
      Optional(w, "api",
               [&](const YAML::Node& v) {
                 return r.Enum(v, "workload.api", {"msg", "tagged"}, &api);
               }) &&
      Optional(w, "ep",
               [&](const YAML::Node& v) {
                 return r.Enum(v, "workload.ep", {"rdm", "msg"}, &ep);
               }) &&
      ReadSizes(r, w["sizes"], &wl->sizes) &&
      r.Int(w["messages"], "workload.messages", 1, 1'000'000, &messages) &&
      Optional(w, "endpoints_per_node",
               [&](const YAML::Node& v) {
                 return r.Int(v, "workload.endpoints_per_node", 1, 16, &eps);
               }) &&
      Optional(w, "srq_depth",
               [&](const YAML::Node& v) {
                 return r.Int(v, "workload.srq_depth", 0, 65536, &srq);
               }) &&
      Optional(w, "window",
               [&](const YAML::Node& v) {
                 return r.Int(v, "workload.window", 1, 4096, &window);
               }) &&
      Optional(w, "credits",
               [&](const YAML::Node& v) {
                 return r.Int(v, "workload.credits", 0, 65536, &credits);
               }) &&
      Optional(w, "rc_timeout",
               [&](const YAML::Node& v) {
                 return r.Int(v, "workload.rc_timeout", 1, 31, &rc_timeout);
               }) &&
      Optional(w, "completion",
               [&](const YAML::Node& v) {
                 return r.Enum(v, "workload.completion",
                               {"transmit", "inject", "delivery", "match"},
                               &completion);
               }) &&
      Optional(w, "target",
               [&](const YAML::Node& v) {
                 return r.Int(v, "workload.target", 0, nodes - 1, &target);
               }) &&
      Optional(w, "deadline", [&](const YAML::Node& v) {
        return r.Duration(v, "workload.deadline", 1000,
                          3600ull * 1'000'000'000ull, &wl->deadline_ns);
      });
  if (!ok) return false;
  wl->kind = static_cast<WorkloadKind>(kind);
  wl->api = static_cast<ApiKind>(api);
  wl->ep = static_cast<EndpointKind>(ep);
  wl->messages = static_cast<uint64_t>(messages);
  wl->endpoints_per_node = static_cast<int32_t>(eps);
  wl->srq_depth = static_cast<uint32_t>(srq);
  wl->window = static_cast<uint32_t>(window);
  wl->credits = static_cast<uint32_t>(credits);
  wl->rc_timeout = static_cast<uint8_t>(rc_timeout);
  wl->completion = static_cast<CompletionLevel>(completion);
  wl->target = static_cast<int32_t>(target);
  if (wl->ep == EndpointKind::kMsg && wl->srq_depth > 0) {
    // A shared receive context would match any connection's messages; the
    // checks of order per flow need each flow's receives on its own.
    return r.Fail(w["srq_depth"].Mark(), "workload.srq_depth",
                  "0 with ep: msg (each connection has its own receives)",
                  Reader::Describe(w["srq_depth"]));
  }
  return true;
}

bool ReadPacketFault(Reader& r, const YAML::Node& n, const std::string& f,
                     int32_t nodes, sim::PacketFault* pf) {
  if (!r.OnlyKeys(n, f,
                  {"kind", "probability", "from", "to", "qp", "ops", "start",
                   "end", "delay", "count_max"})) {
    return false;
  }
  if (!n["kind"].IsDefined()) {
    return r.Fail(n.Mark(), f + ".kind", "the field",
                  "nothing (the field is missing)");
  }
  int kind = 0;
  int64_t from = -1, to = -1, qp = 0, count = UINT32_MAX;
  const bool ok =
      r.Enum(n["kind"], f + ".kind",
             {"drop", "duplicate", "reorder", "delay", "delay_exponential",
              "corrupt"},
             &kind) &&
      Optional(n, "probability",
               [&](const YAML::Node& v) {
                 return r.Probability(v, f + ".probability", &pf->probability);
               }) &&
      Optional(n, "from",
               [&](const YAML::Node& v) {
                 return r.Int(v, f + ".from", 0, nodes - 1, &from);
               }) &&
      Optional(n, "to",
               [&](const YAML::Node& v) {
                 return r.Int(v, f + ".to", 0, nodes - 1, &to);
               }) &&
      Optional(n, "qp",
               [&](const YAML::Node& v) {
                 return r.Int(v, f + ".qp", 1, (1 << 24) - 1, &qp);
               }) &&
      Optional(n, "start",
               [&](const YAML::Node& v) {
                 return r.Duration(v, f + ".start", 0, UINT64_MAX >> 1,
                                   &pf->start_ns);
               }) &&
      Optional(n, "end",
               [&](const YAML::Node& v) {
                 return r.Duration(v, f + ".end", pf->start_ns + 1,
                                   UINT64_MAX >> 1, &pf->end_ns);
               }) &&
      Optional(n, "delay",
               [&](const YAML::Node& v) {
                 return r.Duration(v, f + ".delay", 0, 10'000'000'000ull,
                                   &pf->delay_ns);
               }) &&
      Optional(n, "count_max", [&](const YAML::Node& v) {
        return r.Int(v, f + ".count_max", 1, UINT32_MAX, &count);
      });
  if (!ok) return false;
  const YAML::Node ops = n["ops"];
  if (ops.IsDefined()) {
    if (!ops.IsSequence() || ops.size() == 0) {
      return r.Fail(ops.Mark(), f + ".ops", "a list of packet kinds",
                    Reader::Describe(ops));
    }
    pf->opcode_mask = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      int op = 0;
      if (!r.Enum(
              ops[i], f + ".ops",
              {"send", "write", "read_request", "read_response", "ack", "ud"},
              &op)) {
        return false;
      }
      pf->opcode_mask |= 1u << op;
    }
  }
  static constexpr sim::PacketFaultKind kKinds[] = {
      sim::PacketFaultKind::kDrop,
      sim::PacketFaultKind::kDuplicate,
      sim::PacketFaultKind::kReorder,
      sim::PacketFaultKind::kDelayFixed,
      sim::PacketFaultKind::kDelayExponential,
      sim::PacketFaultKind::kCorrupt};
  pf->kind = kKinds[kind];
  pf->src_node = static_cast<int32_t>(from);
  pf->dst_node = static_cast<int32_t>(to);
  pf->qp_num = static_cast<uint32_t>(qp);
  pf->count_max = static_cast<uint32_t>(count);
  return true;
}

// The kind after the simulator's own (the runner's, not the fabric's).
constexpr int kAppPause = 4;

bool ReadTimedFault(Reader& r, const YAML::Node& n, const std::string& f,
                    int32_t nodes, sim::TimedFault* tf, AppPause* pause,
                    bool* is_pause) {
  if (!r.OnlyKeys(n, f, {"at", "kind", "node", "peer", "qp", "duration"})) {
    return false;
  }
  for (const char* required : {"at", "kind", "node"}) {
    if (!n[required].IsDefined()) {
      return r.Fail(n.Mark(), f + "." + required, "the field",
                    "nothing (the field is missing)");
    }
  }
  int kind = 0;
  int64_t node = 0, peer = -1, qp = 0;
  const bool ok =
      r.Duration(n["at"], f + ".at", 0, UINT64_MAX >> 1, &tf->time_ns) &&
      r.Enum(
          n["kind"], f + ".kind",
          {"link_down", "link_up", "qp_error", "receiver_stall", "app_pause"},
          &kind) &&
      r.Int(n["node"], f + ".node", 0, nodes - 1, &node) &&
      Optional(n, "peer",
               [&](const YAML::Node& v) {
                 return r.Int(v, f + ".peer", 0, nodes - 1, &peer);
               }) &&
      Optional(n, "qp",
               [&](const YAML::Node& v) {
                 return r.Int(v, f + ".qp", 1, (1 << 24) - 1, &qp);
               }) &&
      Optional(n, "duration", [&](const YAML::Node& v) {
        return r.Duration(v, f + ".duration", 1, 3600ull * 1'000'000'000ull,
                          &tf->duration_ns);
      });
  if (!ok) return false;
  tf->kind = static_cast<sim::TimedFaultKind>(kind);
  tf->node = static_cast<int32_t>(node);
  tf->peer_node = static_cast<int32_t>(peer);
  tf->qp_num = static_cast<uint32_t>(qp);
  if (tf->kind == sim::TimedFaultKind::kQpError && qp == 0) {
    return r.Fail(n.Mark(), f + ".qp", "a QP number for qp_error",
                  "nothing (the field is missing)");
  }
  if ((tf->kind == sim::TimedFaultKind::kReceiverStall || kind == kAppPause) &&
      tf->duration_ns == 0) {
    return r.Fail(n.Mark(), f + ".duration",
                  "a duration for receiver_stall and app_pause",
                  "nothing (the field is missing)");
  }
  if (kind == kAppPause) {
    pause->node = tf->node;
    pause->start_ns = tf->time_ns;
    pause->end_ns = tf->time_ns + tf->duration_ns;
    *is_pause = true;
  }
  return true;
}

bool ReadFaults(Reader& r, const YAML::Node& f, int32_t nodes,
                sim::FaultPlan* plan, std::vector<AppPause>* pauses) {
  if (!r.OnlyKeys(f, "faults", {"packets", "timed"})) return false;
  for (const char* key : {"packets", "timed"}) {
    const YAML::Node list = f[key];
    if (!list.IsDefined()) continue;
    const std::string field = std::string("faults.") + key;
    if (!list.IsSequence()) {
      return r.Fail(list.Mark(), field, "a list", Reader::Describe(list));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string fi = field + "[" + std::to_string(i) + "]";
      if (key[0] == 'p') {
        sim::PacketFault pf;
        if (!ReadPacketFault(r, list[i], fi, nodes, &pf)) return false;
        plan->packet_faults.push_back(pf);
      } else {
        sim::TimedFault tf;
        AppPause pause;
        bool is_pause = false;
        if (!ReadTimedFault(r, list[i], fi, nodes, &tf, &pause, &is_pause)) {
          return false;
        }
        if (is_pause) {
          pauses->push_back(pause);
        } else {
          plan->timed_faults.push_back(tf);
        }
      }
    }
  }
  return true;
}

bool ReadPhases(Reader& r, const YAML::Node& n, std::vector<Phase>* phases) {
  if (!n.IsSequence() || n.size() == 0 || n.size() > 16) {
    return r.Fail(n.Mark(), "phases", "a list of 1 to 16 {name, start}",
                  Reader::Describe(n));
  }
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string f = "phases[" + std::to_string(i) + "]";
    Phase p;
    if (!r.OnlyKeys(n[i], f, {"name", "start"})) return false;
    if (!n[i]["name"].IsDefined()) {
      return r.Fail(n[i].Mark(), f + ".name", "the field",
                    "nothing (the field is missing)");
    }
    if (!r.String(n[i]["name"], f + ".name", &p.name)) return false;
    const uint64_t lo = phases->empty() ? 0 : phases->back().start_ns + 1;
    const uint64_t hi = phases->empty() ? 0 : UINT64_MAX >> 1;
    if (!n[i]["start"].IsDefined()) {
      if (!phases->empty()) {
        return r.Fail(n[i].Mark(), f + ".start", "the field",
                      "nothing (the field is missing)");
      }
    } else if (!r.Duration(n[i]["start"], f + ".start", lo, hi, &p.start_ns)) {
      return false;
    }
    phases->push_back(p);
  }
  return true;
}

// A scenario for users' own programs has no section about the built-in
// workload; the first one found is refused with the reason.
bool RefuseStudySections(Reader& r, const YAML::Node& root) {
  for (const char* key : {"workload", "phases", "report", "expect"}) {
    if (root[key].IsDefined()) {
      return r.Fail(root[key].Mark(), key,
                    "no such section: with `softfab run`, `softfab fabricd` "
                    "or the libfabric provider your own programs are the "
                    "workload (topology and faults apply)",
                    std::string("a '") + key + "' section");
    }
  }
  return true;
}

bool ReadRoot(Reader& r, const YAML::Node& root, ScenarioUse use, Scenario* s) {
  if (!root.IsMap()) {
    return r.Fail(root.Mark(), "", "a scenario (a map)",
                  Reader::Describe(root));
  }
  const bool study = use == ScenarioUse::kStudy;
  if (!study && !RefuseStudySections(r, root)) return false;
  if (!r.OnlyKeys(root, "",
                  {"name", "description", "expect", "topology", "workload",
                   "faults", "phases", "report"})) {
    return false;
  }
  if (!root["name"].IsDefined()) {
    return r.Fail(root.Mark(), "name", "the scenario's name",
                  "nothing (the field is missing)");
  }
  YAML::Node topology, workload;
  int expect = 0;
  const bool ok =
      r.String(root["name"], "name", &s->name) &&
      Optional(root, "description",
               [&](const YAML::Node& v) {
                 return r.String(v, "description", &s->description);
               }) &&
      Optional(root, "expect",
               [&](const YAML::Node& v) {
                 return r.Enum(v, "expect",
                               {"ok", "retry_exceeded", "rnr_retry_exceeded",
                                "flushed", "truncated", "error_completion",
                                "stalled"},
                               &expect) &&
                        r.String(v, "expect", &s->expect);
               }) &&
      r.Section(root, "", "topology", &topology) &&
      ReadTopology(r, topology, &s->topology) &&
      (!study ||
       (r.Section(root, "", "workload", &workload) &&
        ReadWorkload(r, workload, s->topology.nodes, &s->workload))) &&
      Optional(root, "faults",
               [&](const YAML::Node& v) {
                 return ReadFaults(r, v, s->topology.nodes, &s->faults,
                                   &s->app_pauses);
               }) &&
      Optional(
          root, "phases",
          [&](const YAML::Node& v) { return ReadPhases(r, v, &s->phases); }) &&
      Optional(root, "report", [&](const YAML::Node& v) {
        return r.OnlyKeys(v, "report", {"throughput_bucket"}) &&
               Optional(v, "throughput_bucket", [&](const YAML::Node& b) {
                 return r.Duration(b, "report.throughput_bucket", 1000,
                                   3600ull * 1'000'000'000ull,
                                   &s->throughput_bucket_ns);
               });
      });
  if (!ok) return false;
  if (!study && !s->app_pauses.empty()) {
    return r.Fail(root["faults"].Mark(), "faults.timed",
                  "no app_pause: it pauses `softfab study`'s built-in "
                  "workload, which a program's fabric does not have",
                  "an app_pause entry");
  }
  if (s->phases.empty()) s->phases.push_back({"all", 0});
  return true;
}

}  // namespace

StatusOr<Scenario> ParseScenario(const std::string& text,
                                 const std::string& path, std::string* error,
                                 ScenarioUse use) {
  Reader r(path, error);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    r.Syntax(e.mark, e.msg);
    return Status(EINVAL, "scenario file has a syntax error");
  }
  if (!root.IsMap()) {
    // Text that is not YAML at all parses as one long scalar: name the file's
    // first line, not the whole of it.
    const std::string first = text.substr(0, text.find('\n'));
    *error = path +
             ":1:1: not a scenario (a YAML map with name, topology, "
             "workload, faults): the file begins '" +
             first.substr(0, 60) + (first.size() > 60 ? "...'" : "'");
    return Status(EINVAL, "scenario file refused");
  }
  Scenario s;
  s.path = path;
  try {
    if (!ReadRoot(r, root, use, &s)) {
      return Status(EINVAL, "scenario file refused");
    }
  } catch (const YAML::Exception& e) {
    // Conversions are checked before they are made; this is a backstop.
    r.Syntax(e.mark, e.msg);
    return Status(EINVAL, "scenario file refused");
  }
  return s;
}

StatusOr<Scenario> LoadScenario(const std::string& path, std::string* error,
                                ScenarioUse use) {
  // Checked before reading: a device or pipe (/dev/zero) would be read for
  // ever, and a scenario is a few kilobytes.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    *error = path + ":1:1: cannot open the file (" + std::strerror(errno) + ")";
    return Status(ENOENT, "cannot open the scenario file");
  }
  if (!S_ISREG(st.st_mode)) {
    *error = path + ":1:1: not a regular file: a scenario is a YAML file";
    return Status(EINVAL, "the scenario is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kScenarioBytesMax) {
    *error = path + ":1:1: " + std::to_string(st.st_size) +
             " bytes: larger than a scenario file may be (" +
             std::to_string(kScenarioBytesMax) + ")";
    return Status(EINVAL, "the scenario file is too large");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ":1:1: cannot open the file";
    return Status(ENOENT, "cannot open the scenario file");
  }
  std::string text(kScenarioBytesMax + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kScenarioBytesMax) {  // grew since the stat
    *error = path + ":1:1: larger than a scenario file may be";
    return Status(EINVAL, "the scenario file is too large");
  }
  return ParseScenario(text, path, error, use);
}

sim::SimConfig SimConfigFor(const Scenario& scenario, uint64_t seed) {
  auto mtu = [](uint32_t bytes) {
    switch (bytes) {
      case 256:
        return transport::Mtu::k256;
      case 512:
        return transport::Mtu::k512;
      case 1024:
        return transport::Mtu::k1024;
      case 2048:
        return transport::Mtu::k2048;
      default:
        return transport::Mtu::k4096;
    }
  };
  auto link = [&](const LinkSpec& l) {
    sim::SimLinkConfig c;
    c.node_a = std::max(l.node_a, 0);
    c.node_b = std::max(l.node_b, 0);
    c.latency_ns = l.latency_ns;
    c.bandwidth_bps = l.bandwidth_bps;
    c.mtu = mtu(l.mtu_bytes);
    return c;
  };
  const Topology& t = scenario.topology;
  sim::SimConfig c;
  c.nodes = t.nodes;
  c.master_seed = seed;
  c.default_link = link(t.default_link);
  for (const LinkSpec& l : t.links) c.links.push_back(link(l));
  // A link fault on one path (peer set) needs that pair's own link entry:
  // pairs the file leaves to the default link get a copy of it.
  for (const sim::TimedFault& f : scenario.faults.timed_faults) {
    if (f.peer_node < 0 || (f.kind != sim::TimedFaultKind::kLinkDown &&
                            f.kind != sim::TimedFaultKind::kLinkUp)) {
      continue;
    }
    const bool listed =
        std::any_of(c.links.begin(), c.links.end(), [&](const auto& l) {
          return (l.node_a == f.node && l.node_b == f.peer_node) ||
                 (l.node_b == f.node && l.node_a == f.peer_node);
        });
    if (listed) continue;
    sim::SimLinkConfig pair = c.default_link;
    pair.node_a = f.node;
    pair.node_b = f.peer_node;
    c.links.push_back(pair);
  }
  c.faults = scenario.faults;
  c.max_srq_wr = t.max_srq_wr;
  c.personality = t.personality;
  return c;
}

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kPingPong:
      return "pingpong";
    case WorkloadKind::kStream:
      return "stream";
    case WorkloadKind::kAllToAll:
      return "alltoall";
    case WorkloadKind::kIncast:
      return "incast";
  }
  return "?";
}
const char* ApiKindName(ApiKind kind) {
  return kind == ApiKind::kMsg ? "msg" : "tagged";
}
const char* EndpointKindName(EndpointKind kind) {
  return kind == EndpointKind::kRdm ? "rdm" : "msg";
}

}  // namespace softfab::study
