// Speed of the simulated fabric: 8-byte RC sends with their ACKs and
// completions.
//
//   bazel run -c opt //backends/sim:sim_benchmark
//
// Counters: sends_per_s (messages delivered and acknowledged per wall second),
// events_per_s, s_per_msg (wall seconds per message), bytes_per_idle_qp (heap
// bytes one connected idle QP costs), and for the long run the heap growth
// between samples.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "tests/support/qp_bringup.h"
#include "transport/transport.h"

namespace softfab::sim {
namespace {

namespace tp = ::softfab::transport;

constexpr uint32_t kQpnBase =
    0x100;                  // the simulator numbers QPs from here, per device
constexpr int kWindow = 4;  // sends in flight per QP

template <typename T>
T Get(StatusOr<T> v) {
  if (!v.ok()) std::abort();
  return *v;
}

void Ok(const Status& s) {
  if (!s.ok()) std::abort();
}

struct NodeState {
  tp::ProtectionDomain* pd;
  tp::CompletionQueue* cq;
  tp::MemoryRegion* mr;
  std::vector<uint8_t> buf;
  std::vector<tp::QueuePair*> qps;  // index = qp_num - kQpnBase
};

struct Bench {
  std::unique_ptr<SimFabric> fabric;
  std::vector<NodeState> nodes;

  Bench(int num_nodes, int pairs, uint32_t depth) {
    SimConfig c;
    c.nodes = num_nodes;
    c.master_seed = 1;
    fabric = CreateSimFabric(c);
    nodes.resize(num_nodes);
    for (int n = 0; n < num_nodes; ++n) {
      NodeState& s = nodes[n];
      s.pd = Get(fabric->device(n)->AllocPd());
      s.cq = Get(fabric->device(n)->CreateCq(1 << 16));
      s.buf.assign(64, 0);
      s.mr = Get(s.pd->RegMr(s.buf.data(), s.buf.size(), tp::kAccessAll));
    }
    for (int i = 0; i < pairs; ++i) {
      // Pair i joins nodes 2i and 2i+1 (mod nodes): with 2*pairs >= nodes every
      // node carries traffic, so no CQ is polled that can never fill.
      const int a = (2 * i) % num_nodes;
      const int b = (2 * i + 1) % num_nodes;
      tp::QueuePair* qa = MakeQp(a, depth);
      tp::QueuePair* qb = MakeQp(b, depth);
      Connect(qa, b, qb->qp_num());
      Connect(qb, a, qa->qp_num());
    }
  }

  tp::QueuePair* MakeQp(int n, uint32_t depth) {
    tp::QpInitAttr ia;
    ia.send_cq = nodes[n].cq;
    ia.recv_cq = nodes[n].cq;
    ia.cap.max_send_wr = depth;
    ia.cap.max_recv_wr = depth;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.sq_sig_all = 1;
    tp::QueuePair* qp = Get(nodes[n].pd->CreateQp(ia));
    nodes[n].qps.push_back(qp);
    return qp;
  }

  // The benchmark's connection: a 4 KiB MTU, PSNs from 0, no READs.
  static void Connect(tp::QueuePair* qp, int peer_node, uint32_t peer_qpn) {
    ::softfab::testing::RcParams p;
    p.mtu = tp::Mtu::k4096;
    p.Psn(0);
    p.max_rd_atomic = p.max_dest_rd_atomic = 0;
    tp::AhAttr peer;
    peer.dlid = static_cast<uint16_t>(peer_node + 1);
    Ok(::softfab::testing::ConnectRc(qp, peer, peer_qpn, p));
  }

  void PostRecv(NodeState& s, tp::QueuePair* qp) {
    tp::Sge sge{reinterpret_cast<uint64_t>(s.buf.data()) + 32, 8, s.mr->lkey()};
    tp::RecvWr wr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const tp::RecvWr* bad;
    Ok(qp->PostRecv(&wr, &bad));
  }

  void PostSend(NodeState& s, tp::QueuePair* qp) {
    tp::Sge sge{reinterpret_cast<uint64_t>(s.buf.data()), 8, s.mr->lkey()};
    tp::SendWr wr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = tp::WrOpcode::kSend;
    const tp::SendWr* bad;
    Ok(qp->PostSend(&wr, &bad));
  }

