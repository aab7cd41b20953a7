// sfv_* completion channels (ibv_create_comp_channel, ibv_req_notify_cq,
// ibv_get_cq_event, ibv_ack_cq_events, ibv_destroy_comp_channel) over the
// transport's CompletionChannel. The fd handed out is an epoll fd watching the
// transport's always-non-blocking fd, so the caller's O_NONBLOCK on it decides
// whether sfv_get_cq_event waits. Waiting goes through the context's backend
// (transport::Backend::Wait: a simulated fabric is run, a real device slept
// on); sfv_wait_comp_channels is the same wait over several channels.
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "api/softfab/verbs.h"
#include "api/verbs/internal/verbs_objects.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs_internal {

namespace {

// A blocking sfv_get_cq_event wakes at most this many times looking for an
// event (on the simulator a wake is one fabric event, and a QP retrying for
// ever never lets the fabric idle).
constexpr uint64_t kWakesPerGetMax = uint64_t{1} << 20;

int FailMinusOne(int code, const char* why) {
  SetError(code, why);
  return -1;
}

// Waits once on the context's backend until `channels` may have an event
// (before `deadline_ns`); false, errno set, when none can come (the simulated
// fabric ran out of events) or a signal interrupted the sleep.
bool WaitOnce(SfvContext* c, tp::CompletionChannel* const* channels,
              size_t count, uint64_t deadline_ns) {
  const tp::WaitSet set{channels, count};
  switch (c->backend->Wait(set, deadline_ns, nullptr)) {
    case tp::WaitResult::kWoken:
      return true;
    case tp::WaitResult::kIdle:
      SetError(EAGAIN,
               "the simulated fabric ran out of events before a channel got "
               "one: nothing can raise it");
      return false;
    case tp::WaitResult::kInterrupted:
      SetError(EINTR, "interrupted by a signal");
      return false;
  }
  return false;
}

// Whether the transport channel has an event to take (its fd is readable),
// without taking it.
bool HasEvent(const ChannelImpl* ch) {
  pollfd p{ch->channel->fd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

}  // namespace

// The sfv_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/verbs.h declares.
extern "C" {

sfv_comp_channel* sfv_create_comp_channel(sfv_context* context) {
  if (context == nullptr || !Ctx(context)->open) {
    return Fail<sfv_comp_channel>(EINVAL, "context is NULL or closed");
  }
  SfvContext* c = Ctx(context);
  auto ch = std::make_unique<ChannelImpl>();
  ch->context = context;
  ch->refcnt = 0;
  ch->fd = epoll_create1(EPOLL_CLOEXEC);
  if (ch->fd < 0) return Fail<sfv_comp_channel>(errno, "epoll_create1 failed");
  auto r = c->dev->CreateCompChannel();
  if (!r.ok()) return Fail<sfv_comp_channel>(r.status());
  ch->channel = *r;
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(ch->fd, EPOLL_CTL_ADD, ch->channel->fd(), &ev) != 0) {
    const int code = errno;
    (void)ch->channel->Destroy();
    return Fail<sfv_comp_channel>(code, "epoll_ctl failed");
  }
  ChannelImpl* raw = ch.get();
  c->channel_objs[raw] = std::move(ch);
  ++c->channels;
  return raw;
}

int sfv_destroy_comp_channel(sfv_comp_channel* channel) {
  if (channel == nullptr) return EINVAL;
  SfvContext* c = Ctx(channel->context);
  auto it = c->channel_objs.find(channel);
  if (it == c->channel_objs.end()) return EINVAL;
  if (channel->refcnt != 0) return EBUSY;
  const softfab::Status s = it->second->channel->Destroy();
  if (!s.ok()) return Err(s);
  c->channel_objs.erase(it);  // closes the epoll fd
  --c->channels;
  return 0;
}

int sfv_req_notify_cq(sfv_cq* cq, int solicited_only) {
  if (cq == nullptr) return EINVAL;
  return Err(static_cast<CqImpl*>(cq)->cq->RequestNotify(solicited_only != 0));
}

int sfv_get_cq_event(sfv_comp_channel* channel, sfv_cq** cq,
                     void** cq_context) {
  if (channel == nullptr || cq == nullptr || cq_context == nullptr) {
    return FailMinusOne(EINVAL, "channel, cq or cq_context is NULL");
  }
  auto* ch = static_cast<ChannelImpl*>(channel);
  const int flags = fcntl(ch->fd, F_GETFL);
  const bool may_wait = flags >= 0 && (flags & O_NONBLOCK) == 0;
  SfvContext* c = Ctx(channel->context);
  tp::CompletionQueue* raised = nullptr;
  uint64_t wakes = 0;
  while (true) {
    const softfab::Status s = ch->channel->GetEvent(&raised);
    if (s.ok()) break;
    if (s.code() != EAGAIN) return FailMinusOne(s.code(), s.message());
    if (!may_wait) return FailMinusOne(EAGAIN, "no completion event pending");
    if (wakes++ >= kWakesPerGetMax) {
      return FailMinusOne(EAGAIN, "no event came: nothing raised the channel");
    }
    if (!WaitOnce(c, &ch->channel, 1, UINT64_MAX)) return -1;
  }
  CqImpl* found = nullptr;
  {
    std::lock_guard<std::mutex> lock(ch->mu);
    auto it = ch->cqs.find(raised);
    if (it != ch->cqs.end()) found = it->second;
  }
  if (found == nullptr) {
    // Cannot happen: destroying a CQ drops its events not yet taken.
    return FailMinusOne(EIO, "an event for a CQ this channel does not know");
  }
  *cq = found;
  *cq_context = found->cq_context;
  return 0;
}

void sfv_ack_cq_events(sfv_cq* cq, unsigned int nevents) {
  if (cq == nullptr) return;
  static_cast<CqImpl*>(cq)->cq->AckEvents(nevents);
}

int sfv_wait_comp_channels(sfv_comp_channel** channels, int count,
                           int timeout_ms) {
  constexpr int kChannelsMax = 1024;
  if (channels == nullptr || count <= 0 || count > kChannelsMax) {
    return FailMinusOne(EINVAL, "channels must hold 1 to 1024 channels");
  }
  std::vector<tp::CompletionChannel*> transport(count);
  SfvContext* first = nullptr;
  for (int i = 0; i < count; ++i) {
    if (channels[i] == nullptr || channels[i]->context == nullptr) {
      return FailMinusOne(EINVAL, "a channel is NULL");
    }
    SfvContext* c = Ctx(channels[i]->context);
    if (c->channel_objs.count(channels[i]) == 0) {
      return FailMinusOne(EINVAL, "a channel is destroyed or not a channel");
    }
    if (first == nullptr) first = c;
    if (c->backend != first->backend) {
      return FailMinusOne(EINVAL,
                          "the channels come from different device lists or "
                          "fabrics: one wait cannot watch them all");
    }
    transport[i] = static_cast<ChannelImpl*>(channels[i])->channel;
  }
  const uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX
                     : first->backend->clock().NowNs() +
                           static_cast<uint64_t>(timeout_ms) * 1'000'000;
  while (true) {
    int ready = 0;
    for (int i = 0; i < count; ++i) {
      ready += HasEvent(static_cast<ChannelImpl*>(channels[i])) ? 1 : 0;
    }
    if (ready > 0) return ready;
    if (deadline != UINT64_MAX && first->backend->clock().NowNs() >= deadline) {
      return 0;
    }
    if (!WaitOnce(first, transport.data(), transport.size(), deadline)) {
      return -1;
    }
  }
}

}  // extern "C"

}  // namespace softfab::verbs_internal
