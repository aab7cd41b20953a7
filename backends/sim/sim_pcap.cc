// The pcap writer (sim_pcap.h): a wire tap (internal/packet_tap.h) that turns
// each arriving simulator packet into a RoCEv2 frame (internal/rocev2_frame.h)
// and appends it to a pcap file with nanosecond timestamps.
#include "backends/sim/sim_pcap.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/sim/internal/device.h"
#include "backends/sim/internal/fabric.h"
#include "backends/sim/internal/mr.h"
#include "backends/sim/internal/qp.h"
#include "backends/sim/internal/rocev2_frame.h"

namespace softfab::sim {
namespace internal {

namespace {

constexpr uint32_t kPcapMagicNs = 0xa1b23c4d;  // pcap, nanosecond timestamps
constexpr uint32_t kLinkTypeEthernet = 1;
constexpr uint32_t kSnapLen = 65535;
constexpr uint8_t kAckCreditsInvalid = 0x1f;  // AETH ACK: no credit count

void PutLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint8_t OpcodeOf(const Ev& ev) {
  const bool first = (ev.flags & kPktFirst) != 0;
  const bool last = (ev.flags & kPktLast) != 0;
  const bool imm = (ev.flags & kPktImm) != 0;
  switch (ev.op) {
    case PktOp::kSend:
      if (first && last) return imm ? bth::kSendOnlyImm : bth::kSendOnly;
      if (first) return bth::kSendFirst;
      if (last) return imm ? bth::kSendLastImm : bth::kSendLast;
      return bth::kSendMiddle;
    case PktOp::kWrite:
      if (first && last) return imm ? bth::kWriteOnlyImm : bth::kWriteOnly;
      if (first) return bth::kWriteFirst;
      if (last) return imm ? bth::kWriteLastImm : bth::kWriteLast;
      return bth::kWriteMiddle;
    case PktOp::kReadReq:
      return bth::kReadRequest;
    case PktOp::kReadResp:
      if (first && last) return bth::kReadResponseOnly;
      if (first) return bth::kReadResponseFirst;
      if (last) return bth::kReadResponseLast;
      return bth::kReadResponseMiddle;
    case PktOp::kAck:
      return bth::kAcknowledge;
    case PktOp::kUdSend:
      return imm ? bth::kUdSendOnlyImm : bth::kUdSendOnly;
  }
  return bth::kAcknowledge;
}

// The AETH syndrome byte (IB spec vol. 1, 9.7.5.1): ACK, RNR NAK with its
// timer code, or NAK with its code.
uint8_t SyndromeOf(const Ev& ev) {
  switch (static_cast<Syndrome>(ev.syndrome)) {
    case Syndrome::kAck:
      return kAckCreditsInvalid;
    case Syndrome::kNakRnr:
      return static_cast<uint8_t>(0x20 | (ev.aux & 0x1f));
    case Syndrome::kNakSeq:
      return 0x60;
    case Syndrome::kNakInvReq:
      return 0x61;
    case Syndrome::kNakRemAccess:
      return 0x62;
    case Syndrome::kNakRemOp:
      return 0x63;
  }
  return kAckCreditsInvalid;
}

}  // namespace

class PcapTap final : public PacketTap {
 public:
  PcapTap(FabricImpl* fabric, std::FILE* file)
      : fabric_(fabric), file_(file), io_buffer_(1 << 18) {
    std::setvbuf(file_, io_buffer_.data(), _IOFBF, io_buffer_.size());
  }
  ~PcapTap() override { (void)Close(); }

  bool WriteFileHeader() {
    uint8_t h[24] = {};
    PutLe32(h, kPcapMagicNs);
    h[4] = 2;  // version 2.4
    h[6] = 4;
    PutLe32(h + 16, kSnapLen);
    PutLe32(h + 20, kLinkTypeEthernet);
    return Write(h, sizeof(h));
  }

