// A process's side of the fabric daemon's address book (address_book.h):
// binding an IPv4 address and port to an endpoint's name while a listener
// lives, and looking one up, for fi_getinfo's node / service on the shared
// simulated fabric. Each binding is its own short connection to the daemon
// (an address session), which the daemon forgets with it; a lookup opens
// one for the question. The daemon is the one SOFTFAB_FABRIC names.
#ifndef SOFTFAB_BACKENDS_SIMD_ADDRESS_CLIENT_H_
#define SOFTFAB_BACKENDS_SIMD_ADDRESS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "backends/simd/protocol.h"
#include "transport/status.h"

namespace softfab::simd {

// Holds a binding until destroyed.
class AddressBinding {
 public:
  explicit AddressBinding(int fd) : fd_(fd) {}
  ~AddressBinding();
  AddressBinding(const AddressBinding&) = delete;
  AddressBinding& operator=(const AddressBinding&) = delete;

 private:
  int fd_;
};

// Binds `ip` (host order; 0: any address) and `port` to `name`. EADDRINUSE
// when another listener has them; other errors when there is no daemon.
// `why` says which.
StatusOr<std::unique_ptr<AddressBinding>> BindAddress(
    uint32_t ip, uint16_t port, const uint8_t (&name)[kNameBytes],
    std::string* why);

// The name of the endpoint listening at `ip`:`port`; ECONNREFUSED when none
// does.
Status LookUpAddress(uint32_t ip, uint16_t port, uint8_t (&name)[kNameBytes],
                     std::string* why);

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_ADDRESS_CLIENT_H_
