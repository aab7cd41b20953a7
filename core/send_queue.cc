// A connection's send queue with selective signaling (UCX signals one send in
// 64; libfabric's verbs provider only what the application waits for): the
// work requests posted to a peer's RC QP are kept in order, most of them
// unsignaled, and a completion read retires the one it names and every one
// before it. An unsignaled send's op (its tx slot, its CQ reservation, its
// place under a fence) lives until then, so its end, and its error if it
// fails (a failed work request always completes), are reported as for a
// signaled one. Work that no later signaled post will retire is retired by a
// signaled credit write (a kick) when something waits for what it holds.
#include "core/endpoint.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

void Endpoint::SizeRing(Peer& p) {
  uint32_t size = 1;
  while (size < qp_send_depth()) size *= 2;
  p.sq_ring.assign(size, 0);
  p.sq_mask = size - 1;
}

void Endpoint::RetireThrough(uint32_t peer, uint64_t wr_id) {
  Peer& p = conns_[peer];
  while (p.sq_outstanding > 0) {
    const uint64_t front = p.sq_ring[p.sq_head];
    p.sq_head = (p.sq_head + 1) & p.sq_mask;
    --p.sq_outstanding;
    --send_cq_used_;
    if (front == wr_id) break;
    // Before the one completed, so done, and done well: an RC queue
    // completes in order, and a failed request always has a completion.
    OnSendWrDone(front, peer, 0, 0);
  }
  // A failure completes unsignaled work one by one (flushed): the run is at
  // most what is left.
  if (p.unsignaled_run > p.sq_outstanding) {
    unsignaled_total_ -= p.unsignaled_run - p.sq_outstanding;
    p.unsignaled_run = p.sq_outstanding;
  }
}

void Endpoint::OnSendWrDone(uint64_t wr_id, std::optional<uint32_t> from,
                            int status, int cause) {
  const uint64_t kind = KindOf(wr_id);
  const uint32_t index = static_cast<uint32_t>(IndexOf(wr_id));
  if (kind == kWrRead) {
    OnReadWrDone(index, cause);
  } else if (kind == kWrTx) {
    TxOp& op = tx_.op(index);
    op.send_done = true;
    if (status != 0) {
      CompleteTx(index, EIO, cause);
      if (op.peer != internal::kNil) --conns_[op.peer].in_flight;
      FreeTx(index);
      if (from) FailPeer(*from, EIO, cause);
    } else {
      MaybeFinishTx(index);
    }
  } else if (kind == kWrInject) {
    // PostInject's: its place in the tx table, its peer's count of work in
    // flight, and (at transmit level) its CQ reservation or error entry.
    tx_.Unlend();
    if (from) --conns_[*from].in_flight;
    if (index & kInjectHoldsEntry) {
      if (status == 0) {
        tx_cq_->Unreserve();
      } else {
        PushTxEntry(nullptr, kSend | ((index & kInjectTagged) ? kTagged : kMsg),
                    EIO, cause);
      }
    }
    if (status != 0 && from) FailPeer(*from, EIO, cause);
  }
  // Acks and credit writes hold nothing.
}

bool Endpoint::KickWanted() const {
  // A refusal here (tx slots, the send CQ's budget, a fence) set the flag;
  // the CQ's says whether a post of any endpoint bound to it was refused.
  // Acks, READs and credit write-backs refused for the send CQ's budget wait
  // without a flag: a budget this short asks too.
  return kick_wanted_ || !SendCqHasRoom() ||
         (tx_cq_ != nullptr && tx_cq_->refused());
}

void Endpoint::BeforeSleep() {
  // Parked, this process retires nothing, and a run of unsignaled sends
  // holds its tx slots and CQ reservations until then: Open MPI's clean
  // `mpirun -n 4` of tests/libfabric/mpi_ring.c on the shared simulator took
  // 3,030 ms of virtual time without this, against 1,151 ms when every send
  // was signaled, and 1,018 ms with it.
  if (unsignaled_total_ > 0) KickUnsignaled();
}

bool Endpoint::Kick(uint32_t peer) {
  Peer& p = conns_[peer];
  if (p.sq_outstanding >= qp_send_depth() || send_cq_used_ >= send_cq_room_) {
    return false;  // the kicks' reserve included
  }
  Credits::WriteTarget t;
  t.credits = &p.credits;
  t.qp = p.qp;
  t.wr_id = Sequenced(p, WrId(kWrCredit, peer));
  t.signaled = true;
  // A kick writes the credits back too: every buffer freed is on the SRQ
  // first (Endpoint::Repost). Only deferred ones: a simulator's batch chain
  // (a peer may fail in the middle of one) is posted where it always was.
  if (attr_.defer_reposts) FlushReposts();
  if (!conns_.credits().PostWrite(peer, t)) return false;
  ++stats_.kicks;
  Posted(p, t.wr_id, true);
  return true;
}

void Endpoint::RetireUnsignaledOf(uint32_t peer) {
  if (conns_[peer].unsignaled_run > 0) (void)Kick(peer);
}

void Endpoint::KickUnsignaled() {
  kick_wanted_ = false;
  // Rare (a run is at most signal_every() - 1 requests, and only a refused
  // post or a waiting fence asks): a pass over the peers.
  for (uint32_t i = 0; i < conns_.size() && unsignaled_total_ > 0; ++i) {
    Peer& p = conns_[i];
    if (p.unsignaled_run > 0 && CanSend(p)) (void)Kick(i);
  }
}

}  // namespace softfab::core
