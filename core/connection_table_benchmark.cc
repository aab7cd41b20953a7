// The cost of finding the peer a completion belongs to by its QP number
// (ConnectionTable::ByQpn), as an endpoint does for every arrival and every
// send completion: peers' completions in turn, so the kept last answer
// rarely helps, at 2 to 4,096 peers. QP numbers are spread as a device gives
// them (24-bit, not in order of connection).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/connection_table.h"
#include "core/wire.h"

namespace softfab::core {
namespace {

// N peers with QP numbers from a fixed generator (the same every run).
std::vector<uint32_t> Connect(ConnectionTable* t, int n) {
  std::vector<uint32_t> qpns;
  uint32_t x = 12345;
  for (int i = 0; i < n; ++i) {
    wire::Name name;
    name.cm_qpn = static_cast<uint32_t>(i + 1);
    const uint32_t peer = t->FindOrAdd(name);
    x = x * 1664525u + 1013904223u;
    const uint32_t qpn = (x >> 8) & 0xffffff;
    t->SetQpn(qpn, peer);
    qpns.push_back(qpn);
  }
  return qpns;
}

void BM_ByQpnInTurn(benchmark::State& state) {
  ConnectionTable t;
  const std::vector<uint32_t> qpns =
      Connect(&t, static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(t.ByQpn(qpns[i]));
    if (++i == qpns.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ByQpnInTurn)->Arg(2)->Arg(64)->Arg(1024)->Arg(4096);

}  // namespace
}  // namespace softfab::core
