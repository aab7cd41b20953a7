// Progress (rxm_cq.c's progress; manual progress, run by CQ reads): reads the
// device's asynchronous events when due (core/async_events.h), polls the
// receive CQ while the user's receive CQ has room, then the send CQ (on a
// device not every time: SendCqWorthALook), and dispatches each completion;
// then the timers, the credit write-backs due and the queued work of the
// peers on the busy list.
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

void Endpoint::Progress() {
  // When one is pending, where the device can tell cheaply (a simulator),
  // else at most once per millisecond of its clock, looked at once in 64
  // calls (AsyncEventDispatcher::Poll): otherwise a look at a
  // flag or the clock is all it costs.
  if (attr_.async_events != nullptr) attr_.async_events->Poll();
  // A member array: a local one would be zeroed on every call.
  tp::WorkCompletion* wc = wc_.data();
  // Receives first: they return credits and acks that sends wait for.
  // Nothing is ever lost to a full CQ: a message that may write an entry no
  // operation reserved (into a multi-recv buffer, or a buffered receive's
  // report) is only taken when the receive CQ has room for it; until then it
  // waits in held_, with its bounce buffer, and those behind it wait too.
  // Everything else goes on: a CQ whose room is all promised to posted
  // operations must not stop the CM replies, acks and messages that complete
  // them (it did: a CQ of 4 with two receives and two sends posted never
  // connected). DGRAM arrivals all take the room test.
  if (!rx_unposted_.empty()) {  // The SRQ refused them once: try again.
    std::vector<uint32_t> again;
    again.swap(rx_unposted_);
    for (uint32_t index : again) RepostOrKeep(index);
  }
  // Messages kept for a multi-recv buffer that ran out of room go before
  // any arrival.
  if (rx_->backlogged()) [[unlikely]] {
    rx_->DrainBacklog();
  }
  while (!held_.empty() && !ArrivalWaitsForRoom(held_.front())) {
    const tp::WorkCompletion held = held_.front();
    held_.pop_front();
    OnBounce(held);
  }
  // In batches (a DGRAM one no larger than the room), until the CQ is empty.
  while (true) {
    int want = kPollBatch;
    if (attr_.type == EndpointType::kDgram && rx_cq_ != nullptr) {
      want = static_cast<int>(std::min<size_t>(kPollBatch, rx_cq_->room()));
      if (want == 0) break;
    }
    const int n = recv_cq_->Poll(want, wc);
    if (n <= 0) {
      // Nothing arrived: time to put deferred buffers back (Repost).
      FlushReposts();
      break;
    }
    repost_later_ = attr_.defer_reposts || n > 1;
    for (int i = 0; i < n; ++i) {
      const uint64_t kind = KindOf(wc[i].wr_id);
      if (kind == kWrRxBounce) {
        if (!held_.empty() ||
            (rx_->ArrivalsMayNeedRoom() && ArrivalWaitsForRoom(wc[i]))) {
          held_.push_back(wc[i]);
        } else {
          OnBounce(wc[i]);
        }
      } else if (kind == kWrDgramRecv) {
        OnDgram(wc[i]);
      } else if (kind == kWrCmRecv) {
        const uint8_t* msg = nullptr;
        size_t len = 0;
        if (conns_.cm().Received(wc[i], &msg, &len)) OnCm(msg, len);
        conns_.cm().Repost(wc[i]);
      }
    }
    if (!attr_.defer_reposts) {
      repost_later_ = false;
      FlushReposts();
    }
    if (n < want && polls_only_read_) break;  // It was empty.
  }
  if (SendCqWorthALook()) PollSendCq(wc);
  if (unsignaled_total_ > 0 && KickWanted()) KickUnsignaled();
  // Timers and queued work only concern the peers on the busy list (in the
  // order they joined it), so an idle connection costs progress nothing.
  if (conns_.busy().empty() && !conns_.msg().accepted &&
      !conns_.msg().disconnect_pending && !conns_.credits().writes_due()) {
    return;
  }
  const uint64_t now = device_->clock().NowNs();
  RetryConnects(now);
  if (attr_.type == EndpointType::kMsg) MsgTimers(now);
  FlushCreditWrites();
  // Acks and sends that waited for a connection or a credit. A peer leaves
  // the busy list once it has nothing queued and is not connecting.
  conns_.SweepBusy([&](uint32_t i) {
    Peer& p = conns_[i];
    while (!p.acks.empty() &&
           PostAck(i, p.acks.front().second, p.acks.front().first).ok()) {
      p.acks.pop_front();
    }
    while (!p.reads_waiting.empty() && ReadOrFail(p.reads_waiting.front())) {
      p.reads_waiting.pop_front();
    }
    while (CanSend(p) && !p.waiting.empty() && conns_.AvailableCredits(p) > 0 &&
           p.sq_outstanding < peer_send_budget() && SendCqHasRoom()) {
      const uint32_t index = p.waiting.front();
      // A fenced send goes once everything before it to this peer is done.
      if (tx_.op(index).fenced && p.in_flight > 0) {
        kick_wanted_ = true;  // What it waits for may be unsignaled.
        break;
      }
      if (!PostTx(index).ok()) break;
      p.waiting.pop_front();
    }
    return p.state == PeerState::kConnecting || !p.acks.empty() ||
           !p.reads_waiting.empty() || !p.waiting.empty();
  });
}

