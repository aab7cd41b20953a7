// Test-only reference for RoCEv2 frames (tests of internal/rocev2_frame.h and
// tests/pcap): the ICRC computed straight from its definition with a
// bit-at-a-time CRC-32, independent of the encoder's table-driven one, and the
// ICRC a frame carries.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_ROCEV2_REFERENCE_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_ROCEV2_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softfab::sim::rocev2_reference {

// The ICRC as sent: the frame's last 4 bytes, least significant first.
inline uint32_t WireIcrc(const std::vector<uint8_t>& frame) {
  const size_t n = frame.size();
  return frame[n - 4] | (frame[n - 3] << 8) | (frame[n - 2] << 16) |
         (static_cast<uint32_t>(frame[n - 1]) << 24);
}

// The RoCEv2 annex's ICRC of an Ethernet/IPv4/UDP frame ending in its ICRC:
// the CRC-32 of 8 bytes of ones, then the IPv4 packet up to the ICRC with the
// variant fields (IP TOS, TTL, checksum; UDP checksum; the BTH byte after the
// P_Key) set to ones.
inline uint32_t ExpectedIcrc(const std::vector<uint8_t>& frame) {
  constexpr size_t kEth = 14, kIp = 8, kUdp = kIp + 20, kBth = kUdp + 8;
  std::vector<uint8_t> m(8, 0xff);
  m.insert(m.end(), frame.begin() + kEth, frame.end() - 4);
  m[kIp + 1] = m[kIp + 8] = m[kIp + 10] = m[kIp + 11] = 0xff;
  m[kUdp + 6] = m[kUdp + 7] = 0xff;
  m[kBth + 4] = 0xff;
  uint32_t c = 0xffffffffu;
  for (uint8_t b : m) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return ~c;
}

}  // namespace softfab::sim::rocev2_reference

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_ROCEV2_REFERENCE_H_
