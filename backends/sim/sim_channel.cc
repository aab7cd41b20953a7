// Completion channels (ibv_create_comp_channel, ibv_create_cq with a channel,
// ibv_req_notify_cq, ibv_get_cq_event, ibv_ack_cq_events,
// ibv_destroy_comp_channel), with rxe's notify rules (rxe_cq.c,
// rxe_req_notify_cq) and the kernel's event file (uverbs): one event per arm,
// queued in the order completions fired them, the fd readable while any is
// queued. The fd is only a readiness signal: what is queued, and when, follows
// from the events the fabric runs, so runs stay deterministic.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstdint>
#include <memory>

#include "backends/sim/internal/fabric.h"

namespace softfab::sim::internal {

ChannelImpl::~ChannelImpl() { close(fd_); }

StatusOr<CompletionChannel*> DeviceImpl::CreateCompChannel() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Status(errno, "eventfd failed");
  const uint32_t index = static_cast<uint32_t>(channels_.size());
  channels_.push_back(std::make_unique<ChannelImpl>(this, index, fd));
  return static_cast<CompletionChannel*>(channels_.back().get());
}

StatusOr<CompletionQueue*> DeviceImpl::CreateCqOnChannel(
    int32_t cqe, CompletionChannel* channel) {
  if (channel == nullptr) return CreateCq(cqe);
  // Found by identity among this device's live channels, so a channel of
  // another device (or a destroyed one) is refused rather than trusted.
  ChannelImpl* ch = nullptr;
  for (const std::unique_ptr<ChannelImpl>& c : channels_) {
    if (c.get() == channel) ch = c.get();
  }
  if (ch == nullptr) return InvalidArgument("channel of another device");
  StatusOr<CompletionQueue*> cq = CreateCq(cqe);
  if (!cq.ok()) return cq;
  static_cast<CqImpl*>(*cq)->channel_ = ch;
  ++ch->refs_;
  return cq;
}

Status CqImpl::RequestNotify(bool solicited_only) {
  // rdma-core arms a CQ without a channel too; its events go nowhere (the
  // kernel's completion handler has no event file to queue them on).
  if (channel_ == nullptr) return Status::Ok();
  // ORed, as rxe does: an arm for any completion is not narrowed by a later
  // solicited-only arm, and arming twice before the event gives one event.
  notify_ |= solicited_only ? kArmSolicited : kArmNextCompletion;
  return Status::Ok();
}

// `solicited` is rxe's: the SE bit of the packet behind a receive completion.
// ibv_req_notify_cq(3) also counts every error completion as solicited; rxe
// does not, and neither does the simulator (see README.md).
void CqImpl::Notify(bool solicited) {
  assert(channel_ != nullptr && notify_ != 0);
  if ((notify_ & kArmNextCompletion) == 0 && !solicited) return;
  notify_ = 0;
  channel_->Raise(this);
}

void CqImpl::AckEvents(uint32_t n) {
  events_unacked_ -= n < events_unacked_ ? n : events_unacked_;
}

void ChannelImpl::Raise(CqImpl* cq) {
  if (pending_.empty()) {
    [[maybe_unused]] const int rc = eventfd_write(fd_, 1);
    assert(rc == 0);
  }
  pending_.push_back(cq);
}

void ChannelImpl::DrainFd() {
  eventfd_t count = 0;
  [[maybe_unused]] const int rc = eventfd_read(fd_, &count);
  assert(rc == 0 && count == 1);
}

Status ChannelImpl::GetEvent(CompletionQueue** cq) {
  if (cq == nullptr) return InvalidArgument("cq is null");
  if (pending_.empty()) return TryAgain("no completion event pending");
  CqImpl* c = pending_.front();
  pending_.pop_front();
  ++c->events_unacked_;
  *cq = c;
  if (pending_.empty()) DrainFd();
  return Status::Ok();
}

void ChannelImpl::Forget(const CqImpl* cq) {
  if (pending_.empty()) return;
  std::erase(pending_, cq);
  if (pending_.empty()) DrainFd();
}

Status ChannelImpl::Destroy() {
  if (refs_ != 0) return Busy("channel still used by a CQ");
  dev_->channels_[index_].reset();  // deletes this, closing the fd
  return Status::Ok();
}

}  // namespace softfab::sim::internal