void Endpoint::PollSendCq(tp::WorkCompletion* wc) {
  while (true) {
    const int n = send_cq_->Poll(kPollBatch, wc);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const uint64_t wr_id = wc[i].wr_id;
      if (KindOf(wr_id) == kWrCmSend) {
        conns_.cm().SendDone(wr_id);  // its slot may be written again
        if (conns_.cm().sends_in_flight() == 0) DestroyRetiredAhs();
        continue;
      }
      // Every other completion on this CQ is one the budget counted: a
      // connection's retires the unsignaled work before it too.
      const std::optional<uint32_t> from = conns_.ByQpn(wc[i].qp_num);
      if (from) {
        RetireThrough(*from, wr_id);
      } else {
        --send_cq_used_;  // DGRAM, on the UD QP.
      }
      // A failed work request's cause is its own status, as the transport
      // reported it (a flushed one says WR_FLUSH_ERR: the first error
      // completion of that connection names why it failed), unless the
      // device's events say more (Explain: a QP fatal, the port down).
      const int status = static_cast<int>(wc[i].status);
      const int cause = status != 0 && from ? Explain(*from, status) : status;
      OnSendWrDone(wr_id, from, status, cause);
    }
    if (n < kPollBatch && polls_only_read_) break;
  }
}

bool Endpoint::SendCqWorthALook() {
  // Every time where a poll runs the fabric (the simulators), or while
  // signaled work or the CM's sends are out. Otherwise the CQ can only hold
  // the flushed completions of a failed QP's unsignaled work (a ping-pong of
  // injects, most of the time): looked for once in kQuietSendCqLooks calls,
  // and right after the CQs are armed (an entry there before the arming
  // raises no event).
  if (polls_only_read_ && send_cq_used_ == unsignaled_total_ &&
      conns_.cm().sends_in_flight() == 0 &&
      ++quiet_send_cq_skips_ < kQuietSendCqLooks) {
    return false;
  }
  quiet_send_cq_skips_ = 0;
  return true;
}

void Endpoint::FlushCreditWrites() {
  // A write-back returns every buffer freed so far (Endpoint::Repost).
  if (conns_.credits().writes_due()) FlushReposts();
  conns_.credits().FlushWrites(
      [&](uint32_t peer) {
        Peer& p = conns_[peer];
        Credits::WriteTarget t;
        if (!CanSend(p) || p.sq_outstanding >= qp_send_depth() ||
            !SendCqHasRoom()) {
          return t;
        }
        t.credits = &p.credits;
        t.qp = p.qp;
        t.wr_id = Sequenced(p, WrId(kWrCredit, peer));
        t.signaled = MustSignal(p, /*awaited=*/false);
        return t;
      },
      [&](uint32_t peer, const Credits::WriteTarget& t) {
        ++stats_.credit_writes;
        Posted(conns_[peer], t.wr_id, t.signaled);
      });
}

Status Endpoint::ArmCompletions() {
  if (attr_.channel == nullptr) {
    return InvalidArgument("the endpoint has no completion channel");
  }
  if (Status s = send_cq_->Rearm(); !s.ok()) return s;
  quiet_send_cq_skips_ = kQuietSendCqLooks;  // the next call looks
  return recv_cq_->Rearm();
}

}  // namespace softfab::core
