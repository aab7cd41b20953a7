// The fabric daemon's per-process completion trace (`softfab run --trace`):
// every work completion a process's polls took from its node's CQs, with the
// virtual time of the poll, kept per node and written, node by node, when
// the run ends. Two runs of the same programs with the same seed and
// scenario give the same file: which process polled first in wall time
// changes the order of lines across nodes, never within one, and the file
// is grouped by node. A completion's wr_id is left out: it is the process's
// own value (often an address, which differs from run to run).
#ifndef SOFTFAB_BACKENDS_SIMD_COMPLETION_TRACE_H_
#define SOFTFAB_BACKENDS_SIMD_COMPLETION_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::simd {

class CompletionTrace {
 public:
  explicit CompletionTrace(int32_t nodes)
      : lines_(static_cast<size_t>(nodes)) {}

  // Completions `wcs[0..n)` taken by node `node`'s poll of its CQ `cq`
  // (the process's handle) at virtual time `now_ns`.
  void Record(int32_t node, uint64_t now_ns, uint32_t cq,
              const transport::WorkCompletion* wcs, int n);

  // Writes "node N: K completions" and then one line per completion, for
  // each node in order. Held in memory until then: about 70 bytes per
  // completion.
  [[nodiscard]] Status Write(const std::string& path) const;

 private:
  std::vector<std::string> lines_;  // per node
  std::vector<uint64_t> counts_ = std::vector<uint64_t>(lines_.size());
};

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_COMPLETION_TRACE_H_
