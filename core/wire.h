// The bytes softfab's messaging protocol puts on the wire, between two cores.
//
// Every SEND carries a WireHeader, then (for eager messages) the payload.
// Connection management runs over each endpoint's UD QP as CmMessage datagrams.
// Fields are little-endian (the byte order of every host softfab builds for;
// a static_assert in wire.cc checks it) and copied with memcpy, never cast.
#ifndef SOFTFAB_CORE_WIRE_H_
#define SOFTFAB_CORE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softfab::wire {

inline constexpr uint8_t kVersion = 1;

enum class Op : uint8_t {
  kEager = 1,       // Header + payload.
  kRendezvous = 2,  // Header only: the payload waits at (aux, rkey) for READ.
  kReadDone = 3,    // Rendezvous finished at the target: sender may complete.
  kAck = 4,         // Delivery or match acknowledgement of msg_id.
};

// Header flags.
inline constexpr uint8_t kTagged = 1u << 0;
inline constexpr uint8_t kHasData = 1u << 1;       // `data` is remote CQ data.
inline constexpr uint8_t kAckDelivery = 1u << 2;   // Ack once buffered/placed.
inline constexpr uint8_t kAckMatch = 1u << 3;      // Ack once matched.
inline constexpr uint8_t kAckTruncated = 1u << 4;  // (kAck) receiver truncated.

struct Header {
  uint8_t version = kVersion;
  Op op = Op::kEager;
  uint8_t flags = 0;
  uint8_t reserved = 0;
  uint32_t rkey = 0;    // kRendezvous: key of the sender's buffer.
  uint64_t length = 0;  // Message length in bytes (whole message).
  uint64_t tag = 0;
  uint64_t data = 0;    // Remote CQ data (all 64 bits; verbs imm is 32).
  uint64_t msg_id = 0;  // Sender's operation id, echoed by kAck/kReadDone.
  uint64_t aux = 0;     // kRendezvous: address of the sender's buffer.
};
inline constexpr size_t kHeaderBytes = 48;

inline void Encode(const Header& h, uint8_t* out) {
  out[0] = h.version;
  out[1] = static_cast<uint8_t>(h.op);
  out[2] = h.flags;
  out[3] = h.reserved;
  std::memcpy(out + 4, &h.rkey, 4);
  std::memcpy(out + 8, &h.length, 8);
  std::memcpy(out + 16, &h.tag, 8);
  std::memcpy(out + 24, &h.data, 8);
  std::memcpy(out + 32, &h.msg_id, 8);
  std::memcpy(out + 40, &h.aux, 8);
}

// False for a header this version cannot read (the caller drops the message
// and counts it).
inline bool Decode(const uint8_t* in, size_t bytes, Header* h) {
  if (bytes < kHeaderBytes || in[0] != kVersion) return false;
  h->version = in[0];
  h->op = static_cast<Op>(in[1]);
  h->flags = in[2];
  h->reserved = in[3];
  std::memcpy(&h->rkey, in + 4, 4);
  std::memcpy(&h->length, in + 8, 8);
  std::memcpy(&h->tag, in + 16, 8);
  std::memcpy(&h->data, in + 24, 8);
  std::memcpy(&h->msg_id, in + 32, 8);
  std::memcpy(&h->aux, in + 40, 8);
  return h->op >= Op::kEager && h->op <= Op::kAck;
}

// ---- Connection management (UD datagrams) ----

// An endpoint's name: what sf_getname returns and sf_av_insert takes.
struct Name {
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint32_t cm_qpn = 0;  // The endpoint's UD QP.
  uint32_t qkey = 0;
  // The QP number first: names of one fabric mostly differ there, and a
  // send compares its peer's name with its own endpoint's every time.
  friend bool operator==(const Name& a, const Name& b) {
    return a.cm_qpn == b.cm_qpn && a.qkey == b.qkey && a.lid == b.lid &&
           std::memcmp(a.gid, b.gid, sizeof a.gid) == 0;
  }
  friend auto operator<=>(const Name&, const Name&) = default;
};
inline constexpr size_t kNameBytes = 28;

inline void EncodeName(const Name& n, uint8_t* out) {
  std::memcpy(out, n.gid, 16);
  std::memcpy(out + 16, &n.lid, 2);
  out[18] = out[19] = 0;
  std::memcpy(out + 20, &n.cm_qpn, 4);
  std::memcpy(out + 24, &n.qkey, 4);
}
inline void DecodeName(const uint8_t* in, Name* n) {
  std::memcpy(n->gid, in, 16);
  std::memcpy(&n->lid, in + 16, 2);
  std::memcpy(&n->cm_qpn, in + 20, 4);
  std::memcpy(&n->qkey, in + 24, 4);
}

enum class CmType : uint8_t {
  kRequest = 1,  // "Here is my RC QP; connect yours to it."
  kReply = 2,    // "Done; here is mine."
  // FI_EP_MSG (connect/accept through a passive endpoint):
  kConnect = 3,          // To a listener: a kRequest the application accepts.
  kPending = 4,          // Listener: "received; the application decides".
  kReject = 5,           // Listener: "refused" (fi_reject).
  kEstablished = 6,      // Connector: "my QP is in RTS" (the IB CM's RTU).
  kDisconnect = 7,       // Either side: fi_shutdown (repeated until answered).
  kDisconnectReply = 8,  // "Disconnected" (the IB CM's DREP).
  // "I speak another version of this format": the prefix alone, sent in
  // the refuser's own version. Its value never changes.
  kVersionRefused = 9,
};
// Private data an FI_EP_MSG connect, accept or reject carries
// (FI_OPT_CM_DATA_SIZE).
inline constexpr size_t kCmDataMax = 56;

