// Tests of the RoCEv2 frame encoder: the CRC-32 against its published check
// value, header layout and lengths per opcode, and the ICRC recomputed by a
// bit-at-a-time CRC over the masked fields, as the RoCEv2 annex defines it.
#include "backends/sim/internal/rocev2_frame.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/sim/internal/rocev2_reference.h"
#include "gtest/gtest.h"

namespace softfab::sim::internal {
namespace {

using rocev2_reference::ExpectedIcrc;
using rocev2_reference::WireIcrc;

uint32_t Get16(const std::vector<uint8_t>& f, size_t at) {
  return (f[at] << 8) | f[at + 1];
}
uint32_t Get24(const std::vector<uint8_t>& f, size_t at) {
  return (f[at] << 16) | (f[at + 1] << 8) | f[at + 2];
}
uint32_t Get32(const std::vector<uint8_t>& f, size_t at) {
  return (Get16(f, at) << 16) | Get16(f, at + 2);
}

TEST(Crc32, CheckValue) {
  const uint8_t digits[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(Crc32(0, digits, sizeof(digits)), 0xcbf43926u);
  // Continuing a CRC equals computing it over the concatenation.
  EXPECT_EQ(Crc32(Crc32(0, digits, 4), digits + 4, 5), 0xcbf43926u);
}

TEST(RoceV2Frame, SendOnlyLayout) {
  const uint8_t data[5] = {1, 2, 3, 4, 5};
  RoceV2Packet p;
  p.src_node = 1;
  p.dst_node = 0x020304;
  p.udp_src_port = 0xc123;
  p.opcode = bth::kSendOnly;
  p.solicited = true;
  p.ack_req = true;
  p.dest_qp = 0x000101;
  p.psn = 0xabcdef;
  p.payload = data;
  p.payload_bytes = sizeof(data);
  std::vector<uint8_t> f;
  const size_t n = EncodeRoceV2(p, &f);
  // 14 + 20 + 8 + 12 (BTH) + 5 + 3 (pad) + 4 (ICRC)
  ASSERT_EQ(n, 66u);
  ASSERT_EQ(f.size(), n);
  // Ethernet: MACs from node ids, IPv4 ethertype.
  EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 6),
            (std::vector<uint8_t>{0x02, 0x00, 10, 0x02, 0x03, 0x04}));
  EXPECT_EQ(std::vector<uint8_t>(f.begin() + 6, f.begin() + 12),
            (std::vector<uint8_t>{0x02, 0x00, 10, 0, 0, 1}));
  EXPECT_EQ(Get16(f, 12), 0x0800u);
  // IPv4: length, UDP, addresses, a checksum that sums to 0xffff.
  const size_t ip = kEthBytes;
  EXPECT_EQ(f[ip], 0x45);
  EXPECT_EQ(Get16(f, ip + 2), n - kEthBytes);
  EXPECT_EQ(f[ip + 9], 17);
  EXPECT_EQ(Get32(f, ip + 12), 0x0a000001u);
  EXPECT_EQ(Get32(f, ip + 16), 0x0a020304u);
  uint32_t sum = 0;
  for (size_t i = 0; i < kIpv4Bytes; i += 2) sum += Get16(f, ip + i);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu);
  // UDP to 4791.
  const size_t udp = ip + kIpv4Bytes;
  EXPECT_EQ(Get16(f, udp), 0xc123u);
  EXPECT_EQ(Get16(f, udp + 2), 4791u);
  EXPECT_EQ(Get16(f, udp + 4), n - kEthBytes - kIpv4Bytes);
  // BTH.
  const size_t b = udp + kUdpBytes;
  EXPECT_EQ(f[b], bth::kSendOnly);
  EXPECT_EQ(f[b + 1], 0x80 | (3 << 4));  // SE, pad count 3, TVer 0
  EXPECT_EQ(Get16(f, b + 2), 0xffffu);
  EXPECT_EQ(Get24(f, b + 5), 0x000101u);
  EXPECT_EQ(f[b + 8], 0x80);
  EXPECT_EQ(Get24(f, b + 9), 0xabcdefu);
  EXPECT_EQ(f[b + 12], 1);
  EXPECT_EQ(f[b + 16], 5);
  EXPECT_EQ(f[b + 17], 0);  // pad
  EXPECT_EQ(WireIcrc(f), ExpectedIcrc(f));
}

