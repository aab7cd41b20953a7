// The connection table (see connection_table.h): adding and renaming peers,
// and a peer's AV index both ways (the destination cache sends use, the
// source address receives report).
#include "core/connection_table.h"

#include <cstddef>

#include "core/internal/endpoint_common.h"
#include "core/rx_context.h"

namespace softfab::core {

uint32_t ConnectionTable::FindOrAdd(const wire::Name& name) {
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    return it->second;
  }
  const uint32_t index = static_cast<uint32_t>(peers_.size());
  peers_.emplace_back();
  peers_.back().name = name;
  by_name_.emplace(name, index);
  return index;
}

void ConnectionTable::Rename(uint32_t peer, const wire::Name& name) {
  by_name_.erase(peers_[peer].name);
  peers_[peer].name = name;
  by_name_.emplace(name, peer);
}

void ConnectionTable::SetQpn(uint32_t qp_num, uint32_t peer) {
  const size_t i = QpnSlot(qp_num);
  if (i < by_qpn_.size() && by_qpn_[i].qpn == qp_num) {
    by_qpn_[i].peer = peer;
  } else {
    by_qpn_.insert(by_qpn_.begin() + static_cast<ptrdiff_t>(i), {qp_num, peer});
  }
  last_qpn_valid_ = false;
}

void ConnectionTable::ForgetQpn(uint32_t qp_num, uint32_t peer) {
  const size_t i = QpnSlot(qp_num);
  if (i == by_qpn_.size() || by_qpn_[i].qpn != qp_num ||
      by_qpn_[i].peer != peer) {
    return;
  }
  by_qpn_.erase(by_qpn_.begin() + static_cast<ptrdiff_t>(i));
  last_qpn_valid_ = false;
}

void ConnectionTable::Clear() {
  peers_.clear();
  by_name_.clear();
  by_qpn_.clear();
  last_qpn_valid_ = false;
  of_dest_.clear();
  busy_.clear();
}

StatusOr<uint32_t> ConnectionTable::ForDest(const AddressVector& av,
                                            uint64_t dest, uint32_t peers_max) {
  // AV index -> peer, cached while the AV is unchanged.
  if (of_dest_generation_ != av.generation()) {
    of_dest_.clear();
    of_dest_generation_ = av.generation();
  }
  if (dest < of_dest_.size() && of_dest_[dest] != internal::kNil) {
    return of_dest_[dest];
  }
  auto name = av.Lookup(dest);
  if (!name) return InvalidArgument("destination is not in the address vector");
  uint32_t peer;
  if (auto it = by_name_.find(*name); it != by_name_.end()) {
    peer = it->second;
  } else if (peers_.size() >= peers_max) {
    return NoMemory("endpoint holds peers_max connections already");
  } else {
    peer = FindOrAdd(*name);
  }
  if (dest < (uint64_t{1} << 20)) {  // AV indices are small; bound the cache.
    if (of_dest_.size() <= dest) of_dest_.resize(dest + 1, internal::kNil);
    of_dest_[dest] = peer;
  }
  return peer;
}

uint64_t ConnectionTable::SourceOf(const AddressVector* av,
                                   uint32_t peer) const {
  const Peer& p = peers_[peer];
  if (av == nullptr) return UnknownSource(peer);
  if (p.source_generation != av->generation()) {
    // Not in the AV: a placeholder source no directed receive names (until
    // the peer is inserted: RxContext::FindUnexpectedFor).
    auto index = av->Find(p.name);
    p.source = index ? *index : UnknownSource(peer);
    p.source_generation = av->generation();
  }
  return p.source;
}

}  // namespace softfab::core