  // Primes every QP: a window of receives and sends.
  void Start() {
    for (NodeState& s : nodes) {
      for (tp::QueuePair* qp : s.qps) {
        for (int w = 0; w < 2 * kWindow; ++w) PostRecv(s, qp);
        for (int w = 0; w < kWindow; ++w) PostSend(s, qp);
      }
    }
  }

  // Busy-polls every node's CQ, reposting a receive per receive and a send per
  // send completion, until `messages` receives have completed. Returns the
  // count.
  uint64_t Run(uint64_t messages) {
    uint64_t done = 0;
    tp::WorkCompletion wc[64];
    while (done < messages) {
      for (NodeState& s : nodes) {
        const int k = s.cq->Poll(64, wc);
        for (int j = 0; j < k; ++j) {
          if (wc[j].status != tp::WcStatus::kSuccess) std::abort();
          tp::QueuePair* qp = s.qps[wc[j].qp_num - kQpnBase];
          if (wc[j].opcode == tp::WcOpcode::kRecv) {
            PostRecv(s, qp);
            ++done;
          } else {
            PostSend(s, qp);
          }
        }
      }
    }
    return done;
  }
};

// Args: QP pairs, nodes.
void BM_RcSend8B(benchmark::State& state) {
  const int pairs = static_cast<int>(state.range(0));
  const int nodes = static_cast<int>(state.range(1));
  Bench b(nodes, pairs, 4 * kWindow);
  b.Start();
  b.Run(static_cast<uint64_t>(pairs) * 64);  // warm up the heap and the rings
  const uint64_t events0 = b.fabric->stats().events;
  uint64_t messages = 0;
  for (auto _ : state) messages += b.Run(100'000);
  const uint64_t events = b.fabric->stats().events - events0;
  state.counters["sends_per_s"] = benchmark::Counter(
      static_cast<double>(messages), benchmark::Counter::kIsRate);
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["s_per_msg"] = benchmark::Counter(
      static_cast<double>(messages),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["qps"] = 2.0 * pairs;
  state.counters["rnr_naks"] = static_cast<double>(b.fabric->stats().rnr_naks);
  state.counters["events_per_msg"] = static_cast<double>(events) / messages;
  // Empty polls the time hold returned early (sim_fabric.h), per message.
  state.counters["held_per_msg"] =
      static_cast<double>(b.fabric->stats().polls_held) / messages;
}
BENCHMARK(BM_RcSend8B)
    ->Args({1, 2})    // 2 QPs
    ->Args({32, 2})   // 64 QPs
    ->Args({512, 2})  // 1024 QPs
    ->Args({32, 64})  // 64 QPs over 64 nodes
    ->Unit(benchmark::kMillisecond);

size_t HeapInUse() { return mallinfo2().uordblks; }

// Heap bytes per connected, idle QP (send and receive depth 64, one SGE each).
void BM_MemoryPerIdleQp(benchmark::State& state) {
  const int pairs = 512;
  for (auto _ : state) {
    const size_t before = HeapInUse();
    Bench b(2, pairs, 64);
    const size_t after = HeapInUse();
    state.counters["bytes_per_idle_qp"] =
        static_cast<double>(after - before) / (2.0 * pairs);
  }
}
BENCHMARK(BM_MemoryPerIdleQp)->Iterations(1)->Unit(benchmark::kMillisecond);

// 10 million messages on 64 QPs over 4 nodes. Heap in use is sampled after 2M,
// 6M and 10M messages: storage may still settle early on, but the last 4M must
// not grow it.
void BM_LongRun10M(benchmark::State& state) {
  for (auto _ : state) {
    Bench b(4, 32, 4 * kWindow);
    b.Start();
    b.Run(2'000'000);
    const size_t at2m = HeapInUse();
    b.Run(4'000'000);
    const size_t at6m = HeapInUse();
    b.Run(4'000'000);
    const size_t at10m = HeapInUse();
    state.counters["heap_growth_2m_6m_bytes"] =
        static_cast<double>(at6m) - at2m;
    state.counters["heap_growth_6m_10m_bytes"] =
        static_cast<double>(at10m) - at6m;
    state.counters["event_queue_max"] =
        static_cast<double>(b.fabric->stats().event_queue_max);
    state.counters["events"] = static_cast<double>(b.fabric->stats().events);
    state.counters["sends_per_s"] =
        benchmark::Counter(1e7, benchmark::Counter::kIsRate);
  }
}
BENCHMARK(BM_LongRun10M)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace softfab::sim

BENCHMARK_MAIN();
