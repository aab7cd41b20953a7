// TagMatcher: decides which posted receive an incoming message lands in, and
// keeps the messages that arrive before their receive (fi_tagged(3),
// fi_msg(3)).
//
// Rules (see ../shared/DESIGN.md, "Semantic contracts"):
// - A receive (tag, ignore, source) matches a message (tag', source') when
//   (tag' & ~ignore) == (tag & ~ignore) and source is kAnySource or equal to
//   source'.
// - Among posted receives that match, the one posted first wins, whatever mix
// of directed,
//   wildcard-source and wildcard-tag receives is queued (one sequence number
//   orders them all).
// - Unexpected messages are kept in arrival order; a new receive takes the
// oldest match.
// - A receive posted with `multi_recv` stays posted after it matches, in its
// place, until
//   the owner removes it (the owner accounts the buffer space:
//   FI_OPT_MIN_MULTI_RECV).
// - An unexpected message can be claimed (FI_PEEK|FI_CLAIM): it leaves the
// matchable set and
//   is found again only through the context that claimed it (FI_CLAIM,
//   FI_CLAIM|FI_DISCARD).
//
// Cost. Posted receives are grouped by ignore mask; within a group they are
// hashed by (tag & ~ignore, source), each hash bucket a FIFO list. Matching a
// message probes one or two buckets per distinct ignore mask currently posted,
// so its cost does not depend on queue depth. Unexpected messages are indexed
// the same way, per mask that receives actually use (built on first use by one
// pass over the queue): the exact and any-tag masks and up to
// kDynamicMaskClasses others. A receive with yet another mask scans the queue
// in arrival order (documented fallback), as does cancel (fi_cancel is rare; a
// context index would tax every post). Arrival order itself is an array of
// references compacted in place, so removing a message never touches its
// neighbours. Nothing allocates per match once the pools have reached their
// high-water mark.
//
// Determinism: handles are pool indices reused LIFO; contexts and cookies are
// opaque integers compared only for equality. No result depends on hash order
// or pointer values.
//
// Not thread-safe: the owning endpoint serialises all calls.
#ifndef SOFTFAB_CORE_MATCHER_H_
#define SOFTFAB_CORE_MATCHER_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/internal/keyed_lists.h"

namespace softfab {

// FI_ADDR_UNSPEC: a receive from any source.
inline constexpr uint64_t kAnySource = ~uint64_t{0};

struct PostedReceive {
  uint64_t tag = 0;
  uint64_t ignore = 0;
  uint64_t source = kAnySource;
  uint64_t context = 0;  // Opaque to the matcher; used by cancel.
  bool multi_recv = false;
};

struct UnexpectedMessage {
  uint64_t tag = 0;
  uint64_t source = 0;  // A concrete address, never kAnySource.
  uint64_t cookie =
      0;  // Opaque to the matcher: the owner's handle on the payload.
};

// Stable while the entry is live; reused after removal.
struct ReceiveHandle {
  uint32_t index = internal::kNil;
  friend bool operator==(ReceiveHandle, ReceiveHandle) = default;
};
struct MessageHandle {
  uint32_t index = internal::kNil;
  friend bool operator==(MessageHandle, MessageHandle) = default;
};

class TagMatcher {
 public:
  // Masks beyond the two fixed ones (exact, any) that get an index on the
  // unexpected side.
  static constexpr int kDynamicMaskClasses = 6;

  TagMatcher();
  TagMatcher(const TagMatcher&) = delete;
  TagMatcher& operator=(const TagMatcher&) = delete;

  // ---- Posted receives ----

  // Queues a receive behind all earlier ones. Does not look at unexpected
  // messages: callers that want "post" semantics use PostOrMatch.
  ReceiveHandle AddReceive(const PostedReceive& receive);

  // The first-posted receive that matches a message (tag, source), or nothing.
  std::optional<ReceiveHandle> FindReceive(uint64_t tag, uint64_t source) const;

