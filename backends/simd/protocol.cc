// The protocol's checks shared by the daemon and the fuzz target (see
// protocol.h).
#include "backends/simd/protocol.h"

#include <string>

namespace softfab::simd {

bool CheckWorkRequests(const Request& request, const uint8_t* tail,
                       size_t tail_bytes, bool send, std::string* why) {
  if (request.count > kWrsMax) {
    *why = "posted more than " + std::to_string(kWrsMax) + " work requests";
    return false;
  }
  TailReader in(tail, tail_bytes);
  for (uint32_t i = 0; i < request.count; ++i) {
    WireWr w;
    if (!in.Take(&w) || w.num_sge > kSgesMax ||
        w.inline_bytes > kInlineBytesMax || (!send && w.inline_bytes != 0)) {
      *why = "sent a malformed work request";
      return false;
    }
    const uint8_t* skip = nullptr;
    if (!in.TakeBytes(sizeof(transport::Sge) * w.num_sge, &skip) ||
        !in.TakeBytes(w.inline_bytes, &skip)) {
      *why = "sent a work request longer than its message";
      return false;
    }
  }
  if (in.left() != 0) {
    *why = "sent bytes after its work requests";
    return false;
  }
  return true;
}

}  // namespace softfab::simd
