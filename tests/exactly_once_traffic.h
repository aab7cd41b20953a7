// The exactly-once traffic of the fault scenarios (fault_test, soak_test):
// nodes 0 and 2 of a three-node Cluster each send tagged messages (eager,
// empty and rendezvous sizes) to node 1, which posts half its receives before
// the sends and half after (unexpected messages). Every message must arrive
// exactly once with its bytes and nothing past its buffer, every send must
// complete without error, and nothing may arrive afterwards.
#ifndef SOFTFAB_TESTS_EXACTLY_ONCE_TRAFFIC_H_
#define SOFTFAB_TESTS_EXACTLY_ONCE_TRAFFIC_H_

#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/messaging_harness.h"

namespace softfab::testing {

// A config with `seed` and per-packet faults on every path: `drop` lost,
// `duplicate` copied (0.7 us later), `reorder` held back 5 us.
inline sim::SimConfig PacketFaultConfig(uint64_t seed, double drop,
                                        double duplicate, double reorder) {
  sim::SimConfig c;
  c.master_seed = seed;
  sim::PacketFault d;
  d.kind = sim::PacketFaultKind::kDrop;
  d.probability = drop;
  sim::PacketFault dup;
  dup.kind = sim::PacketFaultKind::kDuplicate;
  dup.probability = duplicate;
  dup.delay_ns = 700;
  sim::PacketFault r;
  r.kind = sim::PacketFaultKind::kReorder;
  r.probability = reorder;
  r.delay_ns = 5000;
  c.faults.packet_faults = {d, dup, r};
  return c;
}

// `n` bytes that depend on `seed` (xorshift).
inline std::vector<uint8_t> Bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

// Runs the traffic, `per_sender` messages from each sender; returns "" or
// what went wrong first.
inline std::string RunExactlyOnceTraffic(Cluster& c, uint64_t seed,
                                         int per_sender) {
  const size_t sizes[] = {8, 0, 1500, 20000, 64};
  struct Message {
    std::vector<uint8_t> out, in;
    iovec siov, riov;
    int received = 0;
    int sent = 0;
  };
  std::map<uint64_t, Message> msgs;  // By tag (ordered: deterministic).
  for (int sender : {0, 2}) {
    for (int i = 0; i < per_sender; ++i) {
      const uint64_t tag = (uint64_t(sender) << 32) | i;
      Message& m = msgs[tag];
      m.out = Bytes(sizes[i % 5], seed * 1000 + tag);
      m.in.assign(m.out.size() + 4, 0xEE);
    }
  }
  auto post = [&](uint64_t tag) {
    Message& m = msgs[tag];
    return c[1]
        .ep->Recv(TRecv(m.in.data(), m.out.size(), tag, 0, &m, &m.riov))
        .ok();
  };
  for (auto& [tag, m] : msgs) {
    if ((tag & 1) == 0 && !post(tag)) return "receive refused";
  }
  int got = 0, sent_done = 0;
  std::string error;
  auto drain = [&](int n) {
    core::CqEntry e;
    const int r = c[n].cq->Read(&e, 1);
    if (r == 1) {
      auto* m = static_cast<Message*>(e.op_context);
      if (n == 1) {
        ++m->received;
        ++got;
        if (e.len != m->out.size()) error = "wrong length";
      } else {
        ++m->sent;
        ++sent_done;
      }
    } else if (r == -core::CompletionQueue::kErrAvail) {
      core::CqErrEntry x;
      (void)c[n].cq->ReadError(&x);
      error = "error completion at node " + std::to_string(n) + ": " +
              std::to_string(x.err);
    }
  };
  for (auto& [tag, m] : msgs) {
    const int sender = static_cast<int>(tag >> 32);
    Status s;
    for (int tries = 0; tries < 100000; ++tries) {
      s = c[sender].ep->Send(TSend(m.out.data(), m.out.size(),
                                   c[sender].addr[1], tag, &m, &m.siov));
      if (s.code() != EAGAIN) break;
      c.ProgressAll();
      drain(sender);
    }
    if (!s.ok()) return std::string("send refused: ") + s.message();
  }
  for (auto& [tag, m] : msgs) {
    if ((tag & 1) == 1 && !post(tag)) return "receive refused";
  }
  const int total = static_cast<int>(msgs.size());
  for (int round = 0;
       round < 3000000 && error.empty() && (got < total || sent_done < total);
       ++round) {
    for (int n : {0, 1, 2}) drain(n);
  }
  if (!error.empty()) return error;
  if (got != total) return "messages missing";
  if (sent_done != total) return "send completions missing";
  for (auto& [tag, m] : msgs) {
    const std::string which = " (tag " + std::to_string(tag) + ")";
    if (m.received != 1)
      return "received " + std::to_string(m.received) + which;
    if (m.sent != 1) return "send completed " + std::to_string(m.sent) + which;
    if (!m.out.empty() &&
        std::memcmp(m.in.data(), m.out.data(), m.out.size()) != 0) {
      return "wrong bytes" + which;
    }
    for (size_t b = m.out.size(); b < m.in.size(); ++b) {
      if (m.in[b] != 0xEE) return "wrote past the buffer" + which;
    }
  }
  // Nothing more arrives afterwards (no duplicate delivery).
  for (int i = 0; i < 2000; ++i) c.ProgressAll();
  core::CqEntry e;
  if (c[1].cq->Read(&e, 1) != -EAGAIN) return "a duplicate arrived";
  return "";
}

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_EXACTLY_ONCE_TRAFFIC_H_