  // The oldest posted receive carrying `context` (for cancel), or nothing.
  // O(pool size).
  std::optional<ReceiveHandle> FindReceiveByContext(uint64_t context) const;

  const PostedReceive& receive(ReceiveHandle h) const {
    return posted_[h.index].receive;
  }

  // Removes a live receive. The handle is invalid afterwards.
  void RemoveReceive(ReceiveHandle h);

  // ---- Unexpected messages ----

  // Queues a message behind all earlier unexpected ones.
  MessageHandle AddUnexpected(const UnexpectedMessage& message);

  // The oldest unclaimed unexpected message that a receive (tag, ignore,
  // source) matches. Non-const: may build an index for a mask not seen before.
  std::optional<MessageHandle> FindUnexpected(uint64_t tag, uint64_t ignore,
                                              uint64_t source);

  const UnexpectedMessage& message(MessageHandle h) const {
    return unexpected_[h.index].message;
  }
  bool claimed(MessageHandle h) const { return unexpected_[h.index].claimed; }

  // Takes a live, unclaimed message out of the matchable set and binds it to
  // `context`.
  void Claim(MessageHandle h, uint64_t context);

  // The oldest message claimed with `context`, or nothing.
  std::optional<MessageHandle> FindClaimed(uint64_t context) const;

  // Removes a live message, claimed or not. The handle is invalid afterwards.
  void RemoveUnexpected(MessageHandle h);

  // ---- The two compound operations of a receive path ----

  struct PostResult {
    std::optional<UnexpectedMessage>
        matched;           // Set: the receive took this message now.
    ReceiveHandle queued;  // Valid when nothing matched.
  };
  // fi_trecv: takes the oldest matching unexpected message (removing it),
  // otherwise queues. A multi_recv receive that takes a message is queued as
  // well (queued is valid), because its buffer usually has room for more.
  PostResult PostOrMatch(const PostedReceive& receive);

  struct ArriveResult {
    std::optional<PostedReceive>
        matched;            // Set: the message landed in this receive.
    ReceiveHandle receive;  // Its handle (still live when multi_recv).
    MessageHandle queued;   // Valid when nothing matched.
  };
  // An incoming message: lands in the first matching receive (removed unless
  // multi_recv), otherwise joins the unexpected queue.
  ArriveResult ArriveOrQueue(const UnexpectedMessage& message);

  uint32_t posted_count() const { return posted_live_; }
  uint32_t unexpected_count() const { return unexpected_live_; }

 private:
  // Unexpected entries have two link slots per mask class, one per variant (by
  // source, any source). The any-tag class's any-source variant is the arrival
  // order itself and needs no lists. A claimed entry leaves every class list
  // and uses slot 0 for its claim list.
  static constexpr int kExactClass = 0;   // ignore == 0
  static constexpr int kAnyTagClass = 1;  // ignore == ~0
  static constexpr int kFixedMaskClasses = 2;
  static constexpr int kMaskClasses = kFixedMaskClasses + kDynamicMaskClasses;
  static constexpr int kBySource = 0;
  static constexpr int kAnySourceVariant = 1;
  static constexpr int kClaimSlot = 0;
  // Kinds of list keys. Mask-class kinds start at kFirstClassKind on both sides
  // (the two sides have separate KeyedLists, so their kinds never meet).
  static constexpr uint32_t kClaimKind = 1;  // Claimed messages by context.
  static constexpr uint32_t kFirstClassKind = 2;

  struct PostedEntry {
    PostedReceive receive;
    uint64_t seq = 0;
    uint32_t mask_class = 0;
    bool live = false;
    internal::ListLink links[1];
  };
  struct PostedMaskClass {
    uint64_t ignore = 0;
    uint32_t live = 0;      // Posted receives in this class.
    uint32_t directed = 0;  // Of those, receives from one source.
  };
  struct UnexpectedEntry {
    UnexpectedMessage message;
    uint64_t seq = 0;  // Arrival order.
    bool claimed = false;
    bool live = false;
    // The exact class's two links (slots 0 and 1) ride in the entry, in the
    // message's cache line: exact receives are the common case.
    internal::ListLink exact_links[2];
  };
  struct UnexpectedMaskClass {
    uint64_t ignore = 0;
    bool in_use = false;
    bool built[2] = {false, false};  // Per variant: is every message linked?
    uint64_t last_used = 0;  // Lookup count at the last use (for replacement).
  };

