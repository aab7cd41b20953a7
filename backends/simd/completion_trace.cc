// The per-process completion trace; see completion_trace.h.
#include "backends/simd/completion_trace.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace softfab::simd {

void CompletionTrace::Record(int32_t node, uint64_t now_ns, uint32_t cq,
                             const transport::WorkCompletion* wcs, int n) {
  if (node < 0 || static_cast<size_t>(node) >= lines_.size()) return;
  std::string& out = lines_[static_cast<size_t>(node)];
  for (int i = 0; i < n; ++i) {
    const transport::WorkCompletion& wc = wcs[i];
    char line[160];
    const int len =
        std::snprintf(line, sizeof line,
                      "%" PRIu64 " cq %" PRIu32 " qp %" PRIu32 " op %" PRIu32
                      " status %" PRIu32 " len %" PRIu32 " imm %08" PRIx32
                      " src_qp %" PRIu32 " flags %" PRIx32 "\n",
                      now_ns, cq, wc.qp_num, static_cast<uint32_t>(wc.opcode),
                      static_cast<uint32_t>(wc.status), wc.byte_len,
                      wc.imm_data, wc.src_qp, wc.wc_flags);
    out.append(line, static_cast<size_t>(len));
    ++counts_[static_cast<size_t>(node)];
  }
}

Status CompletionTrace::Write(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status(errno, "cannot write the completion trace");
  std::fprintf(f,
               "# softfab run: completions each node's polls took, by node; "
               "virtual ns, CQ, QP, opcode, status, length, immediate, "
               "source QP, flags (ibv_wc)\n");
  for (size_t node = 0; node < lines_.size(); ++node) {
    std::fprintf(f, "node %zu: %" PRIu64 " completions\n", node, counts_[node]);
    std::fwrite(lines_[node].data(), 1, lines_[node].size(), f);
  }
  const bool failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || failed) {
    return Status(EIO, "cannot write the completion trace");
  }
  return Status::Ok();
}

}  // namespace softfab::simd
