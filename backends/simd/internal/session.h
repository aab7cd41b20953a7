// One connected process of the fabric daemon (server.cc) and what the
// request handlers (server_requests.cc) need of the daemon: the objects the
// process created on its node, its memory window and its keys, so work
// requests naming its addresses and keys can be translated into shadow
// addresses the simulator reads and writes.
#ifndef SOFTFAB_BACKENDS_SIMD_INTERNAL_SESSION_H_
#define SOFTFAB_BACKENDS_SIMD_INTERNAL_SESSION_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "backends/simd/protocol.h"
#include "transport/transport.h"

namespace softfab::simd::internal {

namespace tp = ::softfab::transport;

// A registration: the process's range [user_addr, user_addr + length) and
// its shadow in the window, over which the simulator's MR lies.
struct SessionMr {
  uint64_t user_addr = 0;
  uint64_t length = 0;
  uint8_t* shadow = nullptr;
  tp::MemoryRegion* mr = nullptr;
};

struct SessionQp {
  tp::QueuePair* qp = nullptr;
  int32_t remote_node = -1;  // RC: where its RDMA keys are looked up
};

struct Session {
  int fd = -1;
  unsigned long fd_inode = 0;  // the socket's inode (outside_processes.h)
  pid_t pid = 0;
  pid_t parent = 0;  // its launcher (mpirun, orted, softfab run)
  // An address session (address_book.h): no node, no memory, not in time.
  bool address_only = false;
  int32_t node = -1;
  tp::Device* device = nullptr;
  uint8_t* window = nullptr;  // the process's memfd, kWindowBytes mapped
  int memfd = -1;             // sealed against shrinking (-1: no file)
  // Parking (server.cc): a kPark waits while `parked`; `concerned` says
  // something happened for this node since its last wake; `dirty` is what
  // the fabric wrote into its memory since.
  bool parked = false;
  bool concerned = false;
  bool idle = false;
  bool named = false;  // the watchdog named it for the current stall
  uint64_t deadline_ns = UINT64_MAX;
  // The park's thread, and whether an empty poll made it (rather than a
  // wait): see internal/thread_watch.h.
  pid_t parked_tid = 0;
  bool parked_polling = false;
  uint64_t last_heard_ms = 0;
  uint64_t asleep_since_ms = 0;    // first seen asleep outside (0: not)
  uint64_t outside_looked_ms = 0;  // when /proc was last read for it
  std::vector<Range> dirty;
  // The mailbox (mailbox.h): the last request taken, the last reply placed.
  uint32_t request_seen = 0;
  uint32_t reply_seq = 0;
  // Objects by handle (handles count up from 1, per session).
  uint32_t next_handle = 1;
  std::map<uint32_t, tp::ProtectionDomain*> pds;
  std::map<uint32_t, SessionMr> mrs;
  std::map<uint32_t, tp::CompletionQueue*> cqs;
  // Each CQ's slot in the header page (protocol.h: kCqFlagsOffset), and
  // which slots are taken.
  std::map<const tp::CompletionQueue*, uint32_t> cq_slots;
  std::vector<bool> cq_slot_taken;
  std::map<uint32_t, tp::CompletionChannel*> channels;
  std::map<uint32_t, tp::SharedReceiveQueue*> srqs;
  std::map<uint32_t, SessionQp> qps;
  std::map<uint32_t, tp::AddressHandle*> ahs;
  // Keys to registrations (handles into `mrs`).
  std::map<uint32_t, uint32_t> mr_by_lkey;
  std::map<uint32_t, uint32_t> mr_by_rkey;
};

// Sets the header-page byte saying whether `cq` of `s` may hold completions
// (protocol.h); nothing for a CQ without a slot.
inline void SetCqFlag(Session* s, const tp::CompletionQueue* cq, bool maybe) {
  if (s->window == nullptr) return;
  auto it = s->cq_slots.find(cq);
  if (it == s->cq_slots.end()) return;
  __atomic_store_n(s->window + kCqFlagsOffset + it->second,
                   static_cast<uint8_t>(maybe ? 1 : 0), __ATOMIC_RELEASE);
}

// Sets the header-page byte saying whether the device of `s`'s node may have
// async events queued (protocol.h).
inline void SetAsyncEventFlag(Session* s, bool maybe) {
  if (s == nullptr || s->window == nullptr) return;
  __atomic_store_n(s->window + kAsyncEventFlagOffset,
                   static_cast<uint8_t>(maybe ? 1 : 0), __ATOMIC_RELEASE);
}

// What the request handlers see of the daemon.
class Sessions : public sim::SimObserver {
 public:
  virtual sim::SimFabric& fabric() = 0;
  virtual Session* SessionOfNode(int32_t node) = 0;
  // Completions a poll of `s`'s CQ `cq` took (for the completion trace).
  virtual void TookCompletions(const Session& s, uint32_t cq,
                               const tp::WorkCompletion* wcs, int n) {
    (void)s, (void)cq, (void)wcs, (void)n;
  }

 protected:
  ~Sessions() override = default;
};

// Serves one request of `s` (every op but kHello and kPark) into `reply`.
// False when the request is malformed: the session is then dropped, `why`
// says why. A well-formed request the fabric refuses is a reply with its
// errno, as the transport call would return it.
bool ServeRequest(Sessions& daemon, Session* s, Op op, const Request& req,
                  const uint8_t* tail, size_t tail_bytes, Message* reply,
                  std::string* why);

// A CQ's slot in the header page of `s`, taken at creation (flag set: its
// first poll asks the daemon) and given back at destruction. Returns slot +
// 1, or 0 when every slot is taken (the CQ then always asks).
uint32_t TakeCqSlot(Session* s, const tp::CompletionQueue* cq);
void GiveBackCqSlot(Session* s, const tp::CompletionQueue* cq);

// A node's channels with events waiting (their handles), for a wake.
std::vector<uint32_t> ChannelsWithEvents(const Session* s);

}  // namespace softfab::simd::internal

#endif  // SOFTFAB_BACKENDS_SIMD_INTERNAL_SESSION_H_
