// The time hold and the poll horizon: the rules that keep a poll of an empty
// CQ from moving the clock past what another node's owner has not read yet
// (README "Polling and virtual time"; the promise is in sim_fabric.h). This
// object keeps the fabric-wide part: the CQs that hold (watched and not
// empty), the read epoch, the horizon and the two counters; each CqImpl keeps
// its own membership (watched_, holding_pos_, held_epoch_) so that every
// step is O(1). CqImpl::Poll drives it through the fabric (Watch, ReadFrom,
// FabricImpl::RunForCq), FabricImpl::Completed adds a watched CQ that gains a
// completion, CqImpl::Destroy removes one.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_TIME_HOLD_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_TIME_HOLD_H_

#include <cstdint>
#include <vector>

#include "backends/sim/internal/cq.h"

namespace softfab::sim::internal {

class TimeHold {
 public:
  // Whether a poll about to run an event later than now must ask the hold
  // at all: some CQ holds, or a horizon is set. The one test on the fast path.
  bool engaged() const {
    return !holding_.empty() || horizon_ns_ != UINT64_MAX;
  }
  bool holding() const { return !holding_.empty(); }
  uint64_t horizon_ns() const { return horizon_ns_; }
  void SetHorizon(uint64_t t_ns) { horizon_ns_ = t_ns; }

  // A poll of `cq` would move time while some CQ holds. The first time in a
  // read epoch it is held (true). The second time a full round of polls has
  // passed without the holding CQs being read, so their owners are not
  // reading them: they are released and time may move (false).
  bool HoldOrRelease(CqImpl* cq) {
    if (cq->held_epoch_ != read_epoch_) {
      cq->held_epoch_ = read_epoch_;
      ++polls_held_;
      return true;
    }
    Release();
    return false;
  }

  // Poll() on `cq` with room for entries: it is watched from now on.
  void Watch(CqImpl* cq) {
    if (cq->watched_) return;
    cq->watched_ = true;
    if (!cq->empty()) Add(cq);
  }
  // A Poll() returned completions from `cq`: a new read epoch.
  void ReadFrom(CqImpl* cq) {
    ++read_epoch_;
    if (cq->empty() && cq->holding_pos_ >= 0) Remove(cq);
  }
  // `cq` is watched and became non-empty (or was when first watched).
  void Add(CqImpl* cq) {
    cq->holding_pos_ = static_cast<int32_t>(holding_.size());
    holding_.push_back(cq);
  }
  // `cq` holds no more (read empty, or destroyed).
  void Remove(CqImpl* cq) {
    const int32_t pos = cq->holding_pos_;
    holding_[pos] = holding_.back();
    holding_[pos]->holding_pos_ = pos;
    holding_.pop_back();
    cq->holding_pos_ = -1;
  }
  // Every holding CQ was skipped for a full round of polls: unwatch them.
  void Release() {
    for (CqImpl* cq : holding_) {
      cq->watched_ = false;
      cq->holding_pos_ = -1;
    }
    holding_.clear();
    ++read_epoch_;
    ++releases_;
  }

  uint64_t polls_held() const { return polls_held_; }  // SimStats::polls_held
  uint64_t releases() const { return releases_; }  // SimStats::hold_releases

 private:
  // Order irrelevant: only membership is ever used.
  std::vector<CqImpl*> holding_;
  // +1 per Poll that returned completions and per release.
  uint64_t read_epoch_ = 0;
  uint64_t horizon_ns_ = UINT64_MAX;  // SimFabric::SetPollHorizon
  uint64_t polls_held_ = 0;
  uint64_t releases_ = 0;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_TIME_HOLD_H_