  void OnPacket(const Ev& ev) override {
    RoceV2Packet p;
    p.src_node = ev.src_node;
    p.dst_node = ev.dst_node;
    p.udp_src_port = static_cast<uint16_t>(0xc000 | (ev.src_qpn & 0x3fff));
    p.opcode = OpcodeOf(ev);
    p.solicited = Solicited(ev);
    p.dest_qp = ev.dst_qpn & kPsnMask;
    p.psn = ev.psn & kPsnMask;
    p.bad_icrc = (ev.flags & kPktCorrupt) != 0;
    p.traffic_class = TrafficClassOf(ev);
    FillFromWqe(ev, &p);
    const size_t len = EncodeRoceV2(p, &frame_);
    const uint64_t t = fabric_->now();
    uint8_t rec[16];
    PutLe32(rec, static_cast<uint32_t>(t / 1'000'000'000u));
    PutLe32(rec + 4, static_cast<uint32_t>(t % 1'000'000'000u));
    PutLe32(rec + 8, static_cast<uint32_t>(len));
    PutLe32(rec + 12, static_cast<uint32_t>(len));
    (void)Write(rec, sizeof(rec));
    (void)Write(frame_.data(), len);
    ++packets_;
  }

  Status Close() {
    if (file_ == nullptr) return Status::Ok();
    if (fabric_->tap() == this) fabric_->SetTap(nullptr);
    if (std::fclose(file_) != 0) failed_ = true;
    file_ = nullptr;
    return failed_ ? Status(EIO, "writing the capture failed") : Status::Ok();
  }

  uint64_t packets() const { return packets_; }

 private:
  bool Write(const void* data, size_t len) {
    if (std::fwrite(data, 1, len, file_) != len) failed_ = true;
    return !failed_;
  }

  // The IP TOS byte the sender gives the packet: a datagram's from its AH;
  // on RC every packet a QP sends (requests, ACKs, read responses) from the
  // QP's path, as an HCA takes it from the QP context.
  uint8_t TrafficClassOf(const Ev& ev) {
    if (ev.op == PktOp::kUdSend)
      return fabric_->ud_pool().traffic_class(ev.aux);
    const QpImpl* qp = fabric_->dev(ev.src_node)->QpByNum(ev.src_qpn);
    if (qp == nullptr || !qp->attr_.ah_attr.is_global) return 0;
    return qp->attr_.ah_attr.grh.traffic_class;
  }

  // The fields that come from the WR behind the packet (payload, RETH,
  // immediate data), read as the simulator reads them on arrival, and the
  // per-operation headers. Reads only.
  void FillFromWqe(const Ev& ev, RoceV2Packet* p) {
    payload_.assign(ev.op == PktOp::kReadReq ? 0 : ev.length, 0);
    p->payload = payload_.data();
    p->payload_bytes = static_cast<uint32_t>(payload_.size());
    if (ev.op == PktOp::kUdSend) {
      p->qkey = ev.psn;  // the simulator's UD packets carry the Q_Key there
      p->src_qp = ev.src_qpn;
      p->psn = static_cast<uint32_t>(ev.wqe_seq) & kPsnMask;
      p->imm = static_cast<uint32_t>(ev.offset);
      if (ev.length > 0) {
        std::memcpy(payload_.data(), fabric_->ud_pool().data(ev.aux),
                    ev.length);
      }
      return;
    }
    if (ev.op == PktOp::kAck) {
      p->syndrome = SyndromeOf(ev);
      return;
    }
    const bool response = ev.op == PktOp::kReadResp;
    if (response) p->syndrome = kAckCreditsInvalid;
    if (!response) p->ack_req = (ev.flags & kPktLast) != 0;
    // The WR lives on the requester: the sender of a request, the receiver of
    // a read response.
    const int32_t req_node = response ? ev.dst_node : ev.src_node;
    const uint32_t req_qpn = response ? ev.dst_qpn : ev.src_qpn;
    QpImpl* req_qp = fabric_->dev(req_node)->QpByNum(req_qpn);
    SendWqe* w = req_qp != nullptr ? req_qp->sq_.Find(ev.wqe_seq) : nullptr;
    if (w == nullptr) return;
    p->va = w->remote_addr;  // RETH: on a WRITE's first packet, or a READ
    p->rkey = w->rkey;
    p->dma_length =
        static_cast<uint32_t>(ev.op == PktOp::kReadReq ? ev.offset : w->length);
    p->imm = w->imm;
    if (payload_.empty()) return;
    if (response) {
      QpImpl* resp_qp = fabric_->dev(ev.src_node)->QpByNum(ev.src_qpn);
      const uint8_t* src =
          resp_qp != nullptr && w->opcode == WrOpcode::kRdmaRead
              ? RemoteTarget(resp_qp, w->rkey, w->remote_addr, w->length,
                             transport::kAccessRemoteRead)
              : nullptr;
      if (src != nullptr)
        std::memcpy(payload_.data(), src + ev.offset, ev.length);
      return;
    }
    if (w->send_flags & transport::kSendInline) {
      std::memcpy(payload_.data(), req_qp->sq_.Inline(ev.wqe_seq) + ev.offset,
                  ev.length);
      return;
    }
    const Sge* sges = req_qp->sq_.Sges(ev.wqe_seq);
    if (CheckSges(req_qp->dev_, req_qp->pd_, sges, w->num_sge, 0) >= 0)
      Gather(sges, w->num_sge, ev.offset, payload_.data(), ev.length);
  }

  FabricImpl* fabric_;
  std::FILE* file_;
  std::vector<char> io_buffer_;
  std::vector<uint8_t> frame_;
  std::vector<uint8_t> payload_;
  uint64_t packets_ = 0;
  bool failed_ = false;
};

}  // namespace internal

StatusOr<std::unique_ptr<PcapCapture>> PcapCapture::Open(
    SimFabric* fabric, const std::string& path, std::string* error) {
  auto fail = [&](Status s, const std::string& why) {
    if (error != nullptr) *error = why;
    return s;
  };
  auto* impl = dynamic_cast<internal::FabricImpl*>(fabric);
  if (impl == nullptr) {
    return fail(InvalidArgument("not a simulated fabric"),
                "pcap capture: no simulated fabric to capture");
  }
  if (impl->tap() != nullptr) {
    return fail(Busy("a capture is already attached"),
                "pcap capture: the fabric already has a capture attached");
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    const int e = errno;
    return fail(Status(e, "cannot create the capture file"),
                path + ": " + std::strerror(e));
  }
  auto tap = std::make_unique<internal::PcapTap>(impl, file);
  if (!tap->WriteFileHeader()) {
    (void)tap->Close();
    return fail(Status(EIO, "cannot write the capture file"),
                path + ": write failed");
  }
  impl->SetTap(tap.get());
  return std::unique_ptr<PcapCapture>(new PcapCapture(std::move(tap)));
}

PcapCapture::PcapCapture(std::unique_ptr<internal::PcapTap> tap)
    : tap_(std::move(tap)) {}

PcapCapture::~PcapCapture() = default;

Status PcapCapture::Close() { return tap_->Close(); }

uint64_t PcapCapture::packets() const { return tap_->packets(); }

}  // namespace softfab::sim