TEST(RoceV2Frame, ExtensionHeadersPerOpcode) {
  struct Case {
    uint8_t opcode;
    size_t ext_bytes;
  };
  const Case cases[] = {
      {bth::kSendFirst, 0},          {bth::kSendMiddle, 0},
      {bth::kSendLast, 0},           {bth::kSendLastImm, 4},
      {bth::kSendOnly, 0},           {bth::kSendOnlyImm, 4},
      {bth::kWriteFirst, 16},        {bth::kWriteMiddle, 0},
      {bth::kWriteLast, 0},          {bth::kWriteLastImm, 4},
      {bth::kWriteOnly, 16},         {bth::kWriteOnlyImm, 20},
      {bth::kReadRequest, 16},       {bth::kReadResponseFirst, 4},
      {bth::kReadResponseMiddle, 0}, {bth::kReadResponseLast, 4},
      {bth::kReadResponseOnly, 4},   {bth::kAcknowledge, 4},
      {bth::kUdSendOnly, 8},         {bth::kUdSendOnlyImm, 12},
  };
  for (const Case& c : cases) {
    RoceV2Packet p;
    p.opcode = c.opcode;
    std::vector<uint8_t> f;
    EXPECT_EQ(EncodeRoceV2(p, &f), 54 + c.ext_bytes + kIcrcBytes)
        << "opcode " << int{c.opcode};
    EXPECT_EQ(WireIcrc(f), ExpectedIcrc(f)) << "opcode " << int{c.opcode};
  }
}

TEST(RoceV2Frame, WriteOnlyImmCarriesRethThenImmDt) {
  RoceV2Packet p;
  p.opcode = bth::kWriteOnlyImm;
  p.va = 0x0102030405060708ull;
  p.rkey = 0x11223344;
  p.dma_length = 0x1000;
  p.imm = 0xa1b2c3d4;
  std::vector<uint8_t> f;
  EncodeRoceV2(p, &f);
  const size_t x = kEthBytes + kIpv4Bytes + kUdpBytes + kBthBytes;
  EXPECT_EQ(Get32(f, x), 0x01020304u);
  EXPECT_EQ(Get32(f, x + 4), 0x05060708u);
  EXPECT_EQ(Get32(f, x + 8), 0x11223344u);
  EXPECT_EQ(Get32(f, x + 12), 0x1000u);
  uint32_t imm;
  std::memcpy(&imm, &f[x + 16], 4);  // as it lay in the WR
  EXPECT_EQ(imm, 0xa1b2c3d4u);
}

TEST(RoceV2Frame, DethAndAeth) {
  RoceV2Packet ud;
  ud.opcode = bth::kUdSendOnly;
  ud.qkey = 0x80010000;
  ud.src_qp = 0x000102;
  std::vector<uint8_t> f;
  EncodeRoceV2(ud, &f);
  const size_t x = kEthBytes + kIpv4Bytes + kUdpBytes + kBthBytes;
  EXPECT_EQ(Get32(f, x), 0x80010000u);
  EXPECT_EQ(f[x + 4], 0);
  EXPECT_EQ(Get24(f, x + 5), 0x000102u);

  RoceV2Packet ack;
  ack.opcode = bth::kAcknowledge;
  ack.syndrome = 0x2e;  // RNR NAK, timer 14
  ack.msn = 0x123456;
  EncodeRoceV2(ack, &f);
  EXPECT_EQ(f[x], 0x2e);
  EXPECT_EQ(Get24(f, x + 1), 0x123456u);
}

TEST(RoceV2Frame, IcrcIgnoresVariantFieldsOnly) {
  const uint8_t data[8] = {9, 8, 7, 6, 5, 4, 3, 2};
  RoceV2Packet p;
  p.opcode = bth::kSendMiddle;
  p.payload = data;
  p.payload_bytes = sizeof(data);
  std::vector<uint8_t> f;
  EncodeRoceV2(p, &f);
  const uint8_t* ip = f.data() + kEthBytes;
  const size_t len = f.size() - kEthBytes - kIcrcBytes;
  const uint32_t icrc = RoceV2Icrc(ip, len);
  EXPECT_EQ(icrc, WireIcrc(f));
  std::vector<uint8_t> g = f;
  g[kEthBytes + 8] = 1;                              // TTL
  g[kEthBytes + 1] = 0x02;                           // ECN
  g[kEthBytes + kIpv4Bytes + kUdpBytes + 4] = 0x80;  // FECN
  g[kEthBytes + kIpv4Bytes + 6] = 0x12;              // UDP checksum
  EXPECT_EQ(RoceV2Icrc(g.data() + kEthBytes, len), icrc);
  g = f;
  g[f.size() - kIcrcBytes - 1] ^= 1;  // a payload bit
  EXPECT_NE(RoceV2Icrc(g.data() + kEthBytes, len), icrc);
  g = f;
  g[kEthBytes + kIpv4Bytes + kUdpBytes + 11] ^= 1;  // a PSN bit
  EXPECT_NE(RoceV2Icrc(g.data() + kEthBytes, len), icrc);
}

TEST(RoceV2Frame, BadIcrcIsTheComplement) {
  RoceV2Packet p;
  p.opcode = bth::kSendOnly;
  std::vector<uint8_t> good;
  std::vector<uint8_t> bad;
  EncodeRoceV2(p, &good);
  p.bad_icrc = true;
  EncodeRoceV2(p, &bad);
  EXPECT_EQ(WireIcrc(bad), ~WireIcrc(good));
  EXPECT_EQ(WireIcrc(good), ExpectedIcrc(good));
}

}  // namespace
}  // namespace softfab::sim::internal
