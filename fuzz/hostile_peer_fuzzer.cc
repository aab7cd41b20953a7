// Fuzz target: a hostile peer. Three nodes on one simulated fabric: a victim
// RDM endpoint (node 0), an honest RDM endpoint that sends it tagged messages
// (node 1), and a RawPeer (node 2) that sends the fuzzer's bytes: raw and
// structured CM datagrams (requests from names in no AV, duplicate replies,
// unknown types, lying lengths) to the victim's UD QP and, after a real
// handshake, RC SENDs (headers with lengths that lie, unknown ops, acks and
// read-dones for messages never sent, rendezvous requests with bogus rkeys,
// addresses and sizes, floods that ignore credits) and RDMA WRITEs (credit
// words written backwards), and breaks its QP mid-transfer.
//
// Checked: every honest message arrives once, intact, in the receive posted
// for it (directed at the honest peer), and every honest send completes
// without error; the victim's receives that the attacker can reach (posted
// for any source) report no more bytes than their buffers hold and nothing
// is written past the bytes reported (buffers are exact heap blocks, so
// ASan sees any write outside); no victim operation completes twice or with
// a context it never gave; and the victim holds no more unexpected messages
// than its per-peer bound allows, however the attacker floods it.
#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/wire.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/input_reader.h"
#include "tests/support/raw_peer.h"

namespace {

namespace core = ::softfab::core;
namespace sim = ::softfab::sim;
namespace wire = ::softfab::wire;
using ::softfab::fuzz::RawPeer;

constexpr size_t kOpsMax = 120;
constexpr int kEndRounds = 3000;
constexpr uint8_t kCanary = 0xEE;
constexpr uint32_t kCredits = 8;
constexpr uint32_t kPeersMax = 6;
// The honest peer's messages: eager, empty, at the eager limit, rendezvous.
constexpr size_t kHonestSizes[] = {64, 0, 8192, 9000, 1, 20000};
constexpr uint64_t kHonestTag = 0x5AFE0000;

// A receive the victim posted: its buffer and what it is for.
struct VictimRecv {
  enum Kind { kHonest, kAny } kind = kAny;
  int honest_index = -1;
  std::vector<uint8_t> buf;
  bool pending = true;
};

class Attack {
 public:
  explicit Attack(softfab::fuzz::InputReader& in) : in_(in) {}
  bool Open();
  void Step();
  void Finish();

 private:
  struct Ep {
    softfab::transport::ProtectionDomain* pd = nullptr;
    std::unique_ptr<core::CompletionQueue> cq;
    std::unique_ptr<core::AddressVector> av;
    std::unique_ptr<core::Endpoint> ep;
  };
  bool MakeEp(int node, Ep* e);
  void Progress(int rounds);
  void ReadVictim();
  void OnVictimEntry(void* context, size_t len, int err, size_t olen);
  void Handshake();
  void AnswerRequest();
  void CmBytes();
  void CmStructured();
  void SendHeader(bool flood);
  void SendRaw();
  void WriteCredits();
  void VictimRecvAny();
  void VictimSend();
  void CheckBound() const;

