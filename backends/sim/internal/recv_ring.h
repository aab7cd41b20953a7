// A receive queue's storage, shared by a QP's own receive queue and an SRQ: a
// bounded FIFO of receive requests with their SGEs stored flat.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_RECV_RING_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_RECV_RING_H_

#include <cstdint>
#include <vector>

#include "backends/sim/internal/common.h"
#include "transport/status.h"

namespace softfab::sim::internal {

struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
};

// A bounded FIFO of receive requests with their SGEs stored flat (depth *
// sge_max).
class RecvRing {
 public:
  void Init(uint32_t depth, uint32_t sge_max) {
    depth_ = depth;
    sge_max_ = sge_max;
    const uint64_t slots = RingSize(depth);
    mask_ = slots - 1;
    wqes_.assign(slots, RecvWqe{});
    sges_.assign(slots * sge_max, Sge{});
  }
  uint32_t depth() const { return depth_; }
  uint32_t sge_max() const { return sge_max_; }
  uint32_t count() const { return static_cast<uint32_t>(tail_ - head_); }
  bool full() const { return count() >= depth_; }
  void Push(const RecvWr& wr) {
    const size_t slot = tail_ & mask_;
    wqes_[slot] = RecvWqe{wr.wr_id, static_cast<uint32_t>(wr.num_sge)};
    for (int i = 0; i < wr.num_sge; ++i)
      sges_[slot * sge_max_ + i] = wr.sg_list[i];
    ++tail_;
  }
  // Pops the head into *wqe / sges (capacity sge_max); false if empty.
  bool Pop(RecvWqe* wqe, Sge* sges) {
    if (head_ == tail_) return false;
    const size_t slot = head_ & mask_;
    *wqe = wqes_[slot];
    for (uint32_t i = 0; i < wqe->num_sge; ++i)
      sges[i] = sges_[slot * sge_max_ + i];
    ++head_;
    return true;
  }
  void Clear() { head_ = tail_ = 0; }

 private:
  uint32_t depth_ = 0;
  uint32_t sge_max_ = 0;
  uint64_t mask_ = 0;  // storage holds RingSize(depth_) slots
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
  std::vector<RecvWqe> wqes_;
  std::vector<Sge> sges_;
};

inline Status ValidateRecvWr(const RecvWr& wr, uint32_t sge_max) {
  if (wr.num_sge < 0 || static_cast<uint32_t>(wr.num_sge) > sge_max) {
    return InvalidArgument("num_sge exceeds max_recv_sge");
  }
  if (wr.num_sge > 0 && wr.sg_list == nullptr)
    return InvalidArgument("sg_list is null");
  return Status::Ok();
}

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_RECV_RING_H_
