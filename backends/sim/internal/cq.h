// Completion queues (rxe_cq.c): a ring of completions with an overflow list (an
// overrun loses nothing), and the CQ's part of the time hold.
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
  // The time hold (see RunForCq). Watched: polled since the last release that
  // found it holding. Holding = watched and not empty; holding_pos_ is its
  // place in FabricImpl::holding_ (-1: not holding). held_epoch_: the read
  // epoch in which a poll of this CQ was last held.
  bool watched_ = false;
  int32_t holding_pos_ = -1;
  uint64_t held_epoch_ = UINT64_MAX;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_CQ_H_
