// The RoCEv2 wire format of one packet, for captures (sim_pcap.cc): Ethernet
// II, IPv4, UDP to port 4791, the IB transport headers (BTH, then DETH, RETH,
// AETH, ImmDt as the opcode needs, in the spec's order), the payload padded to
// 4 bytes, and the invariant CRC. Pure functions of their arguments; the
// simulator's own packets never take this form (it moves Ev records).
//
// Addresses are derived from the node id n, so that they agree with the GID
// the simulated port reports (internal/address.h, ::ffff:10.x.y.z): IPv4
// 10.(n >> 16 & 0xff).(n >> 8 & 0xff).(n & 0xff), MAC 02:00:0a:xx:yy:zz with
// the same three low bytes (a locally administered unicast address).
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_ROCEV2_FRAME_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_ROCEV2_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softfab::sim::internal {

inline constexpr uint16_t kRoceV2UdpPort = 4791;
inline constexpr size_t kEthBytes = 14;
inline constexpr size_t kIpv4Bytes = 20;
inline constexpr size_t kUdpBytes = 8;
inline constexpr size_t kBthBytes = 12;
inline constexpr size_t kIcrcBytes = 4;

// BTH opcodes (IB spec vol. 1, table 38): RC, and the UD sends.
namespace bth {
inline constexpr uint8_t kSendFirst = 0x00;
inline constexpr uint8_t kSendMiddle = 0x01;
inline constexpr uint8_t kSendLast = 0x02;
inline constexpr uint8_t kSendLastImm = 0x03;
inline constexpr uint8_t kSendOnly = 0x04;
inline constexpr uint8_t kSendOnlyImm = 0x05;
inline constexpr uint8_t kWriteFirst = 0x06;
inline constexpr uint8_t kWriteMiddle = 0x07;
inline constexpr uint8_t kWriteLast = 0x08;
inline constexpr uint8_t kWriteLastImm = 0x09;
inline constexpr uint8_t kWriteOnly = 0x0a;
inline constexpr uint8_t kWriteOnlyImm = 0x0b;
inline constexpr uint8_t kReadRequest = 0x0c;
inline constexpr uint8_t kReadResponseFirst = 0x0d;
inline constexpr uint8_t kReadResponseMiddle = 0x0e;
inline constexpr uint8_t kReadResponseLast = 0x0f;
inline constexpr uint8_t kReadResponseOnly = 0x10;
inline constexpr uint8_t kAcknowledge = 0x11;
inline constexpr uint8_t kUdSendOnly = 0x64;
inline constexpr uint8_t kUdSendOnlyImm = 0x65;
}  // namespace bth

// Everything one frame carries. Which extension headers are present follows
// from `opcode` alone (RoceV2Headers); the fields of absent ones are ignored.
struct RoceV2Packet {
  int32_t src_node = 0;
  int32_t dst_node = 0;
  uint8_t traffic_class = 0;  // the IP header's TOS byte (DSCP << 2 | ECN)
  uint16_t udp_src_port = 0xc000;
  uint8_t opcode = bth::kSendOnly;
  bool solicited = false;  // BTH SE
  bool ack_req = false;    // BTH A
  uint16_t pkey = 0xffff;
  uint32_t dest_qp = 0;  // 24 bits
  uint32_t psn = 0;      // 24 bits
  // DETH
  uint32_t qkey = 0;
  uint32_t src_qp = 0;
  // RETH
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_length = 0;
  // AETH
  uint8_t syndrome = 0;
  uint32_t msn = 0;  // 24 bits
  // ImmDt: the WR's imm_data, which ibverbs (and so transport::SendWr) holds
  // already in network byte order: its bytes go on the wire as they lie in
  // memory, as a real HCA sends them.
  uint32_t imm = 0;
  const uint8_t* payload = nullptr;  // payload_bytes bytes; may be null if 0.
  uint32_t payload_bytes = 0;
  // Writes an ICRC that does not match (the packet was corrupted on the wire).
  bool bad_icrc = false;
};

// The extension headers an opcode carries.
struct RoceV2Headers {
  bool deth = false;
  bool reth = false;
  bool aeth = false;
  bool immdt = false;
};
RoceV2Headers HeadersOf(uint8_t opcode);

// Builds the whole frame (no Ethernet FCS) into `frame`, replacing its
// contents; returns its length.
size_t EncodeRoceV2(const RoceV2Packet& packet, std::vector<uint8_t>* frame);

// The standard CRC-32 (IEEE 802.3, reflected, as zlib's crc32) over `len`
// bytes, continuing from `crc` (0 to start).
uint32_t Crc32(uint32_t crc, const uint8_t* data, size_t len);

// The invariant CRC of a RoCEv2 IPv4 packet: `ip` points at its IPv4 header,
// `len` bytes up to (not including) the ICRC. The CRC-32 over 8 bytes of ones
// (the masked LRH of the IB spec's RoCEv2 annex), then the IP, UDP and BTH
// headers with their variant fields (IP TOS, TTL and checksum, UDP checksum,
// BTH reserved byte after the P_Key) set to ones, then the rest unchanged.
// It is sent least significant byte first, as the Ethernet FCS is.
uint32_t RoceV2Icrc(const uint8_t* ip, size_t len);

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_ROCEV2_FRAME_H_
