// What a connection costs an RDM endpoint, and that a flood of connection
// requests cannot make it cost more than peers_max of them (issue 13). A
// raw peer (fuzz::RawPeer) sends 10,000 connection requests from 10,000
// different names to one endpoint whose peers_max is the benchmark's
// argument; the heap the process grows by (glibc's mallinfo2: softfab's
// peer table, credit words, and the simulated HCA's QP state, which on real
// hardware lives in the driver and the NIC) is reported in total and per
// accepted peer. Arguments: peers_max, tx_size.
//   bazel run -c opt //bench:peer_memory_benchmark
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdint>
#include <memory>

#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/wire.h"
#include "tests/support/raw_peer.h"

namespace softfab {
namespace {

constexpr uint32_t kRequests = 10'000;

size_t HeapInUse() { return mallinfo2().uordblks; }

void BM_ConnectionFlood(benchmark::State& state) {
  const auto peers_max = static_cast<uint32_t>(state.range(0));
  const auto tx_size = static_cast<uint32_t>(state.range(1));
  size_t grown = 0;
  int accepted = 0;
  for (auto _ : state) {
    sim::SimConfig config;
    config.nodes = 2;
    auto fabric = sim::CreateSimFabric(config);
    auto pd = fabric->device(0)->AllocPd();
    core::EndpointAttr attr;
    attr.peers_max = peers_max;
    attr.tx_size = tx_size;
    // The CQ outlives the endpoint bound to it (declared first).
    core::CompletionQueue cq(4096);
    core::AddressVector av(16);
    auto ep = core::Endpoint::Create(fabric->device(0), *pd, attr);
    if (!ep.ok() || !(*ep)->BindCq(&cq, core::kSend | core::kRecv).ok() ||
        !(*ep)->BindAv(&av).ok() || !(*ep)->Enable().ok()) {
      state.SkipWithError("endpoint set-up failed");
      return;
    }
    core::Endpoint* victim = ep->get();
    fuzz::RawPeer peer(fabric->device(1));
    if (!peer.ok()) {
      state.SkipWithError("raw peer set-up failed");
      return;
    }
    const size_t before = HeapInUse();
    accepted = 0;
    for (uint32_t i = 0; i < kRequests; ++i) {
      wire::CmMessage m = peer.Cm(wire::CmType::kRequest, i + 1, 64);
      m.from.lid = static_cast<uint16_t>(i + 1);  // 10,000 different names
      uint8_t bytes[wire::kCmMaxBytes];
      wire::EncodeCm(m, bytes);
      (void)peer.SendCm(victim->name(), bytes, wire::CmSize(m));
      victim->Progress();
      wire::CmMessage answer;
      while (peer.ReceiveCm(&answer)) {
        accepted += answer.type == wire::CmType::kReply;
      }
    }
    grown = HeapInUse() - before;
  }
  state.counters["requests"] = kRequests;
  state.counters["peers_accepted"] = accepted;
  state.counters["heap_grown_KiB"] = static_cast<double>(grown) / 1024;
  state.counters["bytes_per_peer"] =
      accepted > 0 ? static_cast<double>(grown) / accepted : 0;
}
// {peers_max, tx_size}: the default tx_size (256) at three table sizes, and
// a small send queue, to show what of a peer's cost the queue is.
BENCHMARK(BM_ConnectionFlood)
    ->Args({256, 256})
    ->Args({1024, 256})
    ->Args({4096, 256})
    ->Args({256, 16})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace softfab
