// The fabric daemon's address book; see address_book.h.
#include "backends/simd/address_book.h"

#include <algorithm>

namespace softfab::simd {

bool AddressBook::Bind(const void* owner, uint32_t ip, uint16_t port,
                       const EndpointName& name) {
  for (const Entry& e : entries_) {
    if (e.port == port && (e.ip == ip || e.ip == 0 || ip == 0)) return false;
  }
  entries_.push_back({owner, ip, port, name});
  return true;
}

void AddressBook::Unbind(const void* owner) {
  entries_.erase(
      std::remove_if(entries_.begin(), entries_.end(),
                     [owner](const Entry& e) { return e.owner == owner; }),
      entries_.end());
}

std::optional<EndpointName> AddressBook::Find(uint32_t ip,
                                              uint16_t port) const {
  const int32_t node = NodeOfAddress(ip);
  for (const Entry& e : entries_) {
    if (e.port != port) continue;
    if (e.ip == ip) return e.name;
    if (e.ip == 0 && (node < 0 || node_of_(e.owner) == node)) return e.name;
    if (node < 0) return e.name;  // loopback or the host: one host
  }
  return std::nullopt;
}

}  // namespace softfab::simd