  uint32_t PostedClassFor(uint64_t ignore);
  // Puts the single receive in its class and list (a second is being
  // posted).
  void LinkSingle();
  int UnexpectedClassFor(uint64_t ignore);
  void BuildVariant(int mask_class, int variant);
  void LinkUnexpected(uint32_t entry, int slot);
  // Takes an unclaimed entry out of every built variant.
  void UnlinkFromMatching(uint32_t entry);
  // Live unclaimed entries in arrival order (allocates; for rare paths only).
  std::vector<uint32_t> UnclaimedInArrivalOrder() const;
  std::optional<MessageHandle> ScanUnexpected(uint64_t tag, uint64_t ignore,
                                              uint64_t source) const;

  // Posted side.
  std::vector<PostedEntry> posted_;
  std::vector<uint32_t> posted_free_;
  std::vector<PostedMaskClass> posted_classes_;  // Kind - kFirstClassKind.
  std::vector<uint32_t> live_posted_classes_;    // Classes with receives.
  // Posted links live inside the entries (one cache line per match).
  struct PostedLinkStore {
    std::vector<PostedEntry>* entries;
    internal::ListLink& link(uint32_t e, int) { return (*entries)[e].links[0]; }
    const internal::ListLink& link(uint32_t e, int) const {
      return (*entries)[e].links[0];
    }
  };
  PostedLinkStore posted_links_{&posted_};
  internal::KeyedLists<PostedLinkStore> posted_lists_;
  uint64_t next_seq_ = 0;
  uint32_t posted_live_ = 0;
  // The one live posted receive when it was posted into an empty matcher,
  // kept out of the classes and lists until a second is posted (which links
  // it first): one receive at a time, the ping-pong case, matches with one
  // compare and costs no list work. kNil otherwise.
  uint32_t single_ = internal::kNil;

  // Unexpected side.
  std::vector<UnexpectedEntry> unexpected_;
  std::vector<uint32_t> unexpected_free_;
  std::array<UnexpectedMaskClass, kMaskClasses> unexpected_classes_{};
  // The slots (2 * class + variant) that are built; arrivals touch only those.
  std::array<uint8_t, 2 * kMaskClasses> built_slots_{};
  int built_count_ = 0;
  uint64_t next_arrival_ = 0;
  // Unexpected links: the exact class's in the entries, every other slot's in
  // an array of its own, so a message pays only for the indexes that are
  // built.
  struct SlotLinkStore {
    std::vector<UnexpectedEntry>* entries;
    std::array<std::vector<internal::ListLink>, 2 * kMaskClasses> slots;
    internal::ListLink& link(uint32_t e, int slot) {
      return slot < 2 ? (*entries)[e].exact_links[slot] : slots[slot][e];
    }
    const internal::ListLink& link(uint32_t e, int slot) const {
      return slot < 2 ? (*entries)[e].exact_links[slot] : slots[slot][e];
    }
    // Makes room for entries below `count` in `slot`.
    void Grow(int slot, size_t count) {
      if (slot >= 2 && slots[slot].size() < count) {
        slots[slot].resize(std::max(count, 2 * slots[slot].size()));
      }
    }
  };
  SlotLinkStore unexpected_links_{&unexpected_, {}};
  internal::KeyedLists<SlotLinkStore> unexpected_lists_;
  uint64_t lookups_ = 0;
  uint32_t unexpected_live_ = 0;
  uint32_t claimed_live_ = 0;
};

}  // namespace softfab

#endif  // SOFTFAB_CORE_MATCHER_H_
