// KeyedLists: many FIFO lists of entries, each list found by a 3-part key in
// O(1).
//
// The building block of the tag matcher. Entries are numbered by the caller;
// their links (one per slot, each entry in at most one list per slot) live
// wherever the caller's LinkStore keeps them: inside its entries, where one
// cache line then holds both, or in per-slot arrays, where an entry pays only
// for the slots in use. Lists are intrusive, so appending and unlinking never
// allocate once the stores have grown to their high-water mark.
//
// The key index is an open-addressing hash table with linear probing whose
// positions hold the list headers themselves, so finding a list's head is one
// probe. A list that empties keeps its place, because the same key often comes
// back at once (a tag reposted); emptied lists are swept out when the table
// would otherwise have to grow, so the table never holds more than twice the
// non-empty lists. (Erasing at once was measured too: it costs wildcard keys,
// which recur, more than it saves on fresh exact tags.) Only
// the head and tail entry of a list record their list's table position (the
// ends are the only places an unlink needs it), so moving a header costs two
// link updates however long its list is.
//
// Nothing reads the table's order to decide anything, so no result can depend
// on hash order. The hash is unsalted and fixed.
//
// Not thread-safe: the owner serialises all calls.
#ifndef SOFTFAB_CORE_INTERNAL_KEYED_LISTS_H_
#define SOFTFAB_CORE_INTERNAL_KEYED_LISTS_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace softfab::internal {

inline constexpr uint32_t kNil = ~uint32_t{0};

struct ListKey {
  uint32_t kind = 0;  // Which family of lists (e.g. one per ignore mask).
  uint64_t a = 0;     // Usually the (masked) tag or a context.
  uint64_t b = 0;     // Usually the source address.
};

struct ListLink {
  uint32_t list =
      kNil;  // Table position (exact at a list's ends); kNil: unlinked.
  uint32_t prev = kNil;
  uint32_t next = kNil;
};

