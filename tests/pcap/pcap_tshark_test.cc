// The simulator's pcap capture (backends/sim/sim_pcap.h) read back by tshark:
// a small RC and UD scenario with retransmissions, an RNR NAK and one corrupted
// ACK runs with the trace on; tshark must decode every frame as RoCEv2 without
// a malformed packet, and each frame's BTH opcode, destination QP, PSN (Q_Key
// for UD), addresses and timestamp must match the trace's kPacketArrive record
// of the same index. The ICRCs are recomputed here with a bit-at-a-time CRC
// from the file's bytes: all good but the corrupted ACK's. And the capture must
// not change the run: same digest and trace with and without it.
//
// tshark (Debian package tshark) must be on PATH: without it the test fails.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/sim/internal/rocev2_reference.h"
#include "backends/sim/sim_fabric.h"
#include "backends/sim/sim_pcap.h"
#include "gtest/gtest.h"
#include "tests/support/sim_test_util.h"

namespace softfab::sim {
namespace {

using namespace ::softfab::sim::testing;  // NOLINT: the helpers' namespace
using rocev2_reference::ExpectedIcrc;
using rocev2_reference::WireIcrc;

constexpr uint32_t kMtu = 1024;

struct RunResult {
  uint64_t digest = 0;
  std::vector<TraceRecord> arrivals;  // kPacketArrive records, in order
  uint64_t captured = 0;
  uint32_t rc_qpn_a = 0, rc_qpn_b = 0, ud_qpn_a = 0, ud_qpn_b = 0;
};

SimConfig Config() {
  SimConfig c = TwoNodes(20261123);
  c.trace_capacity = 1 << 16;
  // A few requests lost (retransmissions, a sequence NAK) and one ACK
  // corrupted, which the receiver drops for its ICRC.
  PacketFault drop;
  drop.kind = PacketFaultKind::kDrop;
  drop.probability = 0.25;
  drop.src_node = 0;
  drop.opcode_mask = kFaultOpSend | kFaultOpWrite;
  drop.count_max = 3;
  drop.start_ns = 5'000;  // after the RNR NAK (RunScenario)
  PacketFault corrupt;
  corrupt.kind = PacketFaultKind::kCorrupt;
  corrupt.src_node = 1;
  corrupt.opcode_mask = kFaultOpAck;
  corrupt.count_max = 1;
  c.faults.packet_faults = {drop, corrupt};
  return c;
}

// The scenario: on an RC pair (MTU 1024) an RNR-NAKed SEND, a 3-packet SEND,
// SEND with immediate, inline and empty SENDs, a 3-packet WRITE, WRITE with
// immediate, a 3-packet READ; and two UD datagrams. `pcap_path` empty: no
// capture.
RunResult RunScenario(const std::string& pcap_path) {
  RunResult r;
  RcParams params;
  params.mtu = tp::Mtu::k1024;
  params.timeout = 8;  // ~1 ms
  RcPair rc(Config(), params);
  std::unique_ptr<PcapCapture> capture;
  if (!pcap_path.empty()) {
    std::string error;
    auto opened = PcapCapture::Open(rc.f.get(), pcap_path, &error);
    EXPECT_TRUE(opened.ok()) << error;
    if (opened.ok()) capture = std::move(opened.value());
  }
  for (size_t i = 0; i < rc.a.buf.size(); ++i)
    rc.a.buf[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t i = 0; i < rc.b.buf.size(); ++i)
    rc.b.buf[i] = static_cast<uint8_t>(i * 13 + 1);
  r.rc_qpn_a = rc.qa->qp_num();
  r.rc_qpn_b = rc.qb->qp_num();

  // No receive posted yet: an RNR NAK, then the retry finds one.
  tp::Sge s = rc.a.Sge(0, 100);
  EXPECT_TRUE(PostSend(rc.qa, 1, &s, 1).ok());
  rc.f->RunUntil(rc.f->clock().NowNs() + 5'000);
  for (int i = 0; i < 8; ++i) {
    tp::Sge r8 = rc.b.Sge(8192 * i, 8192);
    EXPECT_TRUE(PostRecv(rc.qb, 100 + i, &r8, 1).ok());
  }
  s = rc.a.Sge(0, 3000);
  EXPECT_TRUE(
      PostSend(rc.qa, 2, &s, 1, tp::WrOpcode::kSend, tp::kSendSolicited).ok());
  s = rc.a.Sge(5, 10);
  EXPECT_TRUE(
      PostSend(rc.qa, 3, &s, 1, tp::WrOpcode::kSendWithImm, 0, 0, 0, 0xa1b2c3d4)
          .ok());
  s = rc.a.Sge(40, 20);
  EXPECT_TRUE(
      PostSend(rc.qa, 4, &s, 1, tp::WrOpcode::kSend, tp::kSendInline).ok());
  EXPECT_TRUE(PostSend(rc.qa, 5, nullptr, 0).ok());
  const uint64_t remote = reinterpret_cast<uint64_t>(rc.b.buf.data());
  s = rc.a.Sge(0, 2500);
  EXPECT_TRUE(PostSend(rc.qa, 6, &s, 1, tp::WrOpcode::kRdmaWrite, 0,
                       remote + 32768, rc.b.mr->rkey())
                  .ok());
  s = rc.a.Sge(64, 100);
  EXPECT_TRUE(PostSend(rc.qa, 7, &s, 1, tp::WrOpcode::kRdmaWriteWithImm, 0,
                       remote + 40000, rc.b.mr->rkey(), 0x01020304)
                  .ok());
  s = rc.a.Sge(16384, 2100);
  EXPECT_TRUE(PostSend(rc.qa, 8, &s, 1, tp::WrOpcode::kRdmaRead, 0,
                       remote + 1000, rc.b.mr->rkey())
                  .ok());
  const auto sends = Drain(rc.f.get(), rc.a.scq);
  EXPECT_EQ(sends.size(), 8u);
  for (const auto& wc : sends) EXPECT_EQ(wc.status, tp::WcStatus::kSuccess);

  // Two UD datagrams from node 0 to node 1, the second with immediate data.
  tp::QueuePair* ua = QpIn(rc.a, tp::QpType::kUd, tp::QpState::kRts);
  tp::QueuePair* ub = QpIn(rc.b, tp::QpType::kUd, tp::QpState::kRts);
  r.ud_qpn_a = ua->qp_num();
  r.ud_qpn_b = ub->qp_num();
  tp::Sge ur = rc.b.Sge(50000, 1024);
  EXPECT_TRUE(PostRecv(ub, 200, &ur, 1).ok());
  ur = rc.b.Sge(52000, 1024);
  EXPECT_TRUE(PostRecv(ub, 201, &ur, 1).ok());
  tp::AhAttr ahattr;
  ahattr.is_global = 1;
  ahattr.port_num = 1;
  EXPECT_TRUE(rc.b.dev->QueryGid(1, 0, &ahattr.grh.dgid).ok());
  tp::AddressHandle* ah = Must(rc.a.pd->CreateAh(ahattr));
  for (int i = 0; i < 2; ++i) {
    tp::Sge us = rc.a.Sge(128, 33 + i);
    tp::SendWr wr;
    wr.wr_id = 300 + i;
    wr.sg_list = &us;
    wr.num_sge = 1;
    wr.opcode = i == 0 ? tp::WrOpcode::kSend : tp::WrOpcode::kSendWithImm;
    wr.imm_data = 0x5566;
    wr.ud.ah = ah;
    wr.ud.remote_qpn = ub->qp_num();
    wr.ud.remote_qkey = 0x11111111;
    const tp::SendWr* bad = nullptr;
    EXPECT_TRUE(ua->PostSend(&wr, &bad).ok());
  }
  rc.f->RunUntilIdle();
  EXPECT_EQ(Drain(rc.f.get(), rc.b.rcq).size(), 3u + 3u + 2u);

  if (capture != nullptr) {
    r.captured = capture->packets();
    EXPECT_TRUE(capture->Close().ok());
  }
  r.digest = rc.f->digest();
  for (const TraceRecord& t : rc.f->Trace()) {
    if (t.kind == TraceKind::kPacketArrive) r.arrivals.push_back(t);
  }
  EXPECT_LT(rc.f->Trace().size(), size_t{1} << 16) << "trace ring wrapped";
  return r;
}

struct Frame {
  uint64_t time_ns;
  std::vector<uint8_t> bytes;
};

// Reads a little-endian nanosecond pcap file.
std::vector<Frame> ReadPcap(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  auto le32 = [&](size_t at) {
    return f[at] | (f[at + 1] << 8) | (f[at + 2] << 16) |
           (static_cast<uint32_t>(f[at + 3]) << 24);
  };
  std::vector<Frame> out;
  if (f.size() < 24 || le32(0) != 0xa1b23c4d || le32(20) != 1) {
    ADD_FAILURE() << "not a nanosecond Ethernet pcap: " << path;
    return out;
  }
  for (size_t at = 24; at + 16 <= f.size();) {
    const uint32_t len = le32(at + 8);
    EXPECT_EQ(len, le32(at + 12));
    if (at + 16 + len > f.size()) {
      ADD_FAILURE() << "truncated record at byte " << at;
      break;
    }
    Frame fr;
    fr.time_ns = uint64_t{le32(at)} * 1'000'000'000u + le32(at + 4);
    fr.bytes.assign(f.begin() + at + 16, f.begin() + at + 16 + len);
    out.push_back(std::move(fr));
    at += 16 + len;
  }
  return out;
}

// One tshark output line, split at tabs.
std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, '\t')) out.push_back(cell);
  return out;
}

