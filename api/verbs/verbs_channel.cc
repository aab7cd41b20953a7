// sfv_* completion channels (ibv_create_comp_channel, ibv_req_notify_cq,
// ibv_get_cq_event, ibv_ack_cq_events, ibv_destroy_comp_channel) over the
// transport's CompletionChannel. The fd handed out is an epoll fd watching the
// transport's always-non-blocking fd, so the caller's O_NONBLOCK on it decides
// whether sfv_get_cq_event waits; how it waits depends on the backend (a
// simulated fabric is run, a real device slept on).
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>

#include "api/verbs/internal/verbs_objects.h"
#include "api/softfab/verbs.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs_internal {

namespace {

// A blocking sfv_get_cq_event on the simulator runs at most this many fabric
// events looking for one (a QP retrying forever never lets the fabric idle).
constexpr uint64_t kSimEventsPerGetMax = uint64_t{1} << 20;

int FailMinusOne(int code, const char* why) {
  SetError(code, why);
  return -1;
}

// Waits until the transport channel may have an event: on the simulator by
// running one fabric event (false when none is left, or after the bound), on
// a real device by sleeping in poll(2) (false, errno set, if interrupted).
bool WaitForEvent(SfvContext* c, ChannelImpl* ch, uint64_t* sim_events) {
  if (c->fabric != nullptr) {
    if (*sim_events >= kSimEventsPerGetMax ||
        c->fabric->sim->RunUntilIdle(1) == 0) {
      SetError(EAGAIN,
               "the simulated fabric ran out of events before this channel "
               "got one: nothing can raise it");
      return false;
    }
    ++*sim_events;
    return true;
  }
  pollfd p{ch->channel->fd(), POLLIN, 0};
  if (poll(&p, 1, -1) < 0) {
    const int code = errno;
    SetError(code, code == EINTR ? "interrupted by a signal" : "poll failed");
    return false;
  }
  return true;
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
  uint64_t sim_events = 0;
  while (true) {
    const softfab::Status s = ch->channel->GetEvent(&raised);
    if (s.ok()) break;
    if (s.code() != EAGAIN) return FailMinusOne(s.code(), s.message());
    if (!may_wait) return FailMinusOne(EAGAIN, "no completion event pending");
    if (!WaitForEvent(c, ch, &sim_events)) return -1;
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

}  // extern "C"

}  // namespace softfab::verbs_internal
