// The fabric daemon's request handling (backends/simd) against a hostile or
// broken process: the input is a sequence of datagrams as a client would send
// them after its hello, each decoded (protocol.h) and served on a node of a
// real simulated fabric (ServeRequest), with a shadow window of its own. Any
// byte sequence must either be served or refused as malformed (the daemon then
// drops that client): no crash, no read or write outside the window, and the
// fabric still runs its events afterwards.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "backends/simd/internal/session.h"
#include "backends/simd/protocol.h"
#include "fuzz/fuzz_check.h"

namespace {

using softfab::simd::Header;
using softfab::simd::Message;
using softfab::simd::Request;
using softfab::simd::internal::Session;

class OneNodeDaemon final : public softfab::simd::internal::Sessions {
 public:
  OneNodeDaemon() {
    softfab::sim::SimConfig c;
    c.nodes = 2;
    c.shared_by_processes = true;
    c.observer = this;
    fabric_ = softfab::sim::CreateSimFabric(c);
    fabric_->HoldDoorbells(true);
  }
  softfab::sim::SimFabric& fabric() override { return *fabric_; }
  Session* SessionOfNode(int32_t node) override {
    return node == 0 ? session : nullptr;
  }
  Session* session = nullptr;

 private:
  std::unique_ptr<softfab::sim::SimFabric> fabric_;
};

// The window the "process" shares: small, so registrations beyond it are
// refused by the daemon's range checks, never touched.
constexpr size_t kWindow = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  OneNodeDaemon daemon;
  std::vector<uint8_t> window(kWindow);
  Session s;
  s.node = 0;
  s.device = daemon.fabric().device(0);
  s.window = window.data();
  daemon.session = &s;
  // Datagrams: a 16-bit length, then that many bytes.
  size_t at = 0;
  for (int n = 0; n < 64 && at + 2 <= size; ++n) {
    const size_t len =
        std::min<size_t>(data[at] | (data[at + 1] << 8), size - at - 2);
    const uint8_t* msg = data + at + 2;
    at += 2 + len;
    Header h;
    Request req;
    const uint8_t* tail = nullptr;
    if (!softfab::simd::Decode(msg, len, &h, &req, &tail)) continue;
    if (h.op == softfab::simd::Op::kHello || h.op == softfab::simd::Op::kPark) {
      continue;  // the session loop's, not ServeRequest's
    }
    // The daemon bounds shadow ranges by its memfd's size (the session's
    // memfd; this one has none, so the whole window); here the window is
    // smaller, so keep registrations inside it as the real check would.
    if (h.op == softfab::simd::Op::kRegMr &&
        (req.c > kWindow ||
         req.b > kWindow - std::min<uint64_t>(req.c, kWindow))) {
      continue;
    }
    Message reply;
    std::string why;
    if (!softfab::simd::internal::ServeRequest(daemon, &s, h.op, req, tail,
                                               h.tail_bytes, &reply, &why)) {
      FUZZ_CHECK(!why.empty());  // a refusal names its reason
      break;                     // the daemon drops the client
    }
    FUZZ_CHECK(reply.bytes().size() >=
               sizeof(Header) + sizeof(softfab::simd::Reply));
  }
  // The fabric keeps working after whatever the client did.
  daemon.fabric().HoldDoorbells(false);
  daemon.fabric().RunUntilIdle(1u << 16);
  return 0;
}
