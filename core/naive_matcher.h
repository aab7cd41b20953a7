// NaiveMatcher: the reference model of TagMatcher, written to be obviously
// right rather than fast. One list of posted receives and one of unexpected
// messages, each scanned from the front. The differential test drives it and
// TagMatcher with the same operations and the benchmark uses it as the
// baseline. Test-only.
#ifndef SOFTFAB_CORE_NAIVE_MATCHER_H_
#define SOFTFAB_CORE_NAIVE_MATCHER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "core/matcher.h"

namespace softfab {

class NaiveMatcher {
 public:
  static bool Matches(uint64_t recv_tag, uint64_t ignore, uint64_t recv_source,
                      uint64_t msg_tag, uint64_t msg_source) {
    return (msg_tag & ~ignore) == (recv_tag & ~ignore) &&
           (recv_source == kAnySource || recv_source == msg_source);
  }

  // Returns the position in the posted list (valid until the next change).
  std::optional<size_t> FindReceive(uint64_t tag, uint64_t source) const {
    for (size_t i = 0; i < posted_.size(); ++i) {
      const PostedReceive& r = posted_[i];
      if (Matches(r.tag, r.ignore, r.source, tag, source)) return i;
    }
    return std::nullopt;
  }
  std::optional<size_t> FindReceiveByContext(uint64_t context) const {
    for (size_t i = 0; i < posted_.size(); ++i) {
      if (posted_[i].context == context) return i;
    }
    return std::nullopt;
  }
  const PostedReceive& receive(size_t i) const { return posted_[i]; }
  void AddReceive(const PostedReceive& r) { posted_.push_back(r); }
  void RemoveReceive(size_t i) { posted_.erase(posted_.begin() + i); }

  std::optional<size_t> FindUnexpected(uint64_t tag, uint64_t ignore,
                                       uint64_t source) const {
    for (size_t i = 0; i < unexpected_.size(); ++i) {
      const Message& m = unexpected_[i];
      if (!m.claimed &&
          Matches(tag, ignore, source, m.message.tag, m.message.source)) {
        return i;
      }
    }
    return std::nullopt;
  }
  std::optional<size_t> FindClaimed(uint64_t context) const {
    for (size_t i = 0; i < unexpected_.size(); ++i) {
      if (unexpected_[i].claimed && unexpected_[i].context == context) return i;
    }
    return std::nullopt;
  }
  const UnexpectedMessage& message(size_t i) const {
    return unexpected_[i].message;
  }
  void AddUnexpected(const UnexpectedMessage& m) { unexpected_.push_back({m}); }
  void Claim(size_t i, uint64_t context) {
    unexpected_[i].claimed = true;
    unexpected_[i].context = context;
  }
  void RemoveUnexpected(size_t i) {
    unexpected_.erase(unexpected_.begin() + i);
  }

  // The compound operations, with TagMatcher's contract.
  std::optional<UnexpectedMessage> PostOrMatch(const PostedReceive& r) {
    std::optional<UnexpectedMessage> matched;
    if (auto i = FindUnexpected(r.tag, r.ignore, r.source)) {
      matched = message(*i);
      RemoveUnexpected(*i);
      if (!r.multi_recv) return matched;
    }
    AddReceive(r);
    return matched;
  }
  std::optional<PostedReceive> ArriveOrQueue(const UnexpectedMessage& m) {
    if (auto i = FindReceive(m.tag, m.source)) {
      PostedReceive r = posted_[*i];
      if (!r.multi_recv) RemoveReceive(*i);
      return r;
    }
    AddUnexpected(m);
    return std::nullopt;
  }

  size_t posted_count() const { return posted_.size(); }
  size_t unexpected_count() const { return unexpected_.size(); }

 private:
  struct Message {
    UnexpectedMessage message;
    bool claimed = false;
    uint64_t context = 0;
  };
  std::vector<PostedReceive> posted_;
  std::vector<Message> unexpected_;
};

}  // namespace softfab

#endif  // SOFTFAB_CORE_NAIVE_MATCHER_H_
