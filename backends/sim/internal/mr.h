// Memory regions (rxe_mr.c): the MR object, the lkey/rkey checks every access
// passes, and the copies between packets and scatter/gather lists.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_MR_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_MR_H_

#include <algorithm>
#include <cstdint>

#include "backends/sim/internal/common.h"

namespace softfab::sim::internal {

class MrImpl final : public MemoryRegion {
 public:
  MrImpl(DeviceImpl* dev, PdImpl* pd, uint32_t index, uint8_t* addr,
         uint64_t length, uint32_t access, uint8_t tag)
      : dev_(dev),
        pd_(pd),
        index_(index),
        addr_(addr),
        length_(length),
        access_(access),
        lkey_((index << 8) | tag),
        rkey_(((index << 8) | tag) ^ 0x5a) {}
  uint64_t addr() const override { return reinterpret_cast<uint64_t>(addr_); }
  uint64_t length() const override { return length_; }
  uint32_t lkey() const override { return lkey_; }
  uint32_t rkey() const override { return rkey_; }
  uint32_t access() const override { return access_; }
  Status Destroy() override;

  // True if [a, a+len) lies inside the region (overflow-safe).
  bool Contains(uint64_t a, uint64_t len) const {
    const uint64_t base = addr();
    return a >= base && len <= length_ && a - base <= length_ - len;
  }

  DeviceImpl* dev_;
  PdImpl* pd_;
  uint32_t index_;
  uint8_t* addr_;
  uint64_t length_;
  uint32_t access_;
  uint32_t lkey_;
  uint32_t rkey_;
};

// Calls `fn(addr, bytes)` for each piece of the SGE list's bytes
// [offset, offset + len), in order (what Gather, Scatter and the observer of
// written memory walk).
template <typename Fn>
void ForEachSgePiece(const Sge* sges, uint32_t n, uint64_t offset, uint64_t len,
                     Fn&& fn) {
  for (uint32_t i = 0; i < n && len > 0; ++i) {
    const uint64_t sl = SgeLength(sges[i]);
    if (offset >= sl) {
      offset -= sl;
      continue;
    }
    const uint64_t take = std::min(sl - offset, len);
    fn(sges[i].addr + offset, take);
    len -= take;
    offset = 0;
  }
}

// Copies `len` bytes starting at byte `offset` of the SGE list into `dst`.
void Gather(const Sge* sges, uint32_t n, uint64_t offset, uint8_t* dst,
            uint64_t len);
// Copies `len` bytes from `src` into the SGE list at byte `offset` of the list.
void Scatter(const Sge* sges, uint32_t n, uint64_t offset, const uint8_t* src,
             uint64_t len);

// Scatter() of `len` bytes from `src`, with the result a copy through a
// private buffer would give even if `src` (user memory unless `src_private`)
// overlaps the destination: one SGE takes them with memmove; else `src` is
// copied to `staging` (room for `len` bytes) first unless it is private.
void PlaceBytes(const Sge* sges, uint32_t n, uint64_t offset,
                const uint8_t* src, uint64_t len, bool src_private,
                uint8_t* staging);

// The address of the `len` bytes at byte `offset` of the SGE list if one SGE
// holds them all, else nullptr.
inline uint8_t* InOneSge(const Sge* sges, uint32_t n, uint64_t offset,
                         uint64_t len) {
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t sl = SgeLength(sges[i]);
    if (offset >= sl) {
      offset -= sl;
      continue;
    }
    return len <= sl - offset
               ? reinterpret_cast<uint8_t*>(sges[i].addr + offset)
               : nullptr;
  }
  return nullptr;
}

// Checks each SGE against the device's MRs (PD, bounds, and `access_needed`);
// returns the total length or -1.
int64_t CheckSges(DeviceImpl* dev, PdImpl* pd, const Sge* sges, uint32_t n,
                  uint32_t access_needed);
// The responder's target for an RDMA access, or nullptr (REM_ACCESS_ERR).
uint8_t* RemoteTarget(QpImpl* qp, uint32_t rkey, uint64_t addr, uint64_t len,
                      uint32_t access);

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_MR_H_
