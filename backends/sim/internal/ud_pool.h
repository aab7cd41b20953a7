// UD payloads in flight. A UD send copies its payload into a pooled buffer
// as the packet leaves the port (the send completes then, so the sender may
// reuse its memory at once) and the packet carries the buffer's slot (Ev::aux)
// to the receiver. The requester allocates; a duplicated packet takes a
// second reference (Transmit); the packet's arrival or its drop releases one.
// Slots are reused last-freed first and buffers keep their capacity, so
// steady UD traffic allocates nothing.
#ifndef SOFTFAB_BACKENDS_SIM_INTERNAL_UD_POOL_H_
#define SOFTFAB_BACKENDS_SIM_INTERNAL_UD_POOL_H_

#include <cstdint>
#include <vector>

namespace softfab::sim::internal {

class UdPool {
 public:
  // A slot holding `bytes` bytes (contents unspecified) of a datagram sent
  // with GRH traffic class `traffic_class`, one reference.
  uint32_t Alloc(uint64_t bytes, uint8_t traffic_class) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<uint32_t>(buffers_.size());
      buffers_.emplace_back();
    }
    buffers_[slot].bytes.resize(bytes);
    buffers_[slot].refs = 1;
    buffers_[slot].traffic_class = traffic_class;
    return slot;
  }
  uint8_t* data(uint32_t slot) { return buffers_[slot].bytes.data(); }
  uint8_t traffic_class(uint32_t slot) const {
    return buffers_[slot].traffic_class;
  }
  void AddRef(uint32_t slot) { ++buffers_[slot].refs; }
  void Release(uint32_t slot) {
    if (--buffers_[slot].refs == 0) free_.push_back(slot);
  }

 private:
  struct Buffer {
    std::vector<uint8_t> bytes;
    uint32_t refs = 0;  // packets on the wire that carry it
    uint8_t traffic_class = 0;
  };
  std::vector<Buffer> buffers_;
  std::vector<uint32_t> free_;
};

}  // namespace softfab::sim::internal

#endif  // SOFTFAB_BACKENDS_SIM_INTERNAL_UD_POOL_H_
