// Addressing by IP address and port (fi_getinfo's node / service) on verbs
// fabrics: a softfab name (SF_NAME_BYTES) is not an IP address, so an
// endpoint that was opened from an fi_info carrying a sockaddr as its
// src_addr answers, at that address and port, a lookup for its name; a
// client's fi_getinfo asks the address for the name and hands it back as
// dest_addr, which fi_connect and fi_av_insert take as they take any name.
//
// Both sides use the RDMA connection manager (librdmacm, RDMA_PS_TCP port
// space): the lookup is a connection request carrying a short query as
// private data, and the answer is the request's rejection carrying the name.
// No queue pair is ever connected: the connection manager only routes the
// question (resolving the IP address to the device and GID that own it) and
// the answer. The answering side is a thread of the endpoint's: it reads
// the name it was given and nothing else of softfab's, so it does not break
// the domain's FI_THREAD_DOMAIN / manual progress contract.
#ifndef SOFTFAB_API_LIBFABRIC_ADDRESS_SERVICE_H_
#define SOFTFAB_API_LIBFABRIC_ADDRESS_SERVICE_H_

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "api/softfab/fabric.h"

struct rdma_event_channel;  // <rdma/rdma_cma.h>
struct rdma_cm_id;

namespace softfab::libfabric {

using Name = std::array<uint8_t, SF_NAME_BYTES>;

// An IP address and port as getaddrinfo(3) gives it.
struct IpAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// Parses `node` (a numeric or resolvable host; null: any address when
// `passive`) and `service` (a port; null: 0) into `out`. 0 or -FI_EINVAL
// with the reason in `why`.
int ParseIpAddress(const char* node, const char* service, bool passive,
                   IpAddress* out, std::string* why);

// The verbs device that owns `addr` (empty for a wildcard address, which
// every device has). 0, or a negative fi_errno with the reason in `why`.
int DeviceOfAddress(const IpAddress& addr, std::string* device,
                    std::string* why);

// Asks the endpoint listening at `addr` for its name, waiting at most
// `timeout_ms`. On success `device` is the local device the address is
// reached through. -FI_ECONNREFUSED when nothing of softfab's answers
// there, -FI_ETIMEDOUT, or another negative fi_errno; the reason in `why`.
int LookUpName(const IpAddress& addr, int timeout_ms, std::string* device,
               Name* name, std::string* why);

// Something that answers lookups of one endpoint's name at an address
// until destroyed: a NameResponder on verbs, a binding in the shared
// simulated fabric's address book (backends/simd/address_client.h).
class Answerer {
 public:
  virtual ~Answerer() = default;
};

// Answers lookups at an address with one name until destroyed.
class NameResponder : public Answerer {
 public:
  // Binds and listens at `addr` (-FI_EADDRINUSE when another listener has
  // it, -FI_EADDRNOTAVAIL when no RDMA device owns it).
  static int Start(const IpAddress& addr, const Name& name,
                   std::unique_ptr<Answerer>* out, std::string* why);
  ~NameResponder() override;
  NameResponder(const NameResponder&) = delete;
  NameResponder& operator=(const NameResponder&) = delete;

  // The address it answers at (the port filled in when it was 0).
  const IpAddress& address() const { return bound_; }

 private:
  NameResponder() = default;
  void Serve();

  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  int stop_fd_ = -1;
  Name name_{};
  IpAddress bound_;
  std::thread thread_;
};

// The same on the simulated fabric several processes share (SOFTFAB_FABRIC):
// the daemon's address book instead of the connection manager. IPv4 only.
int LookUpSharedName(const IpAddress& addr, Name* name, std::string* why);
int StartSharedAnswerer(const IpAddress& addr, const Name& name,
                        std::unique_ptr<Answerer>* out, std::string* why);

}  // namespace softfab::libfabric

#endif  // SOFTFAB_API_LIBFABRIC_ADDRESS_SERVICE_H_
