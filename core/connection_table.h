// The connection table of an endpoint (rxm's connection map and rxm_conn;
// UCX's ucp_ep per remote worker): one Peer per endpoint it talks to, found
// by name, by the QP number of its RC connection and by AV index; the state
// of each connection (wireup, FI_EP_MSG connection state, what waits on it);
// the busy list progress looks at beyond the CQs; the connection manager's
// datagram channel (core/cm_channel.h) and an FI_EP_MSG endpoint's connection
// life (MsgConnection); and the credit words of every connection
// (core/credits.h). The wireup protocol that fills it is the
// endpoint's (wireup.cc, msg_connection.cc). Entries are never removed (an
// FI_EP_MSG listener reuses them), so a peer's index stays valid. Not
// thread-safe (the endpoint's owner serialises).
#ifndef SOFTFAB_CORE_CONNECTION_TABLE_H_
#define SOFTFAB_CORE_CONNECTION_TABLE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/address_vector.h"
#include "core/cm_channel.h"
#include "core/credits.h"
#include "core/event_queue.h"
#include "core/wire.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::core {

class ConnectionTable {
 public:
  enum class PeerState : uint8_t { kIdle, kConnecting, kConnected, kFailed };
  struct Peer {
    wire::Name name;
    // SourceOf's answer, valid while the AV's generation is unchanged.
    mutable uint64_t source = 0;
    mutable uint64_t source_generation = ~uint64_t{0};
    PeerState state = PeerState::kIdle;
    // The far QP can receive. The side that accepts a connection learns it
    // from the first message the peer sends on it (the IB CM's ready-to-use);
    // sending earlier would hit a QP still in INIT and wait an ack timeout.
    bool ready = false;
    transport::QueuePair* qp = nullptr;
    // Its number once connected (0: none), and the previous connection's,
    // whose arrivals not yet taken are that connection's (OnBounce).
    uint32_t qpn = 0;
    uint32_t old_qpn = 0;
    transport::AddressHandle* ah = nullptr;  // For CM datagrams to it.
    uint32_t psn = 0;
    uint64_t request_id = 0;   // Our outstanding CM request.
    uint64_t answered_id = 0;  // Their request we replied to.

    // The peer's QP and initial PSN of the last connection (kept after it
    // fails, so that a late CM request of that connection is known).
    uint32_t remote_qpn = 0;
    uint32_t remote_psn = 0;
    // Connecting: the next CM retry. Accepted and not yet ready: when the
    // peer counts as gone if it has not spoken (sends waiting).
    uint64_t retry_at_ns = 0;
    bool deadline_armed = false;  // That deadline has a wakeup scheduled.
    uint32_t retries = 0;
    PeerCredits credits;
    uint32_t peer_buffered_min = 0;  // Its FI_OPT_BUFFERED_MIN.
    // A listener's entry: the request it reported (to see it decided) and
    // when the connector was last heard from.
    std::shared_ptr<const ConnRequest> request;
    uint64_t last_heard_ns = 0;
    // Work requests posted to the QP and not yet known complete. They are
    // kept in order (send_queue.cc): a ring of their wr_ids, sized for the
    // QP's depth when it is made, oldest at sq_head; a completion read for
    // one retires it and every one before it, which succeeded unsignaled
    // (an RC send queue completes in order). `unsignaled_run` of the newest
    // are unsignaled with no signaled one after them: nothing retires those
    // until the next signaled post (or a kick, KickUnsignaled).
    uint32_t sq_outstanding = 0;
    std::vector<uint64_t> sq_ring;
    uint32_t sq_mask = 0;  // sq_ring.size() - 1 (a power of two)
    uint32_t sq_head = 0;
    uint32_t sq_seq = 0;
    uint32_t unsignaled_run = 0;
    std::deque<uint32_t> waiting;  // Tx ops queued (connecting, fence).
    uint32_t in_flight = 0;        // Tx ops posted and not yet finished.
    // RDM: a connection attempt that failed (the peer never answered) is
    // not made again before this time (wireup.cc, CanReconnect), so sends
    // to a peer that is gone are refused instead of each trying anew.
    uint64_t reconnect_after_ns = 0;
    int failed_err = 0;         // Why the peer failed (kFailed),
    int failed_prov_errno = 0;  // and its cause (core/prov_errno.h).
    // Acks and read-dones waiting for a credit: (op, msg id).
    std::deque<std::pair<wire::Op, uint64_t>> acks;
    std::deque<uint32_t> reads_waiting;  // READs waiting for send queue room.
    // Unexpected messages from this peer whose credit went back at once. Past
    // `credits` of them a buffered message keeps its credit until a receive
    // takes it: the sender is throttled and memory stays bounded.
    uint32_t unexpected_buffered = 0;
    // Those whose credit is withheld. An honest peer cannot have more than
    // `credits` of them (it has no credit left to send one more); a message
    // past that comes from a peer that ignores credits and is dropped.
    uint32_t unexpected_withheld = 0;
    // Those kept from the connection before this one (ResetPeer).
    uint32_t unexpected_stale = 0;
    // Which connection to the peer this is (ResetPeer counts it up). What
    // the receive context keeps of a connection, its unexpected messages,
    // names it: an ack, a READ or a credit of an old connection's never
    // goes to a new one, whose message ids and keys name other operations.
    uint32_t epoch = 0;
    bool listed = false;  // On the busy list (MarkBusy).
  };

