// The RoCEv2 frame encoder and the invariant CRC (internal/rocev2_frame.h).
#include <array>
#include <cstdint>
#include <cstring>

#include "backends/sim/internal/rocev2_frame.h"

namespace softfab::sim::internal {

namespace {

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

void Put16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void Put24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
void Put32(uint8_t* p, uint32_t v) {
  Put16(p, v >> 16);
  Put16(p + 2, v);
}

// The node's MAC (6 bytes) and IPv4 address (4 bytes); see the header.
void PutMac(uint8_t* p, int32_t node) {
  p[0] = 0x02;
  p[1] = 0x00;
  p[2] = 10;
  Put24(p + 3, static_cast<uint32_t>(node));
}
void PutIpv4(uint8_t* p, int32_t node) {
  p[0] = 10;
  Put24(p + 1, static_cast<uint32_t>(node));
}

uint16_t Ipv4Checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (size_t i = 0; i < kIpv4Bytes; i += 2) sum += (h[i] << 8) | h[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace

RoceV2Headers HeadersOf(uint8_t opcode) {
  RoceV2Headers h;
  switch (opcode) {
    case bth::kSendLastImm:
    case bth::kSendOnlyImm:
    case bth::kWriteLastImm:
      h.immdt = true;
      break;
    case bth::kWriteFirst:
    case bth::kWriteOnly:
    case bth::kReadRequest:
      h.reth = true;
      break;
    case bth::kWriteOnlyImm:
      h.reth = true;
      h.immdt = true;
      break;
    case bth::kReadResponseFirst:
    case bth::kReadResponseLast:
    case bth::kReadResponseOnly:
    case bth::kAcknowledge:
      h.aeth = true;
      break;
    case bth::kUdSendOnly:
      h.deth = true;
      break;
    case bth::kUdSendOnlyImm:
      h.deth = true;
      h.immdt = true;
      break;
    default:
      break;
  }
  return h;
}

uint32_t Crc32(uint32_t crc, const uint8_t* data, size_t len) {
  crc = ~crc;
  for (size_t i = 0; i < len; ++i)
    crc = kCrcTable[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t RoceV2Icrc(const uint8_t* ip, size_t len) {
  constexpr size_t kMasked = kIpv4Bytes + kUdpBytes + kBthBytes;
  static constexpr uint8_t kOnes[8] = {0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff};
  uint8_t masked[kMasked];
  std::memcpy(masked, ip, kMasked);
  masked[1] = 0xff;                // IP TOS (DSCP, ECN)
  masked[8] = 0xff;                // IP TTL
  masked[10] = masked[11] = 0xff;  // IP header checksum
  uint8_t* udp = masked + kIpv4Bytes;
  udp[6] = udp[7] = 0xff;  // UDP checksum
  uint8_t* bth = udp + kUdpBytes;
  bth[4] = 0xff;  // FECN, BECN and the reserved bits
  uint32_t crc = Crc32(0, kOnes, sizeof(kOnes));
  crc = Crc32(crc, masked, kMasked);
  return Crc32(crc, ip + kMasked, len - kMasked);
}

size_t EncodeRoceV2(const RoceV2Packet& p, std::vector<uint8_t>* frame) {
  const RoceV2Headers h = HeadersOf(p.opcode);
  const size_t ext = (h.deth ? 8 : 0) + (h.reth ? 16 : 0) + (h.aeth ? 4 : 0) +
                     (h.immdt ? 4 : 0);
  const uint32_t pad = (4 - (p.payload_bytes & 3)) & 3;
  const size_t udp_len =
      kUdpBytes + kBthBytes + ext + p.payload_bytes + pad + kIcrcBytes;
  const size_t total = kEthBytes + kIpv4Bytes + udp_len;
  frame->assign(total, 0);
  uint8_t* f = frame->data();

  PutMac(f, p.dst_node);
  PutMac(f + 6, p.src_node);
  Put16(f + 12, 0x0800);  // IPv4

  uint8_t* ip = f + kEthBytes;
  ip[0] = 0x45;  // version 4, 5 words
  ip[1] = p.traffic_class;
  Put16(ip + 2, static_cast<uint32_t>(kIpv4Bytes + udp_len));
  Put16(ip + 6, 0x4000);  // don't fragment
  ip[8] = 64;             // TTL
  ip[9] = 17;             // UDP
  PutIpv4(ip + 12, p.src_node);
  PutIpv4(ip + 16, p.dst_node);
  Put16(ip + 10, Ipv4Checksum(ip));

  uint8_t* udp = ip + kIpv4Bytes;
  Put16(udp, p.udp_src_port);
  Put16(udp + 2, kRoceV2UdpPort);
  Put16(udp + 4, static_cast<uint32_t>(udp_len));
  // UDP checksum 0: none, as RoCEv2 over IPv4 allows.

  uint8_t* b = udp + kUdpBytes;
  b[0] = p.opcode;
  b[1] = static_cast<uint8_t>((p.solicited ? 0x80 : 0) | (pad << 4));  // TVer 0
  Put16(b + 2, p.pkey);
  Put24(b + 5, p.dest_qp);
  b[8] = p.ack_req ? 0x80 : 0;
  Put24(b + 9, p.psn);

  uint8_t* x = b + kBthBytes;
  if (h.deth) {
    Put32(x, p.qkey);
    Put24(x + 5, p.src_qp);
    x += 8;
  }
  if (h.reth) {
    Put32(x, static_cast<uint32_t>(p.va >> 32));
    Put32(x + 4, static_cast<uint32_t>(p.va));
    Put32(x + 8, p.rkey);
    Put32(x + 12, p.dma_length);
    x += 16;
  }
  if (h.aeth) {
    x[0] = p.syndrome;
    Put24(x + 1, p.msn);
    x += 4;
  }
  if (h.immdt) {
    std::memcpy(x, &p.imm, 4);
    x += 4;
  }
  if (p.payload_bytes > 0) std::memcpy(x, p.payload, p.payload_bytes);
  x += p.payload_bytes + pad;

  uint32_t icrc = RoceV2Icrc(ip, static_cast<size_t>(x - ip));
  if (p.bad_icrc) icrc = ~icrc;
  for (int i = 0; i < 4; ++i) x[i] = static_cast<uint8_t>(icrc >> (8 * i));
  return total;
}

}  // namespace softfab::sim::internal
