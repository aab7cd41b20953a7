// RawPeer: a peer that speaks softfab's protocol by hand, for the hostile
// peer fuzz target and the abuse tests. It owns raw transport objects (the
// verbs-shaped interface api/softfab/verbs.h exposes as sfv_*) on one node of
// a simulated fabric: a UD QP for connection-manager datagrams and an RC QP
// for the data path, plus a registered buffer its sends come from and that
// peers may READ (rendezvous) or WRITE (credit returns). Nothing it sends is
// checked: callers put the bytes they like on the wire.
//
// Uses transport/transport.h directly rather than the sfv_* calls because
// sfv_sim_fabric_create and sf_fabric_open each build a fabric of their own;
// on one fabric with a core::Endpoint the transport is the same interface.
// Single-threaded, like the fabric.
#ifndef SOFTFAB_TESTS_SUPPORT_RAW_PEER_H_
#define SOFTFAB_TESTS_SUPPORT_RAW_PEER_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::fuzz {

class RawPeer {
 public:
  static constexpr uint32_t kQkey = 0x50F7FAB;  // softfab's CM Q_Key.
  static constexpr uint8_t kPort = 1;
  static constexpr size_t kBufferBytes = 1 << 17;
  static constexpr size_t kCmRecvSlots = 16;
  // GRH + datagram: room for datagrams larger than the CM's own slots.
  static constexpr size_t kCmSlotBytes = 40 + 2048;
  // Receives kept posted on the RC QP (in the upper half of buffer()), so
  // that what a peer sends it lands rather than waits on RNR forever.
  static constexpr size_t kRcRecvSlots = 8;
  static constexpr size_t kRcSlotBytes = 8192;
  static constexpr size_t kRcRecvOffset = kBufferBytes / 2;

  // Creates the objects on `device`; ok() says whether that worked.
  explicit RawPeer(transport::Device* device);
  bool ok() const { return ok_; }

  const wire::Name& name() const { return name_; }
  uint8_t* buffer() { return buffer_.data(); }
  uint32_t rkey() const { return mr_->rkey(); }
  uint32_t rc_qpn() const { return rc_->qp_num(); }
  // The word peers RDMA-write credit returns into: buffer()'s first 8
  // bytes (send from offset 64 on, or a credit return overwrites the data).
  uint64_t credit_word_address() const {
    return reinterpret_cast<uint64_t>(buffer_.data());
  }

  // Sends `len` bytes (at most kCmSlotBytes - 40) as a CM datagram to `to`.
  Status SendCm(const wire::Name& to, const uint8_t* bytes, size_t len);
  // A well-formed CM message of `type` from this peer (its RC QP, PSN and
  // credit word), for `request_id`, granting `credits`.
  wire::CmMessage Cm(wire::CmType type, uint64_t request_id,
                     uint32_t credits) const;
  // Polls the UD receive queue: the next datagram that decodes as a CM
  // message, reposting every slot it reads.
  bool ReceiveCm(wire::CmMessage* m);
  // Polls the UD receive queue: the bytes of the next CM datagram, whatever
  // they are (past the GRH), reposting every slot it reads.
  bool ReceiveDatagram(std::vector<uint8_t>* bytes);

  // The connection handshake of an RDM peer: a CM request to `to` granting
  // `credits`, `progress` run (the other side's progress) until its reply
  // comes (at most `rounds` times), then the RC QP connected to the QP it
  // names. The reply (its credit word's address and key) is left in *reply.
  Status Handshake(const wire::Name& to, uint32_t credits,
                   const std::function<void()>& progress, int rounds,
                   wire::CmMessage* reply);
  // Connects the RC QP to `remote_qpn`, whose first PSN is `remote_psn`
  // (RESET first, so that it can connect again after an error).
  Status ConnectRc(const wire::Name& to, uint32_t remote_qpn,
                   uint32_t remote_psn);
  // Puts the RC QP into ERROR (a peer that goes away mid-transfer).
  Status BreakRc();
  // Posts a SEND of `len` bytes from buffer() + offset on the RC QP.
  Status Send(size_t offset, size_t len);
  // Posts an RDMA WRITE of `len` bytes from buffer() + offset.
  Status Write(size_t offset, size_t len, uint64_t remote_addr, uint32_t rkey);
  // Reaps the send completions; returns how many were errors.
  int PollSends();
  // Reaps what arrived on the RC QP (reposting the receives); returns how
  // many messages did.
  int PollRcRecvs();

 private:
  Status PostCmRecv(uint32_t slot);
  Status PostRcRecv(uint32_t slot);
  // Polls the receive CQ once: a CM datagram decoded into *m (true), an RC
  // receive counted in *rc_messages; either slot reposted.
  bool PollRecv(wire::CmMessage* m, int* rc_messages, bool* empty);
  // One work request on the RC QP from buffer() + offset.
  Status Post(transport::WrOpcode opcode, size_t offset, size_t len,
              uint64_t remote_addr, uint32_t rkey);

  bool ok_ = false;
  transport::Device* device_;
  transport::ProtectionDomain* pd_ = nullptr;
  transport::CompletionQueue* send_cq_ = nullptr;
  transport::CompletionQueue* recv_cq_ = nullptr;
  transport::QueuePair* ud_ = nullptr;
  transport::QueuePair* rc_ = nullptr;
  std::vector<uint8_t> buffer_;  // Data: sends, READ source, credit word.
  std::vector<uint8_t> cm_;      // CM receive slots, then one send slot.
  transport::MemoryRegion* mr_ = nullptr;
  transport::MemoryRegion* cm_mr_ = nullptr;
  wire::Name name_;
  transport::PortAttr port_{};
  uint32_t psn_ = 0x3000;
  std::vector<uint8_t> last_datagram_;  // PollRecv's last CM datagram
  uint64_t next_request_id_ = 1;
};

}  // namespace softfab::fuzz

#endif  // SOFTFAB_TESTS_SUPPORT_RAW_PEER_H_