  // Room for `peers_max` peers (a Peer& stays valid while peers are added).
  void Reserve(uint32_t peers_max) { peers_.reserve(peers_max); }
  uint32_t size() const { return static_cast<uint32_t>(peers_.size()); }
  bool empty() const { return peers_.empty(); }
  Peer& operator[](uint32_t peer) { return peers_[peer]; }
  const Peer& operator[](uint32_t peer) const { return peers_[peer]; }
  auto begin() { return peers_.begin(); }
  auto end() { return peers_.end(); }

  // ---- Lookup ----
  std::optional<uint32_t> Find(const wire::Name& name) const {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return std::nullopt;
    return it->second;
  }
  // The peer named `name`, added (idle) when there is none.
  uint32_t FindOrAdd(const wire::Name& name);
  // Entry `peer` now stands for `name` (a listener's reused entry, the
  // accepting endpoint that answers in the listener's place).
  void Rename(uint32_t peer, const wire::Name& name);
  // Forgets every peer (an FI_EP_MSG accept that failed; nothing was
  // connected).
  void Clear();
  // The peer whose RC connection is QP `qp_num` (once connected).
  // The last answer is kept: completions come in runs from one connection.
  std::optional<uint32_t> ByQpn(uint32_t qp_num) const {
    if (qp_num == last_qpn_ && last_qpn_valid_) return last_peer_;
    const size_t i = QpnSlot(qp_num);
    if (i == by_qpn_.size() || by_qpn_[i].qpn != qp_num) return std::nullopt;
    last_qpn_ = qp_num;
    last_peer_ = by_qpn_[i].peer;
    last_qpn_valid_ = true;
    return last_peer_;
  }
  void SetQpn(uint32_t qp_num, uint32_t peer);
  // Forgets `qp_num` if it still names `peer`'s QP (a device may have given
  // the number to another peer's QP since).
  void ForgetQpn(uint32_t qp_num, uint32_t peer);
  // The peer at AV index `dest` of `av`, added when the AV names an endpoint
  // not in the table (NoMemory past `peers_max`); cached while the AV is
  // unchanged.
  StatusOr<uint32_t> ForDest(const AddressVector& av, uint64_t dest,
                             uint32_t peers_max);
  // The source address of messages from `peer`: its index in `av`, or
  // UnknownSource(peer) (core/rx_context.h) while `av` (or no AV) holds it.
  uint64_t SourceOf(const AddressVector* av, uint32_t peer) const;

