// What the endpoint's source files share (private to core/): the constants of
// its QPs, how it names its work requests (wr_id), and small helpers for iov
// lists, posting receives, address handles, error entries and slot pools.
// Included only by core/*.cc; nothing outside core/ sees it.
#ifndef SOFTFAB_CORE_INTERNAL_ENDPOINT_COMMON_H_
#define SOFTFAB_CORE_INTERNAL_ENDPOINT_COMMON_H_

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/completion_queue.h"
#include "core/internal/slot_pool.h"
#include "core/prov_errno.h"
#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

inline constexpr uint32_t kQkey = 0x50F7FAB;
inline constexpr uint8_t kPort = 1;

// wr_id layout: kind in the top byte, then (for work requests on a peer's RC
// send queue) the 24-bit post sequence of that queue (Endpoint::Sequenced:
// it makes every outstanding wr_id of one queue unique), then a 32-bit index.
enum WrKind : uint64_t {
  kWrTx = 1,
  kWrRxBounce = 2,
  kWrCmSend = 3,
  kWrCmRecv = 4,
  kWrCredit = 5,
  kWrAck = 6,
  kWrRead = 7,
  kWrDgramRecv = 8,
  // A small inject sent inline with no tx slot of its own (send.cc,
  // PostInject): its index holds kInjectHoldsEntry and kInjectTagged.
  kWrInject = 9,
};
inline uint64_t WrId(WrKind kind, uint64_t index) {
  return (uint64_t{kind} << 56) | index;
}
// kWrInject's index: the inject holds a CQ reservation (transmit level), and
// it was tagged (its error entry says which).
inline constexpr uint64_t kInjectHoldsEntry = 1;
inline constexpr uint64_t kInjectTagged = 2;
inline uint64_t KindOf(uint64_t wr_id) { return wr_id >> 56; }
inline uint64_t IndexOf(uint64_t wr_id) { return wr_id & 0xffffffffu; }

inline size_t IovBytes(const struct iovec* iov, size_t count) {
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += iov[i].iov_len;
  return total;
}

// Copies `len` bytes of `src` into the iov list starting at byte `offset`;
// returns the bytes copied (stops at the end of the list).
inline size_t ScatterInto(const struct iovec* iov, size_t count, size_t offset,
                          const uint8_t* src, size_t len) {
  size_t copied = 0;
  for (size_t i = 0; i < count && copied < len; ++i) {
    if (offset >= iov[i].iov_len) {
      offset -= iov[i].iov_len;
      continue;
    }
    const size_t n = std::min(iov[i].iov_len - offset, len - copied);
    std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + offset, src + copied,
                n);
    copied += n;
    offset = 0;
  }
  return copied;
}

// Posts one receive of `len` bytes at `addr` (registered under `lkey`) to a
// QP or an SRQ; both take the same work request.
template <typename Queue>
Status PostOneRecv(Queue* queue, uint64_t wr_id, const void* addr, size_t len,
                   uint32_t lkey) {
  transport::Sge sge{reinterpret_cast<uint64_t>(addr),
                     static_cast<uint32_t>(len), lkey};
  transport::RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const transport::RecvWr* bad = nullptr;
  return queue->PostRecv(&wr, &bad);
}

// Whether a path from a port with `link_layer` and GID `local_gid` to the
// endpoint named `remote` needs a GRH. RoCE always routes by GID. InfiniBand
// routes by LID inside a subnet, where a GRH only adds 40 bytes to every
// packet (half again an 8-byte message's wire bytes); it needs one toward
// another subnet (a GID prefix not ours) or a peer without a LID.
inline bool NeedsGrh(uint8_t link_layer, const uint8_t (&local_gid)[16],
                     const wire::Name& remote) {
  if (link_layer != transport::kLinkLayerInfiniBand) return true;
  return remote.lid == 0 || std::memcmp(local_gid, remote.gid, 8) != 0;
}

// The address of an endpoint named `name` (with a GRH when `grh`), in the
// class of service the endpoint's traffic travels in: the GRH's traffic
// class (on RoCEv2 the IP header's TOS byte: DSCP << 2 | ECN) and the service
// level (on RoCE the device maps it to the Ethernet priority).
inline transport::AhAttr AhAttrFor(const wire::Name& name, bool grh,
                                   uint8_t traffic_class,
                                   uint8_t service_level) {
  transport::AhAttr ah;
  ah.is_global = grh ? 1 : 0;
  if (grh) {
    std::memcpy(ah.grh.dgid.raw, name.gid, 16);
    ah.grh.hop_limit = 64;
    ah.grh.traffic_class = traffic_class;
  }
  ah.sl = service_level;
  ah.dlid = name.lid;
  ah.port_num = kPort;
  return ah;
}

// The error entry for an operation whose success entry would have been `e`.
inline CqErrEntry ErrorEntry(const CqEntry& e, int err, size_t olen,
                             int prov_errno = 0) {
  CqErrEntry x;
  x.op_context = e.op_context;
  x.flags = e.flags;
  x.len = e.len;
  x.buf = e.buf;
  x.data = e.data;
  x.tag = e.tag;
  x.olen = olen;
  x.err = err;
  x.prov_errno = prov_errno;
  x.src_addr = e.src_addr;
  return x;
}

using ::softfab::internal::TakeSlot;

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_INTERNAL_ENDPOINT_COMMON_H_
