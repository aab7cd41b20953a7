// What every part of the simulated HCA shares: the transport names it
// implements, fixed numbers of the model (QP number base, header sizes, vendor
// error codes), 24-bit PSN arithmetic, and forward declarations of the objects
// (one header each in this folder).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_COMMON_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_COMMON_H_

#include <cstddef>
#include <cstdint>

#include "transport/transport.h"

namespace softfab::sim::internal {

// The transport interface (transport/transport.h) this HCA implements.
using transport::AddressHandle;
using transport::AhAttr;
using transport::AsyncEvent;
using transport::AsyncEventType;
using transport::CompletionChannel;
using transport::CompletionQueue;
using transport::DeviceAttr;
using transport::Gid;
using transport::MemoryRegion;
using transport::Mtu;
using transport::PortAttr;
using transport::PortState;
using transport::ProtectionDomain;
using transport::QpAttr;
using transport::QpCap;
using transport::QpInitAttr;
using transport::QpState;
using transport::QpType;
using transport::QueuePair;
using transport::RecvWr;
using transport::SendWr;
using transport::Sge;
using transport::SharedReceiveQueue;
using transport::SrqAttr;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WorkCompletion;
using transport::WrOpcode;

constexpr uint32_t kQpnBase = 0x100;
constexpr uint32_t kPsnMask = 0xffffff;
constexpr uint32_t kGrhBytes = 40;
constexpr uint32_t kHeaderBytes =
    58;  // Eth + IPv4 + UDP + BTH + ICRC + FCS, roughly.
constexpr uint64_t kSgeZeroLength = 1ull << 31;
constexpr size_t kAsyncEventsMax = 4096;
constexpr uint8_t kGrhPoison = 0xa5;

// Vendor error numbers in error completions (arbitrary but fixed; 0 = none).
constexpr uint32_t kVendorFlush = 0xf9;
constexpr uint32_t kVendorLocal = 0x51;
constexpr uint32_t kVendorRemote = 0x52;
constexpr uint32_t kVendorRetry = 0x81;
constexpr uint32_t kVendorRnr = 0x82;

inline int32_t PsnDiff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a - b) << 8) >> 8;
}
inline uint32_t PsnAdd(uint32_t a, uint32_t n) { return (a + n) & kPsnMask; }
// The least power of two >= n (n >= 1): ring storage, so that slots are found
// with a mask instead of a division.
inline uint64_t RingSize(uint64_t n) {
  uint64_t r = 1;
  while (r < n) r <<= 1;
  return r;
}
inline uint64_t SgeLength(const Sge& s) {
  return s.length == 0 ? kSgeZeroLength : s.length;
}

class FabricImpl;
class DeviceImpl;
class PdImpl;
class CqImpl;
class ChannelImpl;
struct Ev;
class SrqImpl;
class QpImpl;

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_COMMON_H_