inline uint64_t MixBits(uint64_t x) {
  // The splitmix64 finaliser: a fixed, unsalted bijection with good avalanche.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// LinkStore: any type with `ListLink& link(uint32_t entry, int slot)` (and a
// const overload), valid for every entry the caller passes in.
template <typename LinkStore>
class KeyedLists {
 public:
  // `store` is the caller's; it may grow (reallocate) between calls.
  explicit KeyedLists(LinkStore* store)
      : store_(store), table_(kInitialTableSize) {}

  KeyedLists(const KeyedLists&) = delete;
  KeyedLists& operator=(const KeyedLists&) = delete;

  // Appends `entry` to the list named `key` in `slot`. The entry must not
  // already be in a list in that slot, and `key` must name lists of one slot.
  void PushBack(uint32_t entry, int slot, const ListKey& key) {
    const uint32_t pos = FindOrCreate(key, slot);
    Header& h = table_[pos];
    ListLink& link = Link(entry, slot);
    assert(link.list == kNil);
    link.list = pos;
    link.prev = h.tail;
    link.next = kNil;
    if (h.tail == kNil) {
      --empty_lists_;
      h.head = entry;
    } else {
      Link(h.tail, slot).next = entry;
    }
    h.tail = entry;
  }

  // Removes `entry` from its list in `slot`; a no-op when it is in none.
  void Unlink(uint32_t entry, int slot) {
    ListLink& link = Link(entry, slot);
    if (link.list == kNil) return;
    if (link.prev == kNil || link.next == kNil) {
      // At an end: the position is exact; hand it to the entry's neighbour,
      // which becomes the new end.
      const uint32_t pos = link.list;
      Header& h = table_[pos];
      if (link.prev == kNil) {
        h.head = link.next;
        if (link.next != kNil) Link(link.next, slot).list = pos;
      }
      if (link.next == kNil) {
        h.tail = link.prev;
        if (link.prev != kNil) Link(link.prev, slot).list = pos;
      }
      if (h.head == kNil) ++empty_lists_;
    }
    if (link.prev != kNil) Link(link.prev, slot).next = link.next;
    if (link.next != kNil) Link(link.next, slot).prev = link.prev;
    link = ListLink{};
  }

  // First entry of the list named `key`, or kNil when it is empty or absent.
  uint32_t Head(const ListKey& key) const {
    return table_[FindPosition(key)].head;
  }

  // The entry after `entry` in its list in `slot`, or kNil.
  uint32_t Next(uint32_t entry, int slot) const {
    return static_cast<const LinkStore*>(store_)->link(entry, slot).next;
  }

  bool Linked(uint32_t entry, int slot) const {
    return static_cast<const LinkStore*>(store_)->link(entry, slot).list !=
           kNil;
  }

  // Non-empty lists, and lists the table holds (for tests and accounting).
  uint32_t list_count() const { return lists_ - empty_lists_; }
  uint32_t table_lists() const { return lists_; }
  size_t table_bytes() const {
    return (table_.capacity() + scratch_.capacity()) * sizeof(Header);
  }

 private:
  static constexpr size_t kInitialTableSize = 16;
  static constexpr uint32_t kFree =
      ~uint32_t{0};  // `kind` of an unused position.

  struct Header {
    uint32_t kind = kFree;
    uint32_t slot = 0;  // The link slot its entries use.
    uint64_t a = 0;
    uint64_t b = 0;
    uint32_t head = kNil;
    uint32_t tail = kNil;
  };

  ListLink& Link(uint32_t entry, int slot) { return store_->link(entry, slot); }
  static size_t Hash(const ListKey& key) {
    return static_cast<size_t>(
        MixBits(key.a ^ MixBits(key.b ^ (uint64_t{key.kind} << 32))));
  }
  // Position holding `key`, or the free position where it would go.
  uint32_t FindPosition(const ListKey& key) const {
    const size_t mask = table_.size() - 1;
    size_t pos = Hash(key) & mask;
    while (true) {
      const Header& h = table_[pos];
      if (h.kind == kFree ||
          (h.kind == key.kind && h.a == key.a && h.b == key.b)) {
        return static_cast<uint32_t>(pos);
      }
      pos = (pos + 1) & mask;
    }
  }
  uint32_t FindOrCreate(const ListKey& key, int slot) {
    uint32_t pos = FindPosition(key);
    if (table_[pos].kind != kFree) return pos;
    // Keep the load factor at or below one half so probe runs stay short.
    // When the table is full, sweep out the empty lists if they are at least
    // half of it, otherwise grow.
    if ((lists_ + 1) * 2 > table_.size()) {
      Rebuild(empty_lists_ * 2 >= lists_ ? table_.size() : table_.size() * 2);
      pos = FindPosition(key);
    }
    Header& h = table_[pos];
    h.kind = key.kind;
    h.slot = static_cast<uint32_t>(slot);
    h.a = key.a;
    h.b = key.b;
    h.head = h.tail = kNil;
    ++lists_;
    ++empty_lists_;  // Until the caller appends to it.
    return pos;
  }
  // Rebuilds the table at `size` positions, dropping empty lists and telling
  // the ends of every moved list their new position.
  void Rebuild(size_t size) {
    scratch_.swap(table_);
    table_.assign(size, Header{});
    const size_t mask = size - 1;
    for (const Header& old : scratch_) {
      if (old.kind == kFree) continue;
      if (old.head == kNil) {
        --lists_;
        --empty_lists_;
        continue;
      }
      size_t pos = Hash({old.kind, old.a, old.b}) & mask;
      while (table_[pos].kind != kFree) pos = (pos + 1) & mask;
      table_[pos] = old;
      Link(old.head, old.slot).list = static_cast<uint32_t>(pos);
      Link(old.tail, old.slot).list = static_cast<uint32_t>(pos);
    }
  }

  LinkStore* store_;
  std::vector<Header> table_;    // Size is a power of two.
  std::vector<Header> scratch_;  // The previous table, reused by Rebuild.
  uint32_t lists_ = 0;           // Lists in the table.
  uint32_t empty_lists_ = 0;     // Of those, lists with no entry.
};

}  // namespace softfab::internal

#endif  // SOFTFAB_CORE_INTERNAL_KEYED_LISTS_H_