std::vector<std::vector<std::string>> RunTshark(const std::string& pcap,
                                                const std::string& fields) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string home = tmp != nullptr ? tmp : "/tmp";
  // HOME: tshark wants a writable profile folder; stderr holds its banner.
  // The RPC-over-RDMA dissector is off: it guesses at every SEND payload and
  // throws on an empty one (Wireshark 4.0), which would flag the empty SEND
  // as malformed; the payloads here are test bytes, not RPC.
  const std::string cmd = "HOME='" + home + "' tshark -n -r '" + pcap +
                          "' --disable-protocol rpcordma -T fields"
                          " -E occurrence=f " +
                          fields + " 2>/dev/null";
  std::vector<std::vector<std::string>> rows;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run: " << cmd;
    return rows;
  }
  std::string line;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) {
    line += buf;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      rows.push_back(Split(line));
      line.clear();
    }
  }
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << "tshark failed (is the tshark package installed?): "
                   << cmd;
  return rows;
}

uint32_t Num(const std::string& s) {
  return static_cast<uint32_t>(std::strtoul(s.c_str(), nullptr, 0));
}

// Which BTH opcodes may carry a packet of the simulator's kind (the trace
// records the kind, internal/event.h PktOp order).
bool OpcodeFits(uint8_t trace_op, uint32_t bth) {
  switch (trace_op) {
    case 0:  // SEND
      return bth <= 0x05;
    case 1:  // RDMA WRITE
      return bth >= 0x06 && bth <= 0x0b;
    case 2:  // RDMA READ request
      return bth == 0x0c;
    case 3:  // RDMA READ response
      return bth >= 0x0d && bth <= 0x10;
    case 4:  // ACK / NAK
      return bth == 0x11;
    case 5:  // UD SEND
      return bth == 0x64 || bth == 0x65;
  }
  return false;
}

