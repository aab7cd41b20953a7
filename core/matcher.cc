#include "core/matcher.h"

#include <algorithm>
#include <cassert>

#include "core/internal/slot_pool.h"

namespace softfab {
namespace {

using internal::kNil;

// A dynamic unexpected-side mask class idle for this many lookups may be
// replaced by a new mask. Rebuilding a class costs one pass over the unexpected
// queue, so replacement is kept for masks that really went out of use, not for
// masks that alternate.
constexpr uint64_t kClassIdleLookups = 1024;

}  // namespace

TagMatcher::TagMatcher()
    : posted_lists_(&posted_links_), unexpected_lists_(&unexpected_links_) {
  // Every variant is built on first use.
  unexpected_classes_[kExactClass].ignore = 0;
  unexpected_classes_[kExactClass].in_use = true;
  unexpected_classes_[kAnyTagClass].ignore = ~uint64_t{0};
  unexpected_classes_[kAnyTagClass].in_use = true;
}

// ------------------------------------------------------------ posted receives

uint32_t TagMatcher::PostedClassFor(uint64_t ignore) {
  // Live classes first: the search is as long as the number of masks in use.
  for (uint32_t cls : live_posted_classes_) {
    if (posted_classes_[cls].ignore == ignore) return cls;
  }
  // An empty class has no entries left, so it can take the new mask as it is.
  for (uint32_t i = 0; i < posted_classes_.size(); ++i) {
    if (posted_classes_[i].live == 0) {
      posted_classes_[i].ignore = ignore;
      return i;
    }
  }
  posted_classes_.push_back({ignore, 0, 0});
  return static_cast<uint32_t>(posted_classes_.size() - 1);
}

ReceiveHandle TagMatcher::AddReceive(const PostedReceive& receive) {
  if (posted_live_ == 0) {
    // The only one: out of the classes and lists until a second comes.
    const uint32_t index = internal::TakeSlot(posted_, posted_free_);
    PostedEntry& e = posted_[index];
    e.receive = receive;
    e.seq = next_seq_++;
    e.live = true;
    ++posted_live_;
    single_ = index;
    return ReceiveHandle{index};
  }
  if (single_ != kNil) [[unlikely]] {
    LinkSingle();  // Posted first: first in its list.
  }
  const uint32_t index = internal::TakeSlot(posted_, posted_free_);
  const uint32_t cls = PostedClassFor(receive.ignore);
  if (posted_classes_[cls].live++ == 0) live_posted_classes_.push_back(cls);
  if (receive.source != kAnySource) ++posted_classes_[cls].directed;

  PostedEntry& e = posted_[index];
  e.receive = receive;
  e.seq = next_seq_++;
  e.mask_class = cls;
  e.live = true;
  posted_lists_.PushBack(
      index, 0,
      {kFirstClassKind + cls, receive.tag & ~receive.ignore, receive.source});
  ++posted_live_;
  return ReceiveHandle{index};
}

void TagMatcher::LinkSingle() {
  PostedEntry& e = posted_[single_];
  const PostedReceive& r = e.receive;
  const uint32_t cls = PostedClassFor(r.ignore);
  if (posted_classes_[cls].live++ == 0) live_posted_classes_.push_back(cls);
  if (r.source != kAnySource) ++posted_classes_[cls].directed;
  e.mask_class = cls;
  posted_lists_.PushBack(single_, 0,
                         {kFirstClassKind + cls, r.tag & ~r.ignore, r.source});
  single_ = kNil;
}

std::optional<ReceiveHandle> TagMatcher::FindReceive(uint64_t tag,
                                                     uint64_t source) const {
  if (single_ != kNil) {
    // One receive posted: the lists' match rule, on it alone.
    const PostedReceive& r = posted_[single_].receive;
    if (((tag ^ r.tag) & ~r.ignore) == 0 &&
        (r.source == kAnySource || r.source == source)) {
      return ReceiveHandle{single_};
    }
    return std::nullopt;
  }
  uint32_t best = kNil;
  uint64_t best_seq = 0;
  auto consider = [&](uint32_t candidate) {
    if (candidate == kNil) return;
    if (best == kNil || posted_[candidate].seq < best_seq) {
      best = candidate;
      best_seq = posted_[candidate].seq;
    }
  };
  // Every matching receive sits in exactly one of these lists, and each list is
  // in posting order, so the earliest match overall is the earliest of the list
  // heads. A class whose receives are all directed, or all from any source,
  // needs one probe.
  for (uint32_t cls : live_posted_classes_) {
    const PostedMaskClass& c = posted_classes_[cls];
    const uint32_t kind = kFirstClassKind + cls;
    const uint64_t masked = tag & ~c.ignore;
    if (c.directed != 0 && source != kAnySource) {
      consider(posted_lists_.Head({kind, masked, source}));
    }
    if (c.directed != c.live)
      consider(posted_lists_.Head({kind, masked, kAnySource}));
  }
  if (best == kNil) return std::nullopt;
  return ReceiveHandle{best};
}

std::optional<ReceiveHandle> TagMatcher::FindReceiveByContext(
    uint64_t context) const {
  uint32_t best = kNil;
  for (uint32_t i = 0; i < posted_.size(); ++i) {
    const PostedEntry& e = posted_[i];
    if (e.live && e.receive.context == context &&
        (best == kNil || e.seq < posted_[best].seq)) {
      best = i;
    }
  }
  if (best == kNil) return std::nullopt;
  return ReceiveHandle{best};
}

void TagMatcher::RemoveReceive(ReceiveHandle h) {
  PostedEntry& e = posted_[h.index];
  assert(e.live);
  if (h.index == single_) {
    single_ = kNil;  // In no list.
  } else {
    posted_lists_.Unlink(h.index, 0);
    PostedMaskClass& c = posted_classes_[e.mask_class];
    if (e.receive.source != kAnySource) --c.directed;
    if (--c.live == 0) {
      // Order of live_posted_classes_ does not matter (FindReceive takes the
      // minimum seq).
      for (auto& cls : live_posted_classes_) {
        if (cls == e.mask_class) {
          cls = live_posted_classes_.back();
          live_posted_classes_.pop_back();
          break;
        }
      }
    }
  }
  e.live = false;
  posted_free_.push_back(h.index);
  --posted_live_;
}

// ------------------------------------------------------- unexpected messages

void TagMatcher::LinkUnexpected(uint32_t entry, int slot) {
  const UnexpectedMessage& m = unexpected_[entry].message;
  const int mask_class = slot / 2;
  const uint64_t masked = m.tag & ~unexpected_classes_[mask_class].ignore;
  const uint32_t kind = kFirstClassKind + static_cast<uint32_t>(mask_class);
  unexpected_lists_.PushBack(
      entry, slot,
      {kind, masked, slot % 2 == kBySource ? m.source : kAnySource});
}

void TagMatcher::UnlinkFromMatching(uint32_t entry) {
  for (int i = 0; i < built_count_; ++i) {
    unexpected_lists_.Unlink(entry, built_slots_[i]);
  }
}

std::vector<uint32_t> TagMatcher::UnclaimedInArrivalOrder() const {
  std::vector<uint32_t> order;
  order.reserve(unexpected_live_ - claimed_live_);
  for (uint32_t i = 0; i < unexpected_.size(); ++i) {
    if (unexpected_[i].live && !unexpected_[i].claimed) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [this](uint32_t x, uint32_t y) {
    return unexpected_[x].seq < unexpected_[y].seq;
  });
  return order;
}

MessageHandle TagMatcher::AddUnexpected(const UnexpectedMessage& message) {
  assert(message.source != kAnySource);
  const uint32_t index = internal::TakeSlot(unexpected_, unexpected_free_);
  UnexpectedEntry& e = unexpected_[index];
  e.message = message;
  e.seq = next_arrival_++;
  e.claimed = false;
  e.live = true;
  for (int i = 0; i < built_count_; ++i) {
    unexpected_links_.Grow(built_slots_[i], index + 1);
    LinkUnexpected(index, built_slots_[i]);
  }
  ++unexpected_live_;
  return MessageHandle{index};
}

void TagMatcher::BuildVariant(int mask_class, int variant) {
  // One pass in arrival order, so every list it makes is in arrival order too.
  const int slot = 2 * mask_class + variant;
  unexpected_links_.Grow(slot, unexpected_.size());
  for (uint32_t e : UnclaimedInArrivalOrder()) LinkUnexpected(e, slot);
  unexpected_classes_[mask_class].built[variant] = true;
  built_slots_[built_count_++] = static_cast<uint8_t>(slot);
}

int TagMatcher::UnexpectedClassFor(uint64_t ignore) {
  ++lookups_;
  for (int c = 0; c < kMaskClasses; ++c) {
    UnexpectedMaskClass& cls = unexpected_classes_[c];
    if (cls.in_use && cls.ignore == ignore) {
      cls.last_used = lookups_;
      return c;
    }
  }
  // A new mask: take a free dynamic class, else the least recently used one if
  // it has been idle long enough, else none (the caller scans).
  int idle = -1;
  for (int c = kFixedMaskClasses; c < kMaskClasses; ++c) {
    const UnexpectedMaskClass& cls = unexpected_classes_[c];
    if (!cls.in_use) {
      idle = c;
      break;
    }
    if (lookups_ - cls.last_used > kClassIdleLookups &&
        (idle < 0 || cls.last_used < unexpected_classes_[idle].last_used)) {
      idle = c;
    }
  }
  if (idle < 0) return -1;
  // Retire the old mask's variants: unlink every message from them.
  for (int i = 0; i < built_count_;) {
    const int slot = built_slots_[i];
    if (slot / 2 != idle) {
      ++i;
      continue;
    }
    for (uint32_t e = 0; e < unexpected_.size(); ++e) {
      if (unexpected_[e].live && !unexpected_[e].claimed) {
        unexpected_lists_.Unlink(e, slot);
      }
    }
    built_slots_[i] = built_slots_[--built_count_];
  }
  UnexpectedMaskClass& cls = unexpected_classes_[idle];
  cls = UnexpectedMaskClass{};
  cls.ignore = ignore;
  cls.in_use = true;
  cls.last_used = lookups_;
  return idle;
}

std::optional<MessageHandle> TagMatcher::ScanUnexpected(uint64_t tag,
                                                        uint64_t ignore,
                                                        uint64_t source) const {
  // The oldest match is the one with the smallest arrival number.
  uint32_t best = kNil;
  for (uint32_t i = 0; i < unexpected_.size(); ++i) {
    const UnexpectedEntry& e = unexpected_[i];
    if (!e.live || e.claimed) continue;
    if ((e.message.tag & ~ignore) == (tag & ~ignore) &&
        (source == kAnySource || e.message.source == source) &&
        (best == kNil || e.seq < unexpected_[best].seq)) {
      best = i;
    }
  }
  if (best == kNil) return std::nullopt;
  return MessageHandle{best};
}

std::optional<MessageHandle> TagMatcher::FindUnexpected(uint64_t tag,
                                                        uint64_t ignore,
                                                        uint64_t source) {
  if (unexpected_live_ == claimed_live_) return std::nullopt;
  const int c = UnexpectedClassFor(ignore);
  if (c < 0) return ScanUnexpected(tag, ignore, source);
  const int variant = source == kAnySource ? kAnySourceVariant : kBySource;
  if (!unexpected_classes_[c].built[variant]) BuildVariant(c, variant);
  const uint32_t head = unexpected_lists_.Head(
      {kFirstClassKind + static_cast<uint32_t>(c), tag & ~ignore, source});
  if (head == kNil) return std::nullopt;
  return MessageHandle{head};
}

void TagMatcher::Claim(MessageHandle h, uint64_t context) {
  UnexpectedEntry& e = unexpected_[h.index];
  assert(e.live && !e.claimed);
  UnlinkFromMatching(h.index);
  e.claimed = true;
  ++claimed_live_;
  unexpected_links_.Grow(kClaimSlot, unexpected_.size());
  unexpected_lists_.PushBack(h.index, kClaimSlot, {kClaimKind, context, 0});
}

std::optional<MessageHandle> TagMatcher::FindClaimed(uint64_t context) const {
  // Claim lists live in slot 0 (exact class, by source), which a claimed
  // message has left.
  const uint32_t head = unexpected_lists_.Head({kClaimKind, context, 0});
  if (head == kNil) return std::nullopt;
  return MessageHandle{head};
}

void TagMatcher::RemoveUnexpected(MessageHandle h) {
  UnexpectedEntry& e = unexpected_[h.index];
  assert(e.live);
  if (e.claimed) {
    unexpected_lists_.Unlink(h.index, kClaimSlot);
    e.claimed = false;
    --claimed_live_;
  } else {
    UnlinkFromMatching(h.index);
  }
  e.live = false;
  unexpected_free_.push_back(h.index);
  --unexpected_live_;
}

// ------------------------------------------------------- compound operations

TagMatcher::PostResult TagMatcher::PostOrMatch(const PostedReceive& receive) {
  PostResult result;
  if (auto m = FindUnexpected(receive.tag, receive.ignore, receive.source)) {
    result.matched = message(*m);
    RemoveUnexpected(*m);
    if (!receive.multi_recv) return result;
  }
  result.queued = AddReceive(receive);
  return result;
}

TagMatcher::ArriveResult TagMatcher::ArriveOrQueue(
    const UnexpectedMessage& message) {
  ArriveResult result;
  if (auto r = FindReceive(message.tag, message.source)) {
    result.matched = receive(*r);
    result.receive = *r;
    if (!result.matched->multi_recv) RemoveReceive(*r);
    return result;
  }
  result.queued = AddUnexpected(message);
  return result;
}

}  // namespace softfab
