// Completion queues (rxe_cq.c): a ring of completions with an overflow list (an
// overrun loses nothing), the CQ's part of the time hold, and its notify arm
// and event count for a completion channel.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_CQ_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_CQ_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "backends/sim/internal/common.h"

namespace softfab::sim::internal {

class CqImpl final : public CompletionQueue {
 public:
  CqImpl(DeviceImpl* dev, uint32_t index, int32_t cqe)
      : dev_(dev),
        index_(index),
        capacity_(static_cast<size_t>(cqe)),
        ring_(RingSize(capacity_)),
        mask_(ring_.size() - 1) {}
  int Poll(int num_entries, WorkCompletion* wc) override;
  int32_t cqe() const override { return static_cast<int32_t>(capacity_); }
  uint32_t handle() const override { return index_; }
  Status Destroy() override;
  Status RequestNotify(bool solicited_only) override;
  void AckEvents(uint32_t n) override;

  // A completion is being added while the CQ is armed (notify_ != 0): raises
  // the channel event if the arm asks for this one (any completion, or only a
  // solicited one), and disarms. Off the hot path: Completed tests notify_.
  void Notify(bool solicited);

  bool empty() const { return count_ == 0 && overflow_.empty(); }
  // Appends a completion; false if the ring was full (kept in overflow_).
  bool Push(const WorkCompletion& wc) {
    if (count_ < capacity_) {
      ring_[(head_ + count_) & mask_] = wc;
      ++count_;
      return overflow_.empty();
    }
    overflow_.push_back(wc);
    return false;
  }

  DeviceImpl* dev_;
  uint32_t index_;
  uint32_t refs_ = 0;
  size_t capacity_;                   // cqe: completions the ring holds
  std::vector<WorkCompletion> ring_;  // RingSize(capacity_) slots
  size_t mask_;
  size_t head_ = 0;
  size_t count_ = 0;
  std::deque<WorkCompletion> overflow_;
  bool overrun_reported_ = false;
  // The time hold (time_hold.h). Watched: polled since the last release that
  // found it holding. Holding = watched and not empty; holding_pos_ is its
  // place in TimeHold's holding list (-1: not holding). held_epoch_: the read
  // epoch in which a poll of this CQ was last held.
  bool watched_ = false;
  int32_t holding_pos_ = -1;
  uint64_t held_epoch_ = UINT64_MAX;
  // Completion channel (sim_channel.cc). notify_ is rxe's cq->notify: the bits
  // of IB_CQ_SOLICITED and IB_CQ_NEXT_COMP, ORed by RequestNotify, cleared by
  // the event. events_unacked_: events taken from the channel for this CQ and
  // not yet acked (Destroy is EBUSY meanwhile).
  static constexpr uint8_t kArmSolicited = 1;
  static constexpr uint8_t kArmNextCompletion = 2;
  ChannelImpl* channel_ = nullptr;
  uint8_t notify_ = 0;
  uint32_t events_unacked_ = 0;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_CQ_H_
