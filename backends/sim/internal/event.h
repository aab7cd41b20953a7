// The one event shape of the simulator's queue (packets and timers alike), the
// packet opcodes and ACK syndromes, and the packet flags.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_H_

#include <cstdint>

namespace softfab::sim::internal {

enum class EvKind : uint8_t {
  kPacket,
  kAckTimer,
  kRnrTimer,
  kUdSendDone,
  kTimedFault,
  kWakeup,  // Nothing happens; the clock reaches its time (Device timers).
};

enum class PktOp : uint8_t {
  kSend,
  kWrite,
  kReadReq,
  kReadResp,
  kAck,
  kUdSend,
};

enum class Syndrome : uint8_t {
  kAck,
  kNakSeq,
  kNakRnr,
  kNakInvReq,
  kNakRemAccess,
  kNakRemOp,
};

constexpr uint8_t kPktFirst = 1;
constexpr uint8_t kPktLast = 2;
constexpr uint8_t kPktCorrupt = 4;
constexpr uint8_t kPktImm = 8;
// The BTH's SE bit: set on the last packet of a SEND or RDMA WRITE with
// immediate (and on a UD send) whose WR carried kSendSolicited. A flag bit
// like the others, so the digest only changes for runs that send solicited.
constexpr uint8_t kPktSolicited = 16;

struct Ev {
  EvKind kind;
  PktOp op;
  uint8_t flags;
  uint8_t syndrome;
  int32_t src_node;
  int32_t dst_node;
  uint32_t src_qpn;
  uint32_t dst_qpn;
  uint32_t psn;
  uint32_t length;
  uint32_t aux;  // read: packet count; RNR NAK: timer code; UD: pool slot;
                 // fault: index.
  uint64_t offset;
  uint64_t wqe_seq;
};

// The packet's SE bit.
inline bool Solicited(const Ev& ev) { return (ev.flags & kPktSolicited) != 0; }

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_H_