  softfab::fuzz::InputReader& in_;
  std::unique_ptr<sim::SimFabric> fabric_;
  Ep victim_, honest_;
  std::unique_ptr<RawPeer> raw_;
  uint64_t victim_to_honest_ = 0, victim_to_raw_ = 0, honest_to_victim_ = 0;
  std::vector<std::unique_ptr<VictimRecv>> recvs_;
  std::vector<std::vector<uint8_t>> honest_out_;
  std::vector<int> honest_sends_done_;  // Per honest send: completions.
  // Victim sends to the attacker: context -> completions seen.
  std::map<const void*, int> victim_sends_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> victim_send_bufs_;
  bool connected_ = false;
  uint64_t request_id_ = 1;   // For structured CM messages.
  uint64_t victim_word_ = 0;  // The victim's credit word for the attacker.
  uint32_t victim_word_rkey_ = 0;
  size_t last_send_offset_ = 0, last_send_len_ = 0;
};

bool Attack::MakeEp(int node, Ep* e) {
  auto* device = fabric_->device(node);
  auto pd = device->AllocPd();
  if (!pd.ok()) return false;
  e->pd = *pd;
  core::EndpointAttr attr;
  attr.tx_size = 32;
  attr.rx_size = 64;
  attr.credits = kCredits;
  attr.peers_max = kPeersMax;
  attr.caps = core::kDirectedRecv;
  auto ep = core::Endpoint::Create(device, e->pd, attr);
  if (!ep.ok()) return false;
  e->ep = std::move(*ep);
  e->cq = std::make_unique<core::CompletionQueue>(512);
  e->av = std::make_unique<core::AddressVector>(16);
  FUZZ_CHECK(e->ep->BindCq(e->cq.get(), core::kSend | core::kRecv).ok());
  FUZZ_CHECK(e->ep->BindAv(e->av.get()).ok());
  FUZZ_CHECK(e->ep->Enable().ok());
  return true;
}

bool Attack::Open() {
  sim::SimConfig config;
  config.nodes = 3;
  config.master_seed = in_.U8();
  fabric_ = sim::CreateSimFabric(config);
  if (!fabric_ || !MakeEp(0, &victim_) || !MakeEp(1, &honest_)) return false;
  raw_ = std::make_unique<RawPeer>(fabric_->device(2));
  if (!raw_->ok()) return false;
  victim_to_honest_ = *victim_.av->Insert(honest_.ep->name());
  victim_to_raw_ = *victim_.av->Insert(raw_->name());
  honest_to_victim_ = *honest_.av->Insert(victim_.ep->name());
  // The honest traffic: receives directed at the honest peer, then sends.
  for (size_t k = 0; k < std::size(kHonestSizes); ++k) {
    auto r = std::make_unique<VictimRecv>();
    r->kind = VictimRecv::kHonest;
    r->honest_index = static_cast<int>(k);
    r->buf.assign(kHonestSizes[k], kCanary);
    iovec iov{r->buf.data(), r->buf.size()};
    core::RecvArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.src = victim_to_honest_;
    a.tag = kHonestTag + k;
    a.context = r.get();
    a.tagged = true;
    FUZZ_CHECK(victim_.ep->Recv(a).ok());
    recvs_.push_back(std::move(r));
  }
  honest_sends_done_.assign(std::size(kHonestSizes), 0);
  for (size_t k = 0; k < std::size(kHonestSizes); ++k) {
    std::vector<uint8_t>& out = honest_out_.emplace_back(kHonestSizes[k]);
    for (size_t i = 0; i < out.size(); ++i) out[i] = uint8_t(k * 31 + i * 7);
    iovec iov{out.data(), out.size()};
    core::SendArgs a;
    a.iov = &iov;
    a.iov_count = 1;
    a.dest = honest_to_victim_;
    a.tag = kHonestTag + k;
    a.context = &honest_sends_done_[k];
    a.tagged = true;
    FUZZ_CHECK(honest_.ep->Send(a).ok());
  }
  return true;
}

void Attack::OnVictimEntry(void* context, size_t len, int err, size_t olen) {
  if (victim_sends_.count(context)) {
    FUZZ_CHECK(++victim_sends_[context] == 1);  // Completed twice.
    return;
  }
  VictimRecv* r = nullptr;
  for (auto& x : recvs_) {
    if (x.get() == context) r = x.get();
  }
  FUZZ_CHECK(r != nullptr);  // A context the victim never gave.
  FUZZ_CHECK(r->pending);    // Completed twice.
  r->pending = false;
  FUZZ_CHECK(len <= r->buf.size());
  for (size_t i = len; i < r->buf.size(); ++i) FUZZ_CHECK(r->buf[i] == kCanary);
  if (r->kind == VictimRecv::kHonest) {
    // Honest bytes only, all of them.
    FUZZ_CHECK(err == 0 && olen == 0);
    const auto& out = honest_out_[r->honest_index];
    FUZZ_CHECK(len == out.size());
    FUZZ_CHECK(len == 0 || std::memcmp(r->buf.data(), out.data(), len) == 0);
  }
}

void Attack::ReadVictim() {
  core::CqEntry e[8];
  for (int guard = 0; guard < 64; ++guard) {
    const int n = victim_.cq->Read(e, 8);
    if (n == -core::CompletionQueue::kErrAvail) {
      core::CqErrEntry x;
      FUZZ_CHECK(victim_.cq->ReadError(&x).ok());
      OnVictimEntry(x.op_context, x.len, x.err, x.olen);
      continue;
    }
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) OnVictimEntry(e[i].op_context, e[i].len, 0, 0);
  }
  // The honest side: its sends.
  for (int guard = 0; guard < 64; ++guard) {
    const int n = honest_.cq->Read(e, 8);
    if (n == -core::CompletionQueue::kErrAvail) {
      core::CqErrEntry x;
      FUZZ_CHECK(honest_.cq->ReadError(&x).ok());
      std::fprintf(stderr, "honest send failed: error %d\n", x.err);
      FUZZ_CHECK(false);  // An honest send failed.
    }
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      FUZZ_CHECK(++*static_cast<int*>(e[i].op_context) == 1);
    }
  }
}

void Attack::Progress(int rounds) {
  for (int i = 0; i < rounds; ++i) {
    ReadVictim();
    raw_->PollSends();
    raw_->PollRcRecvs();
    CheckBound();
  }
}

