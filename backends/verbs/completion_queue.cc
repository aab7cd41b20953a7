// Completion queues and completion channels over ibv_cq / ibv_comp_channel:
// polling into a stack batch, arming, taking and acking channel events.
#include <algorithm>
#include <cerrno>

#include "backends/verbs/internal/errors.h"
#include "backends/verbs/internal/objects.h"
#include "backends/verbs/internal/translate.h"

namespace softfab::verbs::internal {

namespace {

// ibv_wc entries polled per ibv_poll_cq call (on the stack).
constexpr int kPollBatch = 16;

}  // namespace

int Cq::Poll(int num_entries, transport::WorkCompletion* wc) {
  if (num_entries < 0 || (num_entries > 0 && wc == nullptr)) return -EINVAL;
  ibv_wc batch[kPollBatch];
  int done = 0;
  while (done < num_entries) {
    const int want = std::min(kPollBatch, num_entries - done);
    const int n = ibv_poll_cq(cq_, want, batch);
    if (n < 0) {
      // Completions already taken must not be lost: report them first.
      return done > 0 ? done : -EIO;
    }
    for (int i = 0; i < n; ++i) ToWorkCompletion(batch[i], &wc[done + i]);
    done += n;
    if (n < want) break;
  }
  return done;
}

Status Cq::RequestNotify(bool solicited_only) {
  Status s = FromReturn(ibv_req_notify_cq(cq_, solicited_only ? 1 : 0),
                        "ibv_req_notify_cq failed");
  if (s.ok() && !solicited_only) armed_.store(true);
  return s;
}

Status Cq::Rearm() {
  if (armed_.load()) return Status::Ok();
  return RequestNotify(false);
}

void Cq::AckEvents(uint32_t n) {
  // Acking more than were taken would make ibv_destroy_cq wait forever.
  uint32_t unacked = events_unacked_.load();
  uint32_t take = 0;
  do {
    take = std::min(n, unacked);
  } while (take > 0 &&
           !events_unacked_.compare_exchange_weak(unacked, unacked - take));
  if (take > 0) ibv_ack_cq_events(cq_, take);
}

void Cq::AckAllEvents() { AckEvents(events_unacked_.load()); }

Status Cq::Destroy() {
  return device()->Release(
      this,
      [this] {
        // ibv_destroy_cq blocks until every event taken is acked.
        return events_unacked_.load() > 0 ? EBUSY : ibv_destroy_cq(cq_);
      },
      "CQ still used by a QP, or channel events taken for it are not acked",
      "ibv_destroy_cq failed");
}

Status Channel::GetEvent(transport::CompletionQueue** cq) {
  if (cq == nullptr) return InvalidArgument("cq is null");
  *cq = nullptr;
  ibv_cq* ibv = nullptr;
  void* context = nullptr;
  if (ibv_get_cq_event(channel_, &ibv, &context) != 0) {
    const int code = ErrnoOrFallback(EIO);
    if (code == EAGAIN || code == EWOULDBLOCK) {
      return TryAgain("no completion event pending");
    }
    return Status(code, "ibv_get_cq_event failed");
  }
  auto* ours = static_cast<Cq*>(context);
  ours->CountEvent();
  *cq = ours;
  return Status::Ok();
}

Status Channel::Destroy() {
  return device()->Release(
      this, [this] { return ibv_destroy_comp_channel(channel_); },
      "channel still used by a CQ", "ibv_destroy_comp_channel failed");
}

}  // namespace softfab::verbs::internal
