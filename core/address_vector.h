// AddressVector (fi_av, FI_AV_TABLE): endpoint names by dense index.
//
// Indices are handed out in insertion order and reused lowest-first after a
// removal, so the same sequence of calls yields the same indices everywhere.
// Reverse lookup (name -> index) uses an ordered map: no hash order anywhere.
// Not thread-safe.
#ifndef SOFTFAB_CORE_ADDRESS_VECTOR_H_
#define SOFTFAB_CORE_ADDRESS_VECTOR_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/wire.h"
#include "transport/status.h"

namespace softfab::core {

class AddressVector {
 public:
  explicit AddressVector(size_t count_max) : count_max_(count_max) {}

  // Inserts `name`; returns its index. A name already present keeps (and
  // returns) its index. ENOMEM when count_max names are live.
  StatusOr<uint64_t> Insert(const wire::Name& name);
  // EINVAL for an index that holds no name. Endpoints that already talk to
  // the removed peer keep their connection; new sends to the index fail.
  Status Remove(uint64_t index);
  std::optional<wire::Name> Lookup(uint64_t index) const;
  std::optional<uint64_t> Find(const wire::Name& name) const;
  // Changes whenever an index is added or removed, so a Find result can be
  // cached until then.
  uint64_t generation() const { return generation_; }
  // The address whose name has this LID and QP number (how a UD completion
  // names its sender), if any; the lowest one when several names share them
  // (on RoCE every LID is 0).
  std::optional<uint64_t> FindByLidQpn(uint16_t lid, uint32_t qpn) const;
  size_t count() const { return by_name_.size(); }

 private:
  size_t count_max_;
  std::vector<std::optional<wire::Name>> names_;
  uint64_t generation_ = 0;
  std::set<uint64_t> free_;  // Removed indices, reused lowest first.
  std::map<wire::Name, uint64_t> by_name_;
  // Every live index per (LID, QP number): removing one name must not hide
  // another that shares them.
  std::map<std::pair<uint16_t, uint32_t>, std::set<uint64_t>> by_lid_qpn_;
};

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_ADDRESS_VECTOR_H_