void Attack::CheckBound() const {
  // Each peer may leave at most 2 x credits messages unexpected (credits
  // returned at once, then as many held); the attacker may name up to
  // peers_max peers.
  FUZZ_CHECK(victim_.ep->stats().unexpected_held <= kPeersMax * 2 * kCredits);
}

void Attack::Handshake() {
  wire::CmMessage reply;
  if (raw_->Handshake(
              victim_.ep->name(), in_.U8(), [this] { Progress(1); },
              /*rounds=*/4, &reply)
          .ok()) {
    connected_ = true;
    victim_word_ = reply.credit_addr;
    victim_word_rkey_ = reply.credit_rkey;
  }
}

void Attack::AnswerRequest() {
  Progress(2);
  wire::CmMessage request;
  const uint8_t copies = 1 + in_.U8() % 3;  // Duplicate replies.
  while (raw_->ReceiveCm(&request)) {
    if (request.type != wire::CmType::kRequest) continue;
    const wire::CmMessage reply =
        raw_->Cm(wire::CmType::kReply, request.request_id, in_.U8());
    uint8_t bytes[wire::kCmMaxBytes];
    wire::EncodeCm(reply, bytes);
    if (raw_->ConnectRc(victim_.ep->name(), request.rc_qpn, request.psn).ok()) {
      connected_ = true;
      victim_word_ = request.credit_addr;
      victim_word_rkey_ = request.credit_rkey;
    }
    for (uint8_t c = 0; c < copies; ++c) {
      (void)raw_->SendCm(victim_.ep->name(), bytes, wire::CmSize(reply));
    }
  }
}

void Attack::CmBytes() {
  // Up to 1,020 bytes: past the CM's smallest receive slot too.
  uint8_t bytes[1024];
  const size_t n = in_.Take(bytes, size_t{in_.U8()} * 4);
  (void)raw_->SendCm(victim_.ep->name(), bytes, n);
}

void Attack::CmStructured() {
  const uint8_t type = in_.U8();
  wire::CmMessage m = raw_->Cm(static_cast<wire::CmType>(1 + type % 8),
                               in_.Bits(1) ? request_id_ : in_.Bits(8),
                               static_cast<uint32_t>(in_.Bits(4)));
  const uint8_t lie = in_.U8();
  if (lie & 1) m.from.cm_qpn ^= in_.U8();  // A name in no AV (a flood).
  if (lie & 2) m.from.gid[15] ^= in_.U8();
  if (lie & 4) m.rc_qpn = static_cast<uint32_t>(in_.Bits(4));
  if (lie & 8) m.credit_addr = in_.Bits(8);
  if (lie & 16) m.data_len = in_.U8() % (wire::kCmDataMax + 1);
  if (lie & 32) m.from = victim_.ep->name();  // Its own name.
  if (lie & 64) m.mtu = in_.U8();             // Any MTU, 0 and 200 too.
  if (lie & 128) m.reads_initiated = m.reads_served = in_.U8();
  uint8_t bytes[wire::kCmMaxBytes];
  wire::EncodeCm(m, bytes);
  if (type >= 0xF0) bytes[2] = type;  // An unknown type.
  // Another version of the format (answered with kVersionRefused), or a
  // refusal of ours.
  if (type >= 0xE0 && type < 0xF0) bytes[1] = type & 0x0F;
  if (type >= 0xD0 && type < 0xE0) {
    bytes[2] = static_cast<uint8_t>(wire::CmType::kVersionRefused);
  }
  (void)raw_->SendCm(victim_.ep->name(), bytes, wire::CmSize(m));
}

void Attack::SendHeader(bool flood) {
  if (!connected_) return;
  if (!flood) {
    wire::Header h;
    h.op = static_cast<wire::Op>(in_.U8() % 6);
    h.flags = in_.U8();
    const uint8_t pick = in_.U8();
    const size_t payload = (pick & 3) == 0   ? 0
                           : (pick & 3) == 1 ? in_.U8()
                           : (pick & 3) == 2 ? 8192
                                             : in_.Bits(2) % 9000;
    // The length: the truth, or a lie.
    h.length = (pick & 4) ? in_.Bits(8) : payload;
    h.tag = (pick & 8) ? kHonestTag + in_.U8() % 8 : in_.Bits(2);
    h.data = in_.Bits(1);
    h.msg_id = (pick & 16) ? in_.Bits(8) : in_.U8() % 40;
    const size_t src = RawPeer::kBufferBytes / 2;
    // Rendezvous: our buffer (and key), or anything.
    h.rkey = (pick & 32) ? static_cast<uint32_t>(in_.Bits(4)) : raw_->rkey();
    h.aux = reinterpret_cast<uint64_t>(raw_->buffer() + src) +
            ((pick & 64) ? in_.Bits(8) : in_.U8());
    const size_t offset = 4096;
    wire::Encode(h, raw_->buffer() + offset);
    if (pick & 128) raw_->buffer()[offset] = in_.U8();  // Any version.
    std::memset(raw_->buffer() + offset + wire::kHeaderBytes, 0x5A, payload);
    last_send_offset_ = offset;
    last_send_len_ = wire::kHeaderBytes + payload;
  }
  const int copies = flood ? 1 + in_.U8() : 1;
  for (int c = 0; c < copies; ++c) {
    if (!raw_->Send(last_send_offset_, last_send_len_).ok()) {
      Progress(1);  // Its send queue is full: let the fabric run.
    }
  }
}