std::string NodeIp(int32_t node) {
  return "10." + std::to_string((node >> 16) & 0xff) + "." +
         std::to_string((node >> 8) & 0xff) + "." + std::to_string(node & 0xff);
}

std::string TempPath(const char* name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
}

TEST(PcapCapture, DoesNotChangeTheRun) {
  const RunResult with = RunScenario(TempPath("same.pcap"));
  const RunResult without = RunScenario("");
  EXPECT_EQ(with.digest, without.digest);
  ASSERT_EQ(with.arrivals.size(), without.arrivals.size());
  for (size_t i = 0; i < with.arrivals.size(); ++i) {
    EXPECT_EQ(with.arrivals[i].time_ns, without.arrivals[i].time_ns);
    EXPECT_EQ(with.arrivals[i].psn, without.arrivals[i].psn);
  }
}

TEST(PcapCapture, TsharkDecodesEveryPacketAsTheTraceHasIt) {
  const std::string path = TempPath("scenario.pcap");
  const RunResult r = RunScenario(path);
  const std::vector<TraceRecord>& trace = r.arrivals;
  ASSERT_GT(trace.size(), 20u);
  EXPECT_EQ(r.captured, trace.size());

  const auto rows = RunTshark(
      path,
      "-e frame.number -e frame.time_epoch -e ip.src -e ip.dst -e udp.dstport "
      "-e infiniband.bth.opcode -e infiniband.bth.destqp -e "
      "infiniband.bth.psn -e infiniband.deth.q_key -e infiniband.deth.srcqp "
      "-e _ws.malformed -e _ws.expert.severity");
  ASSERT_EQ(rows.size(), trace.size());
  int retransmitted = 0, rnr_naks = 0, seq_naks = 0, ud = 0;
  uint32_t last_psn_to_b = 0;
  bool any_to_b = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const TraceRecord& t = trace[i];
    SCOPED_TRACE("frame " + std::to_string(i + 1));
    ASSERT_GE(row.size(), 10u);
    // frame.time_epoch: seconds with nine decimals, the virtual time.
    const std::string& ts = row[1];
    const size_t dot = ts.find('.');
    ASSERT_NE(dot, std::string::npos);
    const uint64_t ns = std::stoull(ts.substr(0, dot)) * 1'000'000'000u +
                        std::stoull(ts.substr(dot + 1));
    EXPECT_EQ(ns, t.time_ns);
    EXPECT_EQ(row[3], NodeIp(t.node));
    EXPECT_EQ(row[2], NodeIp(1 - t.node));
    EXPECT_EQ(row[4], "4791");
    const uint32_t opcode = Num(row[5]);
    EXPECT_TRUE(OpcodeFits(t.opcode, opcode))
        << "trace kind " << int{t.opcode} << ", BTH opcode " << opcode;
    EXPECT_EQ(Num(row[6]), t.qp_num);
    if (t.opcode == 5) {
      ++ud;
      EXPECT_EQ(Num(row[8]), t.psn);  // the simulator's UD "PSN" is the Q_Key
      EXPECT_EQ(t.qp_num, r.ud_qpn_b);
      EXPECT_EQ(Num(row[9]), r.ud_qpn_a);
    } else {
      EXPECT_EQ(Num(row[7]), t.psn);
    }
    if (t.opcode <= 2 && t.qp_num == r.rc_qpn_b) {
      if (any_to_b && static_cast<int32_t>(t.psn - last_psn_to_b) <= 0)
        ++retransmitted;
      last_psn_to_b = t.psn;
      any_to_b = true;
    }
    EXPECT_TRUE(row.size() < 11 || row[10].empty()) << "malformed";
  }
  // The scenario did what it is meant to show.
  EXPECT_GT(retransmitted, 0);
  EXPECT_EQ(ud, 2);

  // AETH syndromes: the RNR NAK and the sequence NAK are there.
  const auto naks = RunTshark(path, "-e infiniband.aeth.syndrome");
  for (const auto& row : naks) {
    if (row.empty() || row[0].empty()) continue;
    const uint32_t syn = Num(row[0]);
    if ((syn >> 5) == 1) ++rnr_naks;
    if (syn == 0x60) ++seq_naks;
  }
  EXPECT_GE(rnr_naks, 1);
  EXPECT_GE(seq_naks, 1);

  // No expert error (malformed, bad length, ...) anywhere in the file.
  const auto expert = RunTshark(path, "-e _ws.expert.severity");
  for (size_t i = 0; i < expert.size(); ++i) {
    const std::string sev = expert[i].empty() ? "" : expert[i][0];
    EXPECT_TRUE(sev.empty() || Num(sev) < 0x00800000u)
        << "frame " << i + 1 << " has an expert error (" << sev << ")";
  }

  // ICRCs: right on every frame but the one corrupted ACK.
  const std::vector<Frame> frames = ReadPcap(path);
  ASSERT_EQ(frames.size(), trace.size());
  int bad = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i].time_ns, trace[i].time_ns);
    if (WireIcrc(frames[i].bytes) != ExpectedIcrc(frames[i].bytes)) {
      ++bad;
      EXPECT_EQ(trace[i].opcode, 4) << "frame " << i + 1;
    }
  }
  EXPECT_EQ(bad, 1);
}

