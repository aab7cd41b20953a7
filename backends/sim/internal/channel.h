// Completion channels (ibv_comp_channel; the kernel's uverbs completion event
// file): a FIFO of events raised by armed CQs, with an eventfd that is readable
// exactly while the FIFO is not empty.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_CHANNEL_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_CHANNEL_H_

#include <cstdint>
#include <deque>

#include "backends/sim/internal/common.h"

namespace softfab::sim::internal {

class ChannelImpl final : public CompletionChannel {
 public:
  // Takes ownership of `fd` (an eventfd, EFD_NONBLOCK | EFD_CLOEXEC).
  ChannelImpl(DeviceImpl* dev, uint32_t index, int fd)
      : dev_(dev), index_(index), fd_(fd) {}
  ~ChannelImpl() override;
  ChannelImpl(const ChannelImpl&) = delete;
  ChannelImpl& operator=(const ChannelImpl&) = delete;

  int fd() const override { return fd_; }
  Status GetEvent(CompletionQueue** cq) override;
  Status Destroy() override;

  // An armed CQ fired: queue its event (the fd becomes readable).
  void Raise(CqImpl* cq);
  // `cq` is being destroyed: drop its events not yet taken, as the kernel does
  // (ib_uverbs_release_ucq); the fd is drained if nothing is left.
  void Forget(const CqImpl* cq);
  // The queue became empty: reads the eventfd back to zero (not readable).
  void DrainFd();

  DeviceImpl* dev_;
  uint32_t index_;
  int fd_;
  uint32_t refs_ = 0;  // CQs created on this channel and not destroyed.
  // Events not yet taken, oldest first. Bounded by the arms: a CQ queues at
  // most one event per RequestNotify call.
  std::deque<CqImpl*> pending_;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_CHANNEL_H_
