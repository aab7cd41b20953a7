// softfab replay: reruns one seed of a scenario in this process, prints its
// outcome, digest and the invariant it broke (if any), and writes its event
// trace and RoCEv2 capture when asked.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "tools/softfab/commands.h"
#include "tools/softfab/study_report.h"
#include "tools/softfab/study_summary.h"
#include "tools/study/runner.h"

namespace softfab::cli {

int RunReplay(const ReplayArgs& args) {
  std::string error;
  auto scenario = study::LoadScenario(args.scenario, &error);
  if (!scenario.ok()) {
    std::fprintf(stderr, "softfab replay: %s\n", error.c_str());
    return kExitUsage;
  }
  for (const std::string* path : {&args.trace_path, &args.pcap_path}) {
    if (!path->empty() && !PrepareOutputFile(*path, &error)) {
      std::fprintf(stderr, "softfab replay: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  study::RunOptions options;
  options.seed = args.seed;
  options.trace_path = args.trace_path;
  options.pcap_path = args.pcap_path;
  const study::SeedResult r = study::RunSeed(*scenario, options);
  std::printf("scenario %s seed %" PRIu64 "\n", scenario->name.c_str(), r.seed);
  std::printf("digest %016" PRIx64 "\n", r.digest);
  std::printf("outcome %s (expected %s)\n", r.outcome.c_str(),
              scenario->expect.c_str());
  if (r.invariant.empty()) {
    std::printf("invariants held\n");
  } else {
    std::printf("broken invariant %s: %s\n", r.invariant.c_str(),
                r.invariant_detail.c_str());
  }
  const study::SeedCounts& c = r.counts;
  std::printf("virtual time %s, %" PRIu64 " events\n",
              FormatNs(r.duration_ns).c_str(), c.events);
  std::printf("messages posted %" PRIu64 ", sent %" PRIu64
              ", delivered %" PRIu64 " (%" PRIu64 " bytes)\n",
              c.messages_posted, c.messages_sent, c.messages_delivered,
              c.bytes_delivered);
  std::printf("packets sent %" PRIu64 ", dropped %" PRIu64
              "; retransmissions %" PRIu64 ", RNR NAKs %" PRIu64
              ", flushes %" PRIu64 ", EAGAIN %" PRIu64 "\n",
              c.packets_sent, c.packets_dropped, c.retransmissions, c.rnr_naks,
              c.flushes, c.eagain);
  for (const auto& [name, count] : c.errors) {
    std::printf("error completions %s: %" PRIu64 "\n", name.c_str(), count);
  }
  for (const study::LatencyHistogram& h : r.latency) {
    if (h.count == 0) continue;
    std::printf("latency %s: %" PRIu64 " samples, p50 %s, p99 %s, max %s\n",
                h.phase.c_str(), h.count, FormatNs(h.QuantileNs(0.5)).c_str(),
                FormatNs(h.QuantileNs(0.99)).c_str(),
                FormatNs(h.max_ns).c_str());
  }
  if (!args.trace_path.empty())
    std::printf("trace %s\n", args.trace_path.c_str());
  if (!args.pcap_path.empty()) std::printf("pcap %s\n", args.pcap_path.c_str());
  std::printf("result %s\n", r.passed ? "passed" : "FAILED");
  return r.passed ? kExitPassed : kExitFailed;
}

}  // namespace softfab::cli
