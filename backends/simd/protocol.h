// The wire protocol between a process's simd backend (client.cc) and the
// fabric daemon (server.cc): one SOCK_SEQPACKET datagram per message, a fixed
// header, a fixed body per operation and a bounded tail (work requests,
// inline bytes, completions, dirty ranges). Both ends run on one host as one
// user, so fields are in host order; the daemon still checks every field it
// reads (Decode*), because a client may be broken or hostile and must harm
// nobody but itself.
//
// Object handles are small numbers the daemon gives out per client; 0 is
// never a handle. Memory never travels: a client shares a memfd with the
// daemon, and messages name ranges of it by offset (see the README's design
// section). After the hello, a node session's messages travel through
// slots of that memfd (mailbox.h) rather than the socket; the socket then
// carries doorbells and tells each side when the other is gone.
#ifndef SOFTFAB_BACKENDS_SIMD_PROTOCOL_H_
#define SOFTFAB_BACKENDS_SIMD_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "transport/transport.h"

namespace softfab::simd {

inline constexpr uint32_t kProtocolVersion = 3;
// The largest message either side sends or accepts (a datagram on the
// socket, or a mailbox slot's contents: each slot is this large).
inline constexpr size_t kMessageBytesMax = 256 * 1024;
// Work requests per post, completions per poll, ranges per wake.
inline constexpr uint32_t kWrsMax = 64;
inline constexpr uint32_t kSgesMax = 16;
inline constexpr uint32_t kWcsMax = 256;
inline constexpr uint32_t kRangesMax = 4096;
inline constexpr uint32_t kInlineBytesMax = 4096;
// The shared window: offsets below it name places in the process's memfd:
// the header page, the mailbox's slots, then shadow memory from
// kShadowStart.
inline constexpr uint64_t kWindowBytes = uint64_t{64} << 30;
inline constexpr uint64_t kHeaderPageBytes = 4096;
// The header page: the virtual clock (8 bytes, the daemon's) at offset 0,
// the mailbox's fields (mailbox.h: each side writes its own) from offset 8,
// a byte at kAsyncEventFlagOffset, nonzero while the node's device may have
// async events queued (the daemon's: Device::AsyncEventPending reads it, so
// the core's frequent look costs no request), then one byte per CQ slot from
// kCqFlagsOffset, nonzero while that CQ may hold completions (the daemon's):
// a poll that finds its CQ's byte zero returns 0 without a request (a CQ
// beyond the slots always asks).
inline constexpr uint64_t kAsyncEventFlagOffset = 48;
inline constexpr uint64_t kCqFlagsOffset = 64;
inline constexpr uint32_t kCqSlots =
    static_cast<uint32_t>(kHeaderPageBytes - kCqFlagsOffset);
// After the header page: the mailbox's request and reply slots (mailbox.h),
// then shadow memory.
inline constexpr uint64_t kRequestArea = kHeaderPageBytes;
inline constexpr uint64_t kReplyArea = kRequestArea + kMessageBytesMax;
inline constexpr uint64_t kShadowStart = kReplyArea + kMessageBytesMax;

enum class Op : uint32_t {
  kHello = 1,  // body Hello, carries the memfd (SCM_RIGHTS)
  kQueryDevice,
  kQueryPort,
  kQueryGid,
  kAllocPd,
  kDeallocPd,
  kRegMr,
  kDeregMr,
  kCreateCq,  // reply c: the CQ's slot in the header page + 1 (0: none)
  kDestroyCq,
  kPollCq,
  kRequestNotify,
  kAckEvents,
  kCreateChannel,
  kDestroyChannel,
  kGetChannelEvent,
  kCreateSrq,
  kModifySrq,
  kQuerySrq,
  kDestroySrq,
  kPostSrqRecv,
  kCreateQp,
  kModifyQp,
  kQueryQp,
  kDestroyQp,
  kPostSend,
  kPostRecv,
  kCreateAh,
  kDestroyAh,
  kGetAsyncEvent,
  kScheduleWakeup,
  kPark,  // wait until virtual time moved and something concerns us;
          // flags 1: do not wait, just take the ranges written so far;
          // flags kParkPolling: an empty poll parks (not a wait);
          // b: the parking thread's id (internal/thread_watch.h)
  // Address sessions (Hello for kAddressSessionNode, no memfd): IP address
  // and port to endpoint name, for fi_getinfo's node / service. a: IPv4
  // address (host order, 0: any), b: port; the name is the tail.
  kBindAddress,    // EADDRINUSE when the address and port are taken
  kLookUpAddress,  // the name as the reply's tail; ECONNREFUSED: none
  kRandom,         // reply a: the node's device's Random()
  kOpsEnd,
  // Daemon to client, while the client is parked.
  kPull = 100,  // copy user memory into shadow range (a, b): then kPullDone
  kPullDone,
};

inline constexpr uint32_t kParkPolling = 2;

// Every message starts with this.
struct Header {
  Op op;
  uint32_t tail_bytes;  // what follows the fixed body
};

// One request body for every operation: the fields each op reads are named
// in client.cc and server.cc; the rest are zero.
struct Request {
  uint32_t handle = 0;  // the object the op is on
  uint32_t handle2 = 0;
  uint32_t handle3 = 0;
  uint32_t count = 0;  // work requests, entries, events
  uint64_t a = 0;
  uint64_t b = 0;
  uint64_t c = 0;
  uint32_t flags = 0;
  uint32_t mask = 0;
  transport::QpAttr qp_attr{};
  transport::AhAttr ah_attr{};
  transport::SrqAttr srq_attr{};
  transport::QpCap qp_cap{};
  uint32_t qp_type = 0;
  int32_t sq_sig_all = 0;
};
static_assert(std::is_trivially_copyable_v<Request>);

struct Reply {
  int32_t status = 0;  // an errno value, 0 on success
  uint32_t handle = 0;
  uint32_t count = 0;
  uint32_t bad_index = 0;  // post: the first refused work request
  uint64_t a = 0;
  uint64_t b = 0;
  uint64_t c = 0;
  uint64_t now_ns = 0;  // the virtual clock when the reply was made
  // The fabric wrote into this process's memory while it was outside (see
  // the server's outside rule): ask for the ranges (kPark with flags 1)
  // before trusting what the reply says completed.
  uint32_t dirty_pending = 0;
  transport::DeviceAttr device_attr{};
  transport::PortAttr port_attr{};
  transport::Gid gid{};
  transport::QpAttr qp_attr{};
  transport::QpCap qp_cap{};
  transport::SrqAttr srq_attr{};
  transport::AsyncEvent event{};
  char message[96] = {};  // the reason, when status != 0
};
static_assert(std::is_trivially_copyable_v<Reply>);

// A work request as it travels: its SGEs follow it; an inline one's bytes
// follow those.
struct WireWr {
  uint64_t wr_id = 0;
  uint32_t opcode = 0;
  uint32_t send_flags = 0;
  uint32_t num_sge = 0;
  uint32_t imm_data = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t ah = 0;  // UD: address handle
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
  uint32_t inline_bytes = 0;
  uint32_t pad = 0;
};
static_assert(std::is_trivially_copyable_v<WireWr>);

// A range of a client's shadow memory the daemon wrote (with a wake) or
// wants filled (kPull).
struct Range {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// The node an address session says hello as: it is no node, has no
// memory, does not take part in time, and may only bind and look up.
inline constexpr int32_t kAddressSessionNode = -2;
inline constexpr size_t kNameBytes = 28;  // SF_NAME_BYTES

struct Hello {
  uint32_t version = kProtocolVersion;
  int32_t node = -1;
  uint64_t window_bytes = 0;  // the memfd's current size
};

// A message being built or read: header, body, tail.
class Message {
 public:
  Message() = default;
  Message(Op op, const void* body, size_t body_bytes) {
    Header h{op, 0};
    bytes_.resize(sizeof h + body_bytes);
    std::memcpy(bytes_.data(), &h, sizeof h);
    if (body_bytes > 0) std::memcpy(bytes_.data() + sizeof h, body, body_bytes);
    body_bytes_ = body_bytes;
  }
  template <typename T>
  void Append(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    AppendBytes(&value, sizeof value);
  }
  void AppendBytes(const void* p, size_t n) {
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    if (n > 0) std::memcpy(bytes_.data() + at, p, n);
    Header h;
    std::memcpy(&h, bytes_.data(), sizeof h);
    h.tail_bytes =
        static_cast<uint32_t>(bytes_.size() - sizeof h - body_bytes_);
    std::memcpy(bytes_.data(), &h, sizeof h);
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& mutable_bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  size_t body_bytes_ = 0;
};

// Reads a received datagram: false (and nothing read) when it is malformed —
// shorter than its header says, a tail beyond the limit, a body of the wrong
// size for `Body`.
template <typename Body>
bool Decode(const uint8_t* data, size_t size, Header* header, Body* body,
            const uint8_t** tail) {
  if (size < sizeof(Header) + sizeof(Body) || size > kMessageBytesMax) {
    return false;
  }
  std::memcpy(header, data, sizeof(Header));
  if (sizeof(Header) + sizeof(Body) + header->tail_bytes != size) return false;
  std::memcpy(body, data + sizeof(Header), sizeof(Body));
  *tail = data + sizeof(Header) + sizeof(Body);
  return true;
}

// A cursor over a tail: each Take checks there is room.
class TailReader {
 public:
  TailReader(const uint8_t* p, size_t n) : p_(p), left_(n) {}
  template <typename T>
  bool Take(T* out) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (left_ < sizeof(T)) return false;
    std::memcpy(out, p_, sizeof(T));
    p_ += sizeof(T);
    left_ -= sizeof(T);
    return true;
  }
  bool TakeBytes(size_t n, const uint8_t** out) {
    if (left_ < n) return false;
    *out = p_;
    p_ += n;
    left_ -= n;
    return true;
  }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

// Says hello on `socket_fd` as `node` in this protocol version, passing
// `memfd` (SCM_RIGHTS; -1: none, as an address session). False when the
// socket refused it (errno says why).
bool SendHello(int socket_fd, int32_t node, int memfd);

// Checks a request's work requests before anything is posted: counts, SGE
// counts and inline sizes within the limits, the tail exactly used up. The
// daemon decodes with this; the fuzz target drives it.
bool CheckWorkRequests(const Request& request, const uint8_t* tail,
                       size_t tail_bytes, bool send, std::string* why);

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_PROTOCOL_H_