// The CM format's version. Every version begins with the same prefix, which
// never changes: a marker byte (never a type of the unversioned format of
// softfab before version 2, whose first byte was the type, 1 to 8, so such a
// peer drops what a newer one sends), the version, the type and the sender's
// name. So a receiver of any version reads who sent a datagram and in which
// version, and answers one it cannot read with kVersionRefused, which the
// sender reads whatever its own version.
inline constexpr uint8_t kCmMarker = 0xCA;
inline constexpr uint8_t kCmVersion = 2;
inline constexpr size_t kCmPrefixBytes = 3 + kNameBytes;

struct CmPrefix {
  uint8_t version = kCmVersion;
  CmType type = CmType::kRequest;
  Name from;
};

struct CmMessage {
  CmType type = CmType::kRequest;
  Name from;  // Sender's endpoint name.
  // The sender's port: its active MTU (transport::Mtu, 1 to 5), so that a
  // connection's path MTU is the smaller of the two ends'.
  uint8_t mtu = 0;
  // RDMA READs the sender's device lets one QP have in flight as initiator
  // (max_qp_init_rd_atom) and serve as responder (max_qp_rd_atom), at most
  // 255: a connection's max_rd_atomic is the initiator's and the responder's
  // smaller.
  uint8_t reads_initiated = 0;
  uint8_t reads_served = 0;
  uint32_t rc_qpn = 0;       // Sender's RC QP for this connection.
  uint32_t psn = 0;          // Sender's initial send PSN.
  uint64_t credit_addr = 0;  // Where the receiver RDMA-writes credit returns.
  uint32_t credit_rkey = 0;
  uint32_t credits = 0;     // Receive buffers granted to the peer.
  uint64_t request_id = 0;  // Initiator's id for this attempt (replies echo).
  // The sender's FI_OPT_BUFFERED_MIN: rendezvous requests to it carry at least
  // this many leading bytes.
  uint32_t buffered_min = 0;
  uint8_t data_len = 0;  // Private data (FI_EP_MSG), at most kCmDataMax.
  uint8_t data[kCmDataMax] = {};
};
inline constexpr size_t kCmBytes =
    kCmPrefixBytes + 3 + 4 + 4 + 8 + 4 + 4 + 8 + 4 + 1;
inline constexpr size_t kCmMaxBytes = kCmBytes + kCmDataMax;

inline void EncodeCmPrefix(CmType type, const Name& from, uint8_t* out) {
  out[0] = kCmMarker;
  out[1] = kCmVersion;
  out[2] = static_cast<uint8_t>(type);
  EncodeName(from, out + 3);
}
// Reads the prefix of a datagram of any version; false when it is none
// (too short, or no marker).
inline bool DecodeCmPrefix(const uint8_t* in, size_t bytes, CmPrefix* p) {
  if (bytes < kCmPrefixBytes || in[0] != kCmMarker) return false;
  p->version = in[1];
  p->type = static_cast<CmType>(in[2]);
  DecodeName(in + 3, &p->from);
  return true;
}

inline void EncodeCm(const CmMessage& m, uint8_t* out) {
  EncodeCmPrefix(m.type, m.from, out);
  uint8_t* p = out + kCmPrefixBytes;
  p[0] = m.mtu;
  p[1] = m.reads_initiated;
  p[2] = m.reads_served;
  p += 3;
  std::memcpy(p, &m.rc_qpn, 4);
  std::memcpy(p + 4, &m.psn, 4);
  std::memcpy(p + 8, &m.credit_addr, 8);
  std::memcpy(p + 16, &m.credit_rkey, 4);
  std::memcpy(p + 20, &m.credits, 4);
  std::memcpy(p + 24, &m.request_id, 8);
  std::memcpy(p + 32, &m.buffered_min, 4);
  p[36] = m.data_len;
  std::memcpy(p + 37, m.data, m.data_len);
}
// Bytes EncodeCm writes for `m`.
inline size_t CmSize(const CmMessage& m) { return kCmBytes + m.data_len; }
// Decodes a whole message of this version (false for another version, a
// kVersionRefused, or bytes that are no message).
inline bool DecodeCm(const uint8_t* in, size_t bytes, CmMessage* m) {
  CmPrefix prefix;
  if (!DecodeCmPrefix(in, bytes, &prefix) || prefix.version != kCmVersion ||
      bytes < kCmBytes) {
    return false;
  }
  if (in[2] < static_cast<uint8_t>(CmType::kRequest) ||
      in[2] >= static_cast<uint8_t>(CmType::kVersionRefused)) {
    return false;
  }
  m->type = prefix.type;
  m->from = prefix.from;
  const uint8_t* p = in + kCmPrefixBytes;
  m->mtu = p[0];
  m->reads_initiated = p[1];
  m->reads_served = p[2];
  if (m->mtu < 1 || m->mtu > 5) return false;  // not an IB MTU (256..4096)
  p += 3;
  std::memcpy(&m->rc_qpn, p, 4);
  std::memcpy(&m->psn, p + 4, 4);
  std::memcpy(&m->credit_addr, p + 8, 8);
  std::memcpy(&m->credit_rkey, p + 16, 4);
  std::memcpy(&m->credits, p + 20, 4);
  std::memcpy(&m->request_id, p + 24, 8);
  std::memcpy(&m->buffered_min, p + 32, 4);
  m->data_len = p[36];
  if (m->data_len > kCmDataMax || bytes < kCmBytes + m->data_len) return false;
  std::memcpy(m->data, p + 37, m->data_len);
  return true;
}

}  // namespace softfab::wire

#endif  // SOFTFAB_CORE_WIRE_H_
