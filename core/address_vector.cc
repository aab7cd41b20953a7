#include "core/address_vector.h"

namespace softfab::core {

StatusOr<uint64_t> AddressVector::Insert(const wire::Name& name) {
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;
  if (by_name_.size() >= count_max_) {
    return NoMemory("address vector is full (raise its count)");
  }
  uint64_t index;
  if (!free_.empty()) {
    index = *free_.begin();
    free_.erase(free_.begin());
    names_[index] = name;
  } else {
    index = names_.size();
    names_.push_back(name);
  }
  by_name_.emplace(name, index);
  ++generation_;
  by_lid_qpn_[std::make_pair(name.lid, name.cm_qpn)].insert(index);
  return index;
}

Status AddressVector::Remove(uint64_t index) {
  if (index >= names_.size() || !names_[index]) {
    return InvalidArgument("no address at that index");
  }
  by_name_.erase(*names_[index]);
  const auto key = std::make_pair(names_[index]->lid, names_[index]->cm_qpn);
  if (auto it = by_lid_qpn_.find(key); it != by_lid_qpn_.end()) {
    it->second.erase(index);
    if (it->second.empty()) by_lid_qpn_.erase(it);
  }
  names_[index].reset();
  free_.insert(index);
  ++generation_;
  return Status::Ok();
}

std::optional<wire::Name> AddressVector::Lookup(uint64_t index) const {
  if (index >= names_.size()) return std::nullopt;
  return names_[index];
}

std::optional<uint64_t> AddressVector::FindByLidQpn(uint16_t lid,
                                                    uint32_t qpn) const {
  auto it = by_lid_qpn_.find(std::make_pair(lid, qpn));
  if (it == by_lid_qpn_.end()) return std::nullopt;
  return *it->second.begin();
}

std::optional<uint64_t> AddressVector::Find(const wire::Name& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

}  // namespace softfab::core
