// A small fault-injection study on the simulator: for each seed, three nodes
// exchange tagged messages (eager and rendezvous sizes) through a fault plan
// (drop, duplicate, reorder on every packet), and the table says per seed
// whether every message arrived exactly once with its bytes, how much the
// fabric had to repair, the virtual latency, and the digest that replays it.
//
//   bazel run -c opt //examples:fault_study -- [--seeds N] [--first S]
//       [--messages M] [--drop P] [--duplicate P] [--reorder P] [--seed S]
//       [--ack-timeout N]
//
// --seed S runs one seed (a replay); every run of the same build and flags
// prints the same table.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"

namespace {

using namespace softfab;  // NOLINT: a small program.

struct Options {
  uint64_t first = 1;
  uint64_t seeds = 100;
  int messages = 200;
  double drop = 0.01;
  double duplicate = 0.01;
  double reorder = 0.02;
  int ack_timeout = 14;  // IB exponent: 4.096 us * 2^n.
};

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (a != name || i + 1 >= argc) return nullptr;
      return argv[++i];
    };
    if (const char* v = value("--seeds")) {
      o->seeds = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--first")) {
      o->first = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--seed")) {
      o->first = std::strtoull(v, nullptr, 10);
      o->seeds = 1;
    } else if (const char* v = value("--messages")) {
      o->messages = std::atoi(v);
    } else if (const char* v = value("--drop")) {
      o->drop = std::atof(v);
    } else if (const char* v = value("--duplicate")) {
      o->duplicate = std::atof(v);
    } else if (const char* v = value("--reorder")) {
      o->reorder = std::atof(v);
    } else if (const char* v = value("--ack-timeout")) {
      o->ack_timeout = std::atoi(v);
    } else {
      std::fprintf(stderr, "unknown or incomplete option: %s\n", a.c_str());
      return false;
    }
  }
  auto prob = [](double p) { return p >= 0 && p <= 1; };
  if (o->seeds == 0 || o->seeds > 100000 || o->messages <= 0 ||
      o->messages > 100000 || !prob(o->drop) || !prob(o->duplicate) ||
      !prob(o->reorder) || o->ack_timeout < 1 || o->ack_timeout > 31) {
    std::fprintf(stderr, "options out of range\n");
    return false;
  }
  return true;
}

struct Node {
  transport::Device* device = nullptr;
  std::unique_ptr<core::CompletionQueue> cq;
  std::unique_ptr<core::AddressVector> av;
  std::unique_ptr<core::Endpoint> ep;
  std::vector<uint64_t> addr;
};

struct Result {
  int delivered = 0;
  int duplicates = 0;  // Deliveries beyond the first (must stay 0).
  int corrupted = 0;   // Wrong bytes (must stay 0).
  int errors = 0;      // Error completions (must stay 0).
  sim::SimStats stats;
  std::vector<uint64_t> latency_ns;
  uint64_t digest = 0;
  uint64_t end_ns = 0;
};

std::vector<uint8_t> Payload(size_t n, uint64_t key) {
  std::vector<uint8_t> v(n);
  uint64_t x = key * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

Result RunSeed(const Options& o, uint64_t seed) {
  sim::SimConfig config;
  config.nodes = 3;
  config.master_seed = seed;
  sim::PacketFault drop, dup, reorder;
  drop.kind = sim::PacketFaultKind::kDrop;
  drop.probability = o.drop;
  dup.kind = sim::PacketFaultKind::kDuplicate;
  dup.probability = o.duplicate;
  dup.delay_ns = 700;
  reorder.kind = sim::PacketFaultKind::kReorder;
  reorder.probability = o.reorder;
  reorder.delay_ns = 5000;
  config.faults.packet_faults = {drop, dup, reorder};
  auto fabric = sim::CreateSimFabric(config);
  Result r;
  std::vector<Node> nodes(3);
  for (int i = 0; i < 3; ++i) {
    Node& n = nodes[i];
    n.device = fabric->device(i);
    auto pd = n.device->AllocPd();
    n.cq = std::make_unique<core::CompletionQueue>(1 << 14);
    n.av = std::make_unique<core::AddressVector>(16);
    core::EndpointAttr attr;
    attr.rc_timeout = static_cast<uint8_t>(o.ack_timeout);
    auto ep = core::Endpoint::Create(n.device, *pd, attr);
    if (!pd.ok() || !ep.ok()) {
      ++r.errors;
      return r;
    }
    n.ep = std::move(*ep);
    // Reading the CQ drives the endpoint bound to it (manual progress).
    (void)n.ep->BindCq(n.cq.get(), core::kSend | core::kRecv);
    (void)n.ep->BindAv(n.av.get());
    (void)n.ep->Enable();
  }
  for (Node& n : nodes) {
    for (Node& m : nodes) n.addr.push_back(*n.av->Insert(m.ep->name()));
  }
  // Nodes 0 and 2 send to node 1; sizes cycle through eager and rendezvous.
  const size_t sizes[] = {8, 256, 4096, 20000, 0, 64};
  struct Msg {
    std::vector<uint8_t> out, in;
    iovec siov{}, riov{};
    uint64_t sent_at = 0;
    int received = 0;
  };
  std::map<uint64_t, Msg> msgs;
  for (int k = 0; k < o.messages; ++k) {
    const uint64_t tag = (uint64_t(k % 2 ? 2 : 0) << 32) | k;
    Msg& m = msgs[tag];
    m.out = Payload(sizes[k % 6], seed * 100003 + k);
    m.in.assign(m.out.size(), 0);
  }
  for (auto& [tag, m] : msgs) {
    m.riov = {m.in.data(), m.in.size()};
    core::RecvArgs a;
    a.iov = &m.riov;
    a.iov_count = 1;
    a.tag = tag;
    a.context = &m;
    a.tagged = true;
    if (!nodes[1].ep->Recv(a).ok()) ++r.errors;
  }
  auto poll = [&](int i) {
    core::CqEntry e;
    int got = 0;
    while (true) {
      const int n = nodes[i].cq->Read(&e, 1);
      if (n == -core::CompletionQueue::kErrAvail) {
        core::CqErrEntry x;
        (void)nodes[i].cq->ReadError(&x);
        ++r.errors;
        continue;
      }
      if (n != 1) break;
      ++got;
      if (i != 1) continue;
      Msg& m = *static_cast<Msg*>(e.op_context);
      if (++m.received > 1) ++r.duplicates;
      if (e.len != m.out.size() ||
          (!m.out.empty() &&
           std::memcmp(m.in.data(), m.out.data(), m.out.size()) != 0)) {
        ++r.corrupted;
      }
      ++r.delivered;
      r.latency_ns.push_back(fabric->clock().NowNs() - m.sent_at);
    }
    return got;
  };
  for (auto& [tag, m] : msgs) {
    const int from = static_cast<int>(tag >> 32);
    m.siov = {m.out.data(), m.out.size()};
    core::SendArgs a;
    a.iov = &m.siov;
    a.iov_count = 1;
    a.dest = nodes[from].addr[1];
    a.tag = tag;
    a.tagged = true;
    m.sent_at = fabric->clock().NowNs();
    for (int tries = 0; tries < 1000000; ++tries) {
      const Status s = nodes[from].ep->Send(a);
      if (s.ok()) break;
      if (s.code() != EAGAIN) {
        ++r.errors;
        break;
      }
      for (int i = 0; i < 3; ++i) poll(i);
    }
  }
  for (int round = 0; round < 2000000 && r.delivered < o.messages; ++round) {
    for (int i = 0; i < 3; ++i) poll(i);
  }
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 3; ++i) poll(i);
  }
  r.stats = fabric->stats();
  r.digest = fabric->digest();
  r.end_ns = fabric->clock().NowNs();
  std::sort(r.latency_ns.begin(), r.latency_ns.end());
  return r;
}

double Percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i =
      std::min(sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1)));
  return sorted[i] / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) return 2;
  std::printf(
      "softfab fault-injection study on the simulator\n"
      "  3 nodes, %d tagged messages per seed (8 B .. 20 KB, eager and "
      "rendezvous)\n"
      "  faults on every packet: drop %.1f%%, duplicate %.1f%%, reorder "
      "%.1f%%\n"
      "  RC ack timeout 4.096 us * 2^%d = %.3f ms (--ack-timeout)\n\n",
      o.messages, 100 * o.drop, 100 * o.duplicate, 100 * o.reorder,
      o.ack_timeout, 4.096e-3 * (1u << o.ack_timeout));
  std::printf("%6s %11s %6s %8s %8s %9s %9s %11s  %-16s %s\n", "seed",
              "delivered", "dups", "dropped", "retrans", "p50_us", "p99_us",
              "virt_ms", "digest", "outcome");
  int ok = 0, failed = 0;
  uint64_t retrans_total = 0, retrans_max = 0, worst_p99_seed = 0;
  double worst_p99 = 0;
  std::vector<uint64_t> failures;
  for (uint64_t seed = o.first; seed < o.first + o.seeds; ++seed) {
    const Result r = RunSeed(o, seed);
    const bool good = r.delivered == o.messages && r.duplicates == 0 &&
                      r.corrupted == 0 && r.errors == 0;
    const double p99 = Percentile(r.latency_ns, 0.99);
    std::printf("%6" PRIu64 " %5d/%-5d %6d %8" PRIu64 " %8" PRIu64
                " %9.1f %9.1f %11.3f  %016" PRIx64 " %s\n",
                seed, r.delivered, o.messages, r.duplicates,
                r.stats.packets_dropped, r.stats.retransmits,
                Percentile(r.latency_ns, 0.5), p99, r.end_ns / 1e6, r.digest,
                good ? "ok"
                     : (r.corrupted    ? "FAIL: wrong bytes"
                        : r.duplicates ? "FAIL: delivered twice"
                        : r.errors     ? "FAIL: error completions"
                                       : "FAIL: messages missing"));
    (good ? ok : failed) += 1;
    if (!good) failures.push_back(seed);
    retrans_total += r.stats.retransmits;
    retrans_max = std::max(retrans_max, r.stats.retransmits);
    if (p99 > worst_p99) {
      worst_p99 = p99;
      worst_p99_seed = seed;
    }
  }
  std::printf("\nsummary: %" PRIu64
              " seeds, %d ok, %d failed; retransmissions mean "
              "%.1f, max %" PRIu64 "; worst p99 latency %.1f us (seed %" PRIu64
              ")\n",
              o.seeds, ok, failed, double(retrans_total) / o.seeds, retrans_max,
              worst_p99, worst_p99_seed);
  for (uint64_t seed : failures) {
    std::printf(
        "replay: bazel run -c opt //examples:fault_study -- --seed %" PRIu64
        " --messages %d --drop %g --duplicate %g --reorder %g"
        " --ack-timeout %d\n",
        seed, o.messages, o.drop, o.duplicate, o.reorder, o.ack_timeout);
  }
  return failed == 0 ? 0 : 1;
}
