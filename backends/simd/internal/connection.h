// A process's connection to the fabric daemon (client.cc): the socket, the
// shared window (a memfd: a header page with the virtual clock, the mailbox's
// fields and the CQ bytes; the mailbox's two slots; then the shadows of
// registered memory) and the registrations, so posts copy their sources in
// and wakes copy what the fabric wrote out.
#ifndef SOFTFAB_BACKENDS_SIMD_INTERNAL_CONNECTION_H_
#define SOFTFAB_BACKENDS_SIMD_INTERNAL_CONNECTION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/simd/mailbox.h"
#include "backends/simd/protocol.h"
#include "backends/simd/spin_governor.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::simd::internal {

// A registration as the process made it, and its shadow in the window.
struct ShadowMr {
  uint64_t user_addr = 0;
  uint64_t length = 0;
  uint64_t shadow = 0;  // offset in the window
  uint32_t lkey = 0;
};

// How long a caller looks for its reply before it sleeps (yielding the
// core while it looks, so a process with work runs first): most calls are
// answered within microseconds; a park within one advance when the advance
// concerns this process. A sleep and its wake-up cost tens of microseconds.
// (bench/simd/advance_cost.sh on 2 cores: 100 us for a park gave ~25,000
// round trips/s, 15 us ~12,000, 500 us no more than 100 us.)
inline constexpr long kSpinNs = 50'000;
inline constexpr long kParkSpinNs = 100'000;

class Connection {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects, shares the window and says hello as `node`.
  Status Open(const std::string& path, int node, std::string* why);
  // One request and its reply (serving the daemon's pulls meanwhile). A
  // reply with an errno is that error, its reason kept until the next.
  // EIO once the daemon is gone, for this and every later call.
  Status Call(Op op, const Request& req, const std::vector<uint8_t>* tail,
              Reply* reply, std::vector<uint8_t>* reply_tail = nullptr);

  // Shadow space for a registration of `len` bytes, and its release.
  StatusOr<uint64_t> AllocShadow(uint64_t len);
  void FreeShadow(uint64_t at, uint64_t len);
  void AddMr(const ShadowMr& mr);
  void RemoveMr(uint32_t lkey);
  // Sources of a post: the bytes of each SGE inside its registration go to
  // its shadow (an SGE the fabric will refuse is skipped).
  void CopySgesToShadow(const transport::Sge* sges, int n);
  // What the fabric wrote into shadow range [at, at + len) goes to the
  // process's memory (a wake); what it will read comes from it (a pull).
  void CopyFromShadow(uint64_t at, uint64_t len);
  void CopyToShadow(uint64_t at, uint64_t len);

  // The virtual clock, as the daemon last wrote it.
  uint64_t NowNs() const;
  // The header-page byte of CQ slot `slot_plus_one - 1` (kCreateCq's reply
  // c), nonzero while the CQ may hold completions; null for no slot.
  const uint8_t* CqFlag(uint64_t slot_plus_one) const {
    return slot_plus_one == 0 || slot_plus_one > kCqSlots
               ? nullptr
               : window_ + kCqFlagsOffset + (slot_plus_one - 1);
  }
  // The header-page byte nonzero while the node's device may have async
  // events queued.
  const uint8_t* AsyncEventFlag() const {
    return window_ + kAsyncEventFlagOffset;
  }
  bool broken() const { return broken_; }
  // Where a wake's ranges and channel signals go (the backend).
  using WakeHandler = void (*)(void* self, const Reply& r,
                               const std::vector<uint8_t>& tail);
  void SetWakeHandler(WakeHandler fn, void* self) {
    wake_fn_ = fn;
    wake_self_ = self;
  }

 private:
  // Places a request in the mailbox (ringing a sleeping daemon). False when
  // the daemon is gone.
  bool Post(const Message& m);
  // The next reply into buf_: its size, or -1 when the daemon is gone.
  // Looks without sleeping for `spin_ns` first (a sleep and a wake-up cost
  // more than most calls take), unless spin_ finds the cores contended.
  long AwaitReply(long spin_ns);
  bool Receive(Reply* reply, std::vector<uint8_t>* tail, long spin_ns);
  template <typename Fn>
  void ForShadowRange(uint64_t at, uint64_t len, Fn fn);

  int fd_ = -1;
  int memfd_ = -1;
  uint8_t* window_ = nullptr;
  uint64_t file_bytes_ = 0;
  uint64_t shadow_end_ = 0;
  bool broken_ = false;
  std::map<uint64_t, uint64_t> free_;  // shadow offset -> length
  std::map<uint32_t, ShadowMr> by_lkey_;
  std::map<uint64_t, uint32_t> by_shadow_;  // shadow offset -> lkey
  std::vector<uint8_t> buf_;
  std::unique_ptr<Mailbox> mailbox_;
  uint32_t request_seq_ = 0;  // the last request placed
  uint32_t reply_seen_ = 0;   // the last reply taken
  SpinGovernor spin_;         // whether AwaitReply may spin
  std::string last_error_;
  WakeHandler wake_fn_ = nullptr;
  void* wake_self_ = nullptr;
  bool syncing_ = false;
};

}  // namespace softfab::simd::internal

#endif  // SOFTFAB_BACKENDS_SIMD_INTERNAL_CONNECTION_H_
