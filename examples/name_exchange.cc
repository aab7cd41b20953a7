// Out-of-band name exchange over TCP (see name_exchange.h).
#include "examples/name_exchange.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace softfab::examples {
namespace {

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

bool Address(const std::string& host, int port, sockaddr_in* sa,
             std::string* error) {
  std::memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &sa->sin_addr) != 1) {
    *error = "not an IPv4 address: " + host;
    return false;
  }
  return true;
}

// Waits until fd is ready for `events` or the deadline passes.
bool WaitFd(int fd, short events, int64_t deadline_ms, std::string* error) {
  while (true) {
    const int64_t left = deadline_ms - NowMs();
    if (left <= 0) {
      *error = "timed out waiting for the peer";
      return false;
    }
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) {
      *error = std::string("poll: ") + std::strerror(errno);
      return false;
    }
  }
}

}  // namespace

OobSocket::~OobSocket() {
  if (fd_ >= 0) close(fd_);
}

bool OobSocket::Accept(const std::string& host, int port, int timeout_ms,
                       std::string* error) {
  sockaddr_in sa;
  if (!Address(host, port, &sa, error)) return false;
  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  const int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(lfd, 1) != 0) {
    *error = "cannot listen on " + host + ":" + std::to_string(port) + ": " +
             std::strerror(errno);
    close(lfd);
    return false;
  }
  const bool ready = WaitFd(lfd, POLLIN, NowMs() + timeout_ms, error);
  if (ready) fd_ = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  close(lfd);
  if (!ready) return false;
  if (fd_ < 0) {
    *error = std::string("accept: ") + std::strerror(errno);
    return false;
  }
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return true;
}

bool OobSocket::Connect(const std::string& host, int port, int timeout_ms,
                        std::string* error) {
  sockaddr_in sa;
  if (!Address(host, port, &sa, error)) return false;
  const int64_t deadline = NowMs() + timeout_ms;
  while (true) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *error = std::string("socket: ") + std::strerror(errno);
      return false;
    }
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      fd_ = fd;
      const int one = 1;
      setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return true;
    }
    const int err = errno;
    close(fd);
    if (NowMs() >= deadline) {
      *error = "cannot connect to " + host + ":" + std::to_string(port) + ": " +
               std::strerror(err);
      return false;
    }
    usleep(50 * 1000);  // The server may not be listening yet.
  }
}

bool OobSocket::Exchange(const void* mine, void* theirs, size_t len,
                         int timeout_ms, std::string* error) {
  const int64_t deadline = NowMs() + timeout_ms;
  const auto* out = static_cast<const uint8_t*>(mine);
  for (size_t done = 0; done < len;) {
    if (!WaitFd(fd_, POLLOUT, deadline, error)) return false;
    const ssize_t n = send(fd_, out + done, len - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = std::string("send: ") + std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  auto* in = static_cast<uint8_t*>(theirs);
  for (size_t done = 0; done < len;) {
    if (!WaitFd(fd_, POLLIN, deadline, error)) return false;
    const ssize_t n = recv(fd_, in + done, len - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = n == 0 ? "the peer closed the connection"
                      : std::string("recv: ") + std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool OobSocket::Barrier(int timeout_ms, std::string* error) {
  const uint8_t mine = 'b';
  uint8_t theirs = 0;
  return Exchange(&mine, &theirs, 1, timeout_ms, error);
}

}  // namespace softfab::examples
