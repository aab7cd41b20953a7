// softfab's messaging overhead on the simulator with zero-latency, unlimited
// bandwidth links, through the public sf_* API: what the library itself costs
// per message, for bench/compare_perf.py to put beside UCX and fi_pingpong.
//
//   bazel run --config=release //bench:fabric_benchmark
//
// BM_TaggedMessageRate/<size>: one sender streams tagged messages to one
//   receiver that keeps receives posted; items_per_second = messages/s. Up to
//   inject_size the messages go by sf_tinject (as tag_bw's short messages).
// BM_TaggedPingPong/<size>: two endpoints bounce one message; one iteration is
//   one half round trip (one direction), so the time is the one-way latency.
//   Up to inject_size the message goes by sf_tinject, as fi_pingpong does.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"

namespace {

struct Side {
  sf_domain* domain = nullptr;
  sf_cq* cq = nullptr;
  sf_av* av = nullptr;
  sf_ep* ep = nullptr;
  sf_addr_t peer = 0;
};

class Pair {
 public:
  bool Open() {
    sf_fabric_attr fa{};
    fa.backend = SF_BACKEND_SIM;
    fa.sim_nodes = 2;
    fa.sim_seed = 1;
    fa.sim_latency_ns = 0;
    fa.sim_bandwidth_bps = 0;
    if (sf_fabric_open(&fa, &fabric_, nullptr)) return false;
    uint8_t names[2][SF_NAME_BYTES];
    for (int i = 0; i < 2; ++i) {
      Side& s = side[i];
      sf_cq_attr ca{};
      ca.size = 4096;
      ca.format = SF_CQ_FORMAT_TAGGED;
      sf_ep_attr ea{};
      ea.type = SF_EP_RDM;
      ea.caps = SF_TAGGED;
      size_t len = SF_NAME_BYTES;
      if (sf_domain_open(fabric_, i, &s.domain, nullptr) ||
          sf_cq_open(s.domain, &ca, &s.cq, nullptr) ||
          sf_av_open(s.domain, nullptr, &s.av, nullptr) ||
          sf_endpoint(s.domain, &ea, &s.ep, nullptr) ||
          sf_ep_bind(s.ep, &s.cq->fid, SF_TRANSMIT | SF_RECV) ||
          sf_ep_bind(s.ep, &s.av->fid, 0) || sf_enable(s.ep) ||
          sf_getname(&s.ep->fid, names[i], &len)) {
        return false;
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (sf_av_insert(side[i].av, names[1 - i], 1, &side[i].peer, 0,
                       nullptr) != 1) {
        return false;
      }
    }
    return true;
  }
  ~Pair() {
    for (Side& s : side) {
      if (s.ep) (void)sf_close(&s.ep->fid);
      if (s.cq) (void)sf_close(&s.cq->fid);
      if (s.av) (void)sf_close(&s.av->fid);
      if (s.domain) (void)sf_close(&s.domain->fid);
    }
    if (fabric_) (void)sf_close(&fabric_->fid);
  }
  Side side[2];

 private:
  sf_fabric* fabric_ = nullptr;
};

void BM_TaggedMessageRate(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  Pair p;
  if (!p.Open()) {
    state.SkipWithError(sf_last_error());
    return;
  }
  constexpr int kWindow = 128;  // Receives kept posted.
  std::vector<uint8_t> out(size), in(size * kWindow + 1);
  for (int i = 0; i < kWindow; ++i) {
    if (sf_trecv(p.side[1].ep, in.data() + i * size, size, nullptr,
                 SF_ADDR_UNSPEC, 1, 0, nullptr)) {
      state.SkipWithError(sf_last_error());
      return;
    }
  }
  sf_cq_tagged_entry e[64];
  int64_t received = 0;
  // Up to the inject size a message goes by sf_tinject: like ucx_perftest's
  // tag_bw, whose short messages complete at once without a completion event.
  sf_ep_attr attr{};
  (void)sf_ep_query(p.side[0].ep, &attr);
  const bool inject = size <= attr.inject_size;
  for (auto _ : state) {
    // Send one message; on EAGAIN drive both sides until it goes.
    while ((inject
                ? sf_tinject(p.side[0].ep, out.data(), size, p.side[0].peer, 1)
                : sf_tsend(p.side[0].ep, out.data(), size, nullptr,
                           p.side[0].peer, 1, nullptr)) == -SF_EAGAIN) {
      (void)sf_cq_read(p.side[0].cq, e, 64);
      const ssize_t n = sf_cq_read(p.side[1].cq, e, 64);
      for (ssize_t i = 0; i < n; ++i) {
        ++received;
        (void)sf_trecv(p.side[1].ep, e[i].buf, size, nullptr, SF_ADDR_UNSPEC, 1,
                       0, nullptr);
      }
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["received_in_loop"] = static_cast<double>(received);
}

void BM_TaggedPingPong(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  Pair p;
  if (!p.Open()) {
    state.SkipWithError(sf_last_error());
    return;
  }
  std::vector<uint8_t> buf[2] = {std::vector<uint8_t>(size),
                                 std::vector<uint8_t>(size)};
  for (int i = 0; i < 2; ++i) {
    (void)sf_trecv(p.side[i].ep, buf[i].data(), size, nullptr, SF_ADDR_UNSPEC,
                   1, 0, nullptr);
  }
  sf_ep_attr attr{};
  (void)sf_ep_query(p.side[0].ep, &attr);
  const bool inject = size <= attr.inject_size;
  sf_cq_tagged_entry e[8];
  int turn = 0;  // Who sends in this iteration (one half round trip).
  for (auto _ : state) {
    Side& from = p.side[turn];
    Side& to = p.side[1 - turn];
    // Like fi_pingpong (libfabric's util/pingpong.c), messages up to the
    // inject size go by inject, larger ones by send.
    while ((inject ? sf_tinject(from.ep, buf[turn].data(), size, from.peer, 1)
                   : sf_tsend(from.ep, buf[turn].data(), size, nullptr,
                              from.peer, 1, nullptr)) == -SF_EAGAIN) {
      (void)sf_cq_read(from.cq, e, 8);
    }
    // Wait for the receive at the other side, then repost it.
    bool got = false;
    while (!got) {
      const ssize_t n = sf_cq_read(to.cq, e, 8);
      for (ssize_t i = 0; i < n; ++i) {
        if (e[i].flags & SF_RECV) got = true;
      }
      (void)sf_cq_read(from.cq, e, 8);  // Send completions, credits.
    }
    (void)sf_trecv(to.ep, buf[1 - turn].data(), size, nullptr, SF_ADDR_UNSPEC,
                   1, 0, nullptr);
    turn = 1 - turn;
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(BM_TaggedMessageRate)->Arg(8)->Arg(4096);
BENCHMARK(BM_TaggedPingPong)->Arg(8)->Arg(4096);

}  // namespace
