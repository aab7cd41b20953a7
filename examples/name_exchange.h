// Out-of-band exchange of endpoint names over a TCP socket, as fi_pingpong and
// perftest do: the server listens, the client connects, each side sends its
// fixed-size name and reads the other's. Plain POSIX sockets; every wait is
// bounded by a timeout so a missing peer gives an error, never a hang.
#ifndef SOFTFAB_EXAMPLES_NAME_EXCHANGE_H_
#define SOFTFAB_EXAMPLES_NAME_EXCHANGE_H_

#include <cstddef>
#include <string>

namespace softfab::examples {

// A connected TCP stream. Closed by the destructor.
class OobSocket {
 public:
  OobSocket() = default;
  OobSocket(const OobSocket&) = delete;
  OobSocket& operator=(const OobSocket&) = delete;
  OobSocket(OobSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ~OobSocket();

  // Server: listens on host:port and accepts one client within timeout_ms.
  // Client: connects to host:port, retrying until timeout_ms passes (the
  // server may not be listening yet). On failure returns false and sets
  // *error.
  bool Accept(const std::string& host, int port, int timeout_ms,
              std::string* error);
  bool Connect(const std::string& host, int port, int timeout_ms,
               std::string* error);

  // Sends `len` bytes, then receives exactly `len` bytes from the peer
  // (each side sends first; the socket buffers hold both names). False on
  // error, end of stream or timeout.
  bool Exchange(const void* mine, void* theirs, size_t len, int timeout_ms,
                std::string* error);

  // A one-byte barrier: both sides return once the other has reached it.
  bool Barrier(int timeout_ms, std::string* error);

 private:
  int fd_ = -1;
};

}  // namespace softfab::examples

#endif  // SOFTFAB_EXAMPLES_NAME_EXCHANGE_H_
