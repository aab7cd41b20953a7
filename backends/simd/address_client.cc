// Address sessions with the fabric daemon; see address_client.h.
#include "backends/simd/address_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/simd/client.h"

namespace softfab::simd {
namespace {

// Sends `op` with `req` (and `tail`) on `fd` and reads the reply.
Status Ask(int fd, Op op, const Request& req, const void* tail,
           size_t tail_bytes, Reply* reply, std::vector<uint8_t>* reply_tail) {
  Message m(op, &req, sizeof req);
  if (tail_bytes > 0) m.AppendBytes(tail, tail_bytes);
  if (send(fd, m.bytes().data(), m.bytes().size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(m.bytes().size())) {
    return Status(EIO, "the fabric daemon is gone");
  }
  std::vector<uint8_t> buf(kMessageBytesMax);
  const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
  Header h;
  const uint8_t* t = nullptr;
  if (n <= 0 || !Decode(buf.data(), static_cast<size_t>(n), &h, reply, &t)) {
    return Status(EIO, "the fabric daemon is gone");
  }
  reply_tail->assign(t, t + h.tail_bytes);
  return reply->status == 0 ? Status::Ok()
                            : Status(reply->status, "refused by the daemon");
}

// An address session with the daemon SOFTFAB_FABRIC names, or -1.
int OpenSession(std::string* why) {
  const char* path = std::getenv(kFabricEnv);
  if (path == nullptr || *path == '\0') {
    *why = std::string(kFabricEnv) + " names no fabric daemon";
    return -1;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0 || std::strlen(path) >= sizeof addr.sun_path) {
    if (fd >= 0) close(fd);
    *why = std::string("cannot reach the fabric daemon at ") + path;
    return -1;
  }
  std::strcpy(addr.sun_path, path);
  Request hello;
  hello.handle = static_cast<uint32_t>(kAddressSessionNode);
  hello.count = kProtocolVersion;
  Reply reply;
  std::vector<uint8_t> tail;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      !Ask(fd, Op::kHello, hello, nullptr, 0, &reply, &tail).ok()) {
    close(fd);
    *why = std::string("cannot reach the fabric daemon at ") + path;
    return -1;
  }
  return fd;
}

// Asks an address session `op` about `ip`:`port` (binding `name` when not
// null); the answer's tail in `tail`.
Status AskAbout(int fd, Op op, uint32_t ip, uint16_t port, const void* name,
                std::vector<uint8_t>* tail) {
  Request req;
  req.a = ip;
  req.b = port;
  Reply reply;
  return Ask(fd, op, req, name, name != nullptr ? kNameBytes : 0, &reply, tail);
}

}  // namespace

AddressBinding::~AddressBinding() { close(fd_); }

StatusOr<std::unique_ptr<AddressBinding>> BindAddress(
    uint32_t ip, uint16_t port, const uint8_t (&name)[kNameBytes],
    std::string* why) {
  const int fd = OpenSession(why);
  if (fd < 0) return Status(EIO, "no fabric daemon");
  std::vector<uint8_t> tail;
  Status s = AskAbout(fd, Op::kBindAddress, ip, port, name, &tail);
  if (!s.ok()) {
    close(fd);
    *why = s.code() == EADDRINUSE
               ? "the address and port are bound on this fabric already"
               : s.message();
    return s;
  }
  return std::make_unique<AddressBinding>(fd);
}

Status LookUpAddress(uint32_t ip, uint16_t port, uint8_t (&name)[kNameBytes],
                     std::string* why) {
  const int fd = OpenSession(why);
  if (fd < 0) return Status(EIO, "no fabric daemon");
  std::vector<uint8_t> tail;
  Status s = AskAbout(fd, Op::kLookUpAddress, ip, port, nullptr, &tail);
  close(fd);
  if (s.ok() && tail.size() != kNameBytes) s = Status(EIO, "bad answer");
  if (!s.ok()) {
    *why = s.code() == ECONNREFUSED
               ? "no endpoint listens at that address and port on this fabric"
               : s.message();
    return s;
  }
  std::memcpy(name, tail.data(), kNameBytes);
  return Status::Ok();
}

}  // namespace softfab::simd
