// The fabric daemon's engine: one simulated fabric (backends/sim) shared by
// several processes, each a node, each connected over a Unix socket and a
// mailbox in the memfd it shares (protocol.h, mailbox.h). It serves their
// transport calls on their node's HCA, keeps their memory in shadow (in that
// memfd), and moves virtual time only when every process is parked, as the
// README's design section says. Single-threaded: Run() is the whole daemon.
#ifndef SOFTFAB_BACKENDS_SIMD_SERVER_H_
#define SOFTFAB_BACKENDS_SIMD_SERVER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "backends/sim/sim_fabric.h"
#include "transport/status.h"

namespace softfab::simd {

struct ServerOptions {
  // The fabric: nodes, topology, faults, seed. The server sets
  // shared_by_processes and the observer itself.
  sim::SimConfig config;
  // The listening socket's path (its directory should be private: 0700).
  std::string socket_path;
  // Run() returns once this many nodes have connected and all have gone
  // (softfab run); 0: serves until `stop_fd` is readable (softfab fabricd).
  int32_t expected_nodes = 0;
  // A process that keeps the fabric from advancing (neither parked nor
  // gone) this long in wall time is named on `log`, once per stall.
  uint64_t watchdog_ms = 10'000;
  // A process silent this long (between calls: computing, or talking to
  // another process outside the fabric) while every other one is parked
  // counts as parked, so the fabric moves on (the README's "outside" rule).
  // 0 (the default): never; time waits for every process, which keeps every
  // run exactly reproducible. Runs that use it may not be.
  uint64_t outside_ms = 0;
  // When set: a RoCEv2 capture of every packet the fabric delivers
  // (sim_pcap.h), and the per-process completion trace
  // (completion_trace.h), written when Run() returns.
  std::string pcap_path;
  std::string trace_path;
  FILE* log = stderr;
};

// What a run did, for the summary `softfab run` prints.
struct RunSummary {
  uint64_t digest = 0;
  uint64_t now_ns = 0;
  sim::SimStats stats;
  uint64_t advances = 0;
  uint64_t outside_advances = 0;  // advances with a process outside
  uint64_t look_rounds = 0;       // internal/thread_watch.h
  uint64_t requests = 0;
  uint64_t nodes_connected = 0;
  uint64_t clients_refused = 0;  // malformed, hostile or wrong uid
};

class FabricServer {
 public:
  virtual ~FabricServer() = default;
  // Serves until done (see ServerOptions::expected_nodes) or `stop_fd` (may
  // be -1) becomes readable. 0, or an errno value if the socket failed.
  virtual int Run(int stop_fd) = 0;
  virtual RunSummary summary() const = 0;
  // After Run: closes the capture and writes the completion trace (when
  // asked for). On failure `why` names the file and the cause.
  [[nodiscard]] virtual Status Finish(std::string* why) = 0;
};

// Binds the socket and builds the fabric; on failure `why` says what.
StatusOr<std::unique_ptr<FabricServer>> CreateFabricServer(
    const ServerOptions& options, std::string* why);

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_SERVER_H_