void Attack::SendRaw() {
  if (!connected_) return;
  const size_t n = in_.Take(raw_->buffer() + 4096, in_.Bits(2) % 9000);
  (void)raw_->Send(4096, n);
}

void Attack::WriteCredits() {
  if (!connected_) return;
  const uint64_t value = in_.Bits(8);  // Backwards, forwards, anything.
  std::memcpy(raw_->buffer() + 64, &value, 8);
  const uint8_t pick = in_.U8();
  const uint64_t addr = (pick & 1) ? victim_word_ + in_.Bits(2) : victim_word_;
  const uint32_t rkey =
      (pick & 2) ? static_cast<uint32_t>(in_.Bits(4)) : victim_word_rkey_;
  (void)raw_->Write(64, 8 + (pick >> 4), addr, rkey);
}

void Attack::VictimRecvAny() {
  auto r = std::make_unique<VictimRecv>();
  const uint8_t pick = in_.U8();
  r->buf.assign((pick & 1) ? in_.Bits(2) % 20000 : in_.U8(), kCanary);
  iovec iov{r->buf.data(), r->buf.size()};
  core::RecvArgs a;
  a.iov = &iov;
  a.iov_count = 1;
  a.tag = in_.Bits(2);
  a.ignore = (pick & 2) ? ~uint64_t{0} : 0;
  a.context = r.get();
  a.tagged = pick & 4;
  if (victim_.ep->Recv(a).ok()) recvs_.push_back(std::move(r));
}

void Attack::VictimSend() {
  auto& buf = victim_send_bufs_.emplace_back(
      std::make_unique<std::vector<uint8_t>>(in_.U8() & 1 ? 9000 : 100, 1));
  iovec iov{buf->data(), buf->size()};
  core::SendArgs a;
  a.iov = &iov;
  a.iov_count = 1;
  a.dest = victim_to_raw_;
  a.context = buf.get();
  a.flags = (in_.U8() & 1) ? core::kDeliveryComplete : 0;
  if (victim_.ep->Send(a).ok()) victim_sends_[buf.get()] = 0;
}

void Attack::Step() {
  switch (in_.U8() % 12) {
    case 0:
      Handshake();
      break;
    case 1:
      AnswerRequest();
      break;
    case 2:
      CmBytes();
      break;
    case 3:
      CmStructured();
      break;
    case 4:
      SendHeader(/*flood=*/false);
      break;
    case 5:
      SendHeader(/*flood=*/true);
      break;
    case 6:
      SendRaw();
      break;
    case 7:
      WriteCredits();
      break;
    case 8:
      if (connected_) (void)raw_->BreakRc();
      connected_ = false;
      break;
    case 9:
      Progress(1 + in_.U8() % 8);
      break;
    case 10:
      VictimRecvAny();
      break;
    case 11:
      VictimSend();
      break;
  }
}

void Attack::Finish() {
  if (std::getenv("SOFTFAB_FUZZ_TRACE")) {
    const auto& st = victim_.ep->stats();
    std::fprintf(stderr,
                 "connected %d unexpected %llu held %llu bad_headers %llu "
                 "cm_requests %llu\n",
                 connected_, static_cast<unsigned long long>(st.unexpected),
                 static_cast<unsigned long long>(st.unexpected_held),
                 static_cast<unsigned long long>(st.bad_headers),
                 static_cast<unsigned long long>(st.cm_requests));
  }
  // The honest traffic must get through whatever the attacker did.
  for (int round = 0; round < kEndRounds; ++round) {
    bool done = true;
    for (int d : honest_sends_done_) done &= d == 1;
    for (const auto& r : recvs_) {
      done &= !(r->kind == VictimRecv::kHonest && r->pending);
    }
    if (done) return;
    Progress(1);
    honest_.ep->Progress();
  }
  FUZZ_CHECK(false);  // The honest traffic did not complete.
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  softfab::fuzz::InputReader in(data, size);
  Attack attack(in);
  if (!attack.Open()) return 0;
  for (size_t i = 0; i < kOpsMax && !in.empty(); ++i) attack.Step();
  attack.Finish();
  return 0;
}