  // ---- The busy list: peers with queued work (sends, acks, READs) or
  // connecting, in the order they joined ----
  void MarkBusy(uint32_t peer) {
    Peer& p = peers_[peer];
    if (!p.listed) {
      p.listed = true;
      busy_.push_back(peer);
    }
  }
  const std::vector<uint32_t>& busy() const { return busy_; }
  // Runs `work(peer)` on each busy peer in order (peers it marks busy are
  // run too); one for which it returns false leaves the list.
  template <typename Work>
  void SweepBusy(Work work) {
    size_t kept = 0;
    for (size_t k = 0; k < busy_.size(); ++k) {
      const uint32_t i = busy_[k];
      if (work(i)) {
        busy_[kept++] = i;
      } else {
        peers_[i].listed = false;
      }
    }
    busy_.resize(kept);
  }

  // ---- Wireup ----
  // The CM's datagram slots and sequences (wireup.cc, msg_connection.cc).
  CmChannel& cm() { return cm_; }
  // FI_EP_MSG: the one connection's life beyond its Peer entry
  // (msg_connection.cc).
  struct MsgConnection {
    bool accepted = false;                // This side accepted (waits for RTU).
    bool connected_reported = false;      // kEqConnected written.
    bool shutdown = false;                // fi_shutdown called.
    bool peer_shutdown_reported = false;  // The peer's crossing kDisconnect.
    bool disconnect_pending = false;      // Our kDisconnect not yet answered.
    uint8_t cm_data[wire::kCmDataMax] = {};  // Private data we send.
    uint8_t cm_data_len = 0;
  };
  MsgConnection& msg() { return msg_; }
  const MsgConnection& msg() const { return msg_; }

  // ---- Credits ----
  Credits& credits() { return credits_; }
  const Credits& credits() const { return credits_; }
  uint64_t AvailableCredits(const Peer& peer) const {
    const uint32_t index = static_cast<uint32_t>(&peer - peers_.data());
    return credits_.Available(peer.credits, index);
  }
  // One of `peer`'s buffers here is free again.
  void ReturnCredit(uint32_t peer) {
    credits_.Return(peers_[peer].credits, peer);
  }

 private:
  std::vector<Peer> peers_;
  std::map<wire::Name, uint32_t> by_name_;
  // QP number -> peer, sorted by QP number: a lookup is a binary search over
  // one array (a connection is made or reset far more rarely than a
  // completion arrives, so an insertion may move the entries after it).
  struct QpnEntry {
    uint32_t qpn;
    uint32_t peer;
  };
  // The first entry whose QP number is not below `qp_num` (size() if none),
  // by a search whose steps do not branch on the comparison.
  size_t QpnSlot(uint32_t qp_num) const {
    const QpnEntry* base = by_qpn_.data();
    size_t n = by_qpn_.size();
    if (n == 0) return 0;
    while (n > 1) {
      const size_t half = n / 2;
      base = base[half - 1].qpn < qp_num ? base + half : base;
      n -= half;
    }
    return static_cast<size_t>(base - by_qpn_.data()) + (base->qpn < qp_num);
  }
  std::vector<QpnEntry> by_qpn_;
  mutable uint32_t last_qpn_ = 0;  // ByQpn's last answer
  mutable uint32_t last_peer_ = 0;
  mutable bool last_qpn_valid_ = false;
  std::vector<uint32_t> of_dest_;  // AV index -> peer (kNil: unknown).
  uint64_t of_dest_generation_ = ~uint64_t{0};
  std::vector<uint32_t> busy_;
  CmChannel cm_;
  MsgConnection msg_;
  Credits credits_;
};

// A connection that can take a send now: connected, and the far QP ready.
inline bool CanSend(const ConnectionTable::Peer& p) {
  return p.state == ConnectionTable::PeerState::kConnected && p.ready;
}

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_CONNECTION_TABLE_H_
