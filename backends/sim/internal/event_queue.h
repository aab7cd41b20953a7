// The simulator's single event queue, ordered by (time_ns, sequence): FIFO
// lanes for monotone streams (some named by the caller, some found by a
// best-fit search) plus a binary min-heap for the rest. The sequence
// counter belongs to the queue (one per fabric), so events scheduled for the
// same instant run in the order they were scheduled, and two fabrics in one
// process never influence each other.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_QUEUE_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_QUEUE_H_

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace softfab::sim::internal {

template <typename Payload>
class EventQueue {
  static_assert(std::is_trivially_copyable_v<Payload>,
                "events must be plain data");

 public:
  struct Entry {
    uint64_t time_ns;
    uint64_t seq;
    Payload payload;
  };

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t size_max() const { return size_max_; }
  // The sequence number the next Push will use (= number of pushes so far).
  uint64_t next_seq() const { return next_seq_; }

  // Streams: a caller that knows a push belongs to a nearly monotone stream
  // (the simulator's: packets on the wire, ACK timers, RNR timers, UD send
  // completions; EventLoop::StreamOf) names it, 0 <= stream < kStreams; such a
  // push costs one comparison when it fits the stream's own lane. kNoStream,
  // or a push that does not fit its lane, goes to the best-fit search of the
  // shared lanes, then the heap. The stream changes where a key waits, never
  // the order it is taken in.
  static constexpr int kStreams = 4;
  static constexpr int kNoStream = -1;

  // Schedules `payload` at `time_ns`; returns its sequence number. O(1) for the
  // common case of a stream of non-decreasing times, O(log n) otherwise; no
  // allocation once the storage has grown to the working-set size (lanes and
  // the heap keep their capacity).
  uint64_t Push(uint64_t time_ns, const Payload& payload,
                int stream = kNoStream) {
    assert(stream >= kNoStream && stream < kStreams);
    const uint64_t seq = next_seq_++;
    const Key key{time_ns, seq, payload};
    min_src_ = kMinUnknown;
    if (++size_ > size_max_) size_max_ = size_;
    if (stream >= 0) {
      Lane& own = lanes_[stream];
      if (own.count == 0 || (own.tail_time_ns <= time_ns && !own.full())) {
        used_ |= 1u << stream;
        own.Push(key);
        return seq;
      }
    }
    // Best fit among the shared lanes: the non-empty lane with the latest
    // tail not after `key` (its seq is larger than every queued seq, so
    // comparing times suffices); else an empty one; else (no fit, or the fit
    // is full) the heap.
    int best = -1;
    uint64_t best_time = 0;
    for (uint32_t m = used_ & kSharedLanes; m != 0; m &= m - 1) {
      const int i = std::countr_zero(m);
      const Lane& l = lanes_[i];
      const uint64_t tail = l.tail_time_ns;
      if (!l.full() && tail <= time_ns && (best < 0 || best_time < tail)) {
        best = i;
        best_time = tail;
      }
    }
    if (best < 0 && (used_ & kSharedLanes) != kSharedLanes) {
      best = std::countr_one(used_ | ~kSharedLanes);  // the first empty one
      used_ |= 1u << best;
    }
    if (best >= 0) {
      lanes_[best].Push(key);
    } else {
      heap_.push_back(key);
      SiftUp(heap_.size() - 1);
    }
    return seq;
  }

  // The time of the earliest entry; the queue must not be empty.
  uint64_t TopTime() const {
    assert(size_ > 0);
    if (min_src_ == kMinUnknown) min_src_ = MinSource();
    return min_src_ < 0 ? heap_.front().time_ns
                        : lanes_[min_src_].front().time_ns;
  }

  // The payload of the earliest entry; the queue must not be empty.
  const Payload& TopPayload() const {
    assert(size_ > 0);
    if (min_src_ == kMinUnknown) min_src_ = MinSource();
    return min_src_ < 0 ? heap_.front().payload
                        : lanes_[min_src_].front().payload;
  }

  // Removes and returns the earliest entry; the queue must not be empty.
  Entry Pop() {
    assert(size_ > 0);
    const int src = min_src_ == kMinUnknown ? MinSource() : min_src_;
    min_src_ = kMinUnknown;
    Key top;
    if (src < 0) {
      top = heap_.front();
      heap_.front() = heap_.back();
      heap_.pop_back();
      if (!heap_.empty()) SiftDown(0);
    } else {
      top = lanes_[src].Pop();
      if (lanes_[src].count == 0) used_ &= ~(1u << src);
    }
    --size_;
    return top;
  }

 private:
  // A key is the whole entry, payload included (an event is 48 bytes): read
  // where it waits, with no slot to look up or recycle. Monotone streams of
  // keys go into FIFO lanes; the rest into a binary heap. The earliest key is
  // the least of the lane heads and the heap top, so the order is exactly
  // (time, seq) whatever the split.
  using Key = Entry;
  // A FIFO ring. Its capacity (a power of two) starts at kLaneInitial (all
  // lanes are allocated with the queue, 160 KB per fabric) and doubles only
  // when full, up to kLaneMax (then keys go to another lane, or the heap),
  // so storage is bounded by the most keys a lane ever held at once and a
  // steady run does not grow it.
  static constexpr size_t kLaneInitial = 256;
  static constexpr size_t kLaneMax = size_t{1} << 16;
  struct Lane {
    std::vector<Key> ring = std::vector<Key>(kLaneInitial);
    size_t mask = kLaneInitial - 1;  // ring.size() - 1
    size_t head = 0;
    size_t count = 0;
    uint64_t tail_time_ns = 0;  // time of the last key pushed (count > 0)

    bool full() const { return count == kLaneMax; }
    const Key& front() const { return ring[head]; }
    void Push(const Key& k) {
      if (count == ring.size()) [[unlikely]]
        Grow();
      ring[(head + count) & mask] = k;
      ++count;
      tail_time_ns = k.time_ns;
    }
    [[gnu::noinline]] void Grow() {
      std::vector<Key> bigger(2 * ring.size());
      for (size_t i = 0; i < count; ++i) bigger[i] = ring[(head + i) & mask];
      ring.swap(bigger);
      mask = ring.size() - 1;
      head = 0;
    }
    Key Pop() {
      const Key k = ring[head];
      head = (head + 1) & mask;
      --count;
      return k;
    }
  };
  // Lanes 0 .. kStreams-1 belong to the streams; the rest are shared.
  static constexpr int kLanes = 10;
  static_assert(kStreams < kLanes && kLanes < 32);
  static constexpr uint32_t kSharedLanes =
      ((1u << kLanes) - 1) & ~((1u << kStreams) - 1);

  static bool Less(const Key& a, const Key& b) {
    return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.seq < b.seq);
  }

  // -1: the heap top; else the lane index.
  int MinSource() const {
    int src = -1;
    const Key* best = heap_.empty() ? nullptr : &heap_.front();
    for (uint32_t m = used_; m != 0; m &= m - 1) {
      const int i = std::countr_zero(m);
      const Key& k = lanes_[i].front();
      if (best == nullptr || Less(k, *best)) {
        best = &k;
        src = i;
      }
    }
    return src;
  }

  void SiftUp(size_t i) {
    const Key moving = heap_[i];
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!Less(moving, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = moving;
  }

  void SiftDown(size_t i) {
    const size_t n = heap_.size();
    const Key moving = heap_[i];
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Less(heap_[child + 1], heap_[child])) ++child;
      if (!Less(heap_[child], moving)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = moving;
  }

  Lane lanes_[kLanes];
  uint32_t used_ = 0;  // bit i: lane i is not empty
  // MinSource() as of the last TopTime(), until the next Push or Pop.
  static constexpr int kMinUnknown = -2;
  mutable int min_src_ = kMinUnknown;
  std::vector<Key> heap_;
  size_t size_ = 0;
  uint64_t next_seq_ = 0;
  size_t size_max_ = 0;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_EVENT_QUEUE_H_