TEST(PcapCapture, PayloadAndImmediateAreTheApplicationBytes) {
  const std::string path = TempPath("payload.pcap");
  const RunResult r = RunScenario(path);
  const std::vector<Frame> frames = ReadPcap(path);
  ASSERT_FALSE(frames.empty());
  constexpr size_t kBth = 14 + 20 + 8;
  bool saw_send_imm = false, saw_first = false;
  for (const Frame& f : frames) {
    const uint8_t opcode = f.bytes[kBth];
    const uint8_t pad = (f.bytes[kBth + 1] >> 4) & 3;
    if (opcode == 0x05) {  // SEND_ONLY_WITH_IMMEDIATE: 10 bytes from offset 5
      saw_send_imm = true;
      uint32_t imm;
      std::memcpy(&imm, &f.bytes[kBth + 12], 4);
      EXPECT_EQ(imm, 0xa1b2c3d4u);
      ASSERT_EQ(f.bytes.size(), kBth + 12 + 4 + 10 + pad + 4);
      for (int i = 0; i < 10; ++i)
        EXPECT_EQ(f.bytes[kBth + 16 + i],
                  static_cast<uint8_t>((5 + i) * 7 + 3));
    }
    if (opcode == 0x00) {  // SEND_FIRST of the 3000-byte SEND: a full MTU
      saw_first = true;
      ASSERT_EQ(f.bytes.size(), kBth + 12 + kMtu + 4);
      for (uint32_t i = 0; i < kMtu; i += 97)
        EXPECT_EQ(f.bytes[kBth + 12 + i], static_cast<uint8_t>(i * 7 + 3));
    }
  }
  EXPECT_TRUE(saw_send_imm);
  EXPECT_TRUE(saw_first);
}

TEST(PcapCapture, OpenRefusesWhatItCannotDo) {
  RcPair rc(TwoNodes());
  std::string error;
  auto bad = PcapCapture::Open(rc.f.get(), "/nonexistent-dir/x.pcap", &error);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(error.find("/nonexistent-dir/x.pcap"), std::string::npos) << error;
  auto none = PcapCapture::Open(nullptr, TempPath("none.pcap"), &error);
  EXPECT_FALSE(none.ok());
  auto first = PcapCapture::Open(rc.f.get(), TempPath("first.pcap"), &error);
  ASSERT_TRUE(first.ok()) << error;
  auto second = PcapCapture::Open(rc.f.get(), TempPath("second.pcap"), &error);
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), EBUSY);
  EXPECT_TRUE((*first)->Close().ok());
  EXPECT_TRUE((*first)->Close().ok());  // twice: nothing more to do
  auto again = PcapCapture::Open(rc.f.get(), TempPath("again.pcap"), &error);
  EXPECT_TRUE(again.ok()) << error;
}

}  // namespace
}  // namespace softfab::sim
