// The fabric daemon's address book: which endpoint answers at an IP address
// and port, for programs that address their peers as fabtests and FI_EP_MSG
// listeners do (fi_getinfo's node / service). A process binds an address
// when its listener starts (the libfabric provider's fi_listen, or fi_enable
// of an endpoint whose fi_info had a source address) and looks one up in
// fi_getinfo. Simulated node n has the IPv4 address 10.x.y.z, x.y.z the 24
// bits of n (as its GID and the captures say); a lookup of any other
// address (127.0.0.1, the host's own: every process runs on one host) finds
// the listener at that port whatever it bound.
#ifndef SOFTFAB_BACKENDS_SIMD_ADDRESS_BOOK_H_
#define SOFTFAB_BACKENDS_SIMD_ADDRESS_BOOK_H_

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "backends/simd/protocol.h"

namespace softfab::simd {

using EndpointName = std::array<uint8_t, kNameBytes>;

class AddressBook {
 public:
  // The node of a binding's owner (-1 when unknown), for lookups of a
  // simulated node's address.
  explicit AddressBook(std::function<int32_t(const void* owner)> node_of)
      : node_of_(std::move(node_of)) {}

  // Binds `ip` (0: any address) and `port` to `name` for `owner`. False when
  // the port is bound already at the same address or at any address, or
  // this binds any address of a port bound at one.
  bool Bind(const void* owner, uint32_t ip, uint16_t port,
            const EndpointName& name);
  // Everything `owner` bound goes.
  void Unbind(const void* owner);
  // Who answers at `ip`:`port`: the first binding (in bind order) of that
  // port at `ip`, or at any address when `ip` is that owner's node's, or at
  // any address at all when `ip` is no simulated node's.
  std::optional<EndpointName> Find(uint32_t ip, uint16_t port) const;

  // Simulated node n's IPv4 address (host order), and the node an address
  // is (-1: none).
  static uint32_t NodeAddress(int32_t node) {
    return (10u << 24) | (static_cast<uint32_t>(node) & 0xFFFFFFu);
  }
  static int32_t NodeOfAddress(uint32_t ip) {
    return (ip >> 24) == 10 ? static_cast<int32_t>(ip & 0xFFFFFFu) : -1;
  }

 private:
  struct Entry {
    const void* owner;
    uint32_t ip;
    uint16_t port;
    EndpointName name;
  };
  std::function<int32_t(const void*)> node_of_;
  std::vector<Entry> entries_;  // in bind order
};

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_ADDRESS_BOOK_H_
