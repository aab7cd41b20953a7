// A pool kept as a vector of items plus a free list of their indices: the
// allocation step the matcher and the endpoint's tables share.
#ifndef SOFTFAB_CORE_INTERNAL_SLOT_POOL_H_
#define SOFTFAB_CORE_INTERNAL_SLOT_POOL_H_

#include <cstdint>
#include <vector>

namespace softfab::internal {

// A slot of the pool: a freed one if any, else a new one at the end (so pools
// only grow as far as the peak needs).
template <typename Items>
uint32_t TakeSlot(Items& items, std::vector<uint32_t>& free) {
  if (!free.empty()) {
    const uint32_t slot = free.back();
    free.pop_back();
    return slot;
  }
  items.emplace_back();
  return static_cast<uint32_t>(items.size() - 1);
}

}  // namespace softfab::internal

#endif  // SOFTFAB_CORE_INTERNAL_SLOT_POOL_H_
