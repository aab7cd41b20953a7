// The protocol's checks shared by the daemon and the fuzz target (see
// protocol.h).
#include "backends/simd/protocol.h"

#include <sys/socket.h>

#include <string>

namespace softfab::simd {

bool SendHello(int socket_fd, int32_t node, int memfd) {
  Request hello;
  hello.handle = static_cast<uint32_t>(node);
  hello.count = kProtocolVersion;
  Message m(Op::kHello, &hello, sizeof hello);
  iovec iov{m.mutable_bytes().data(), m.bytes().size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (memfd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &memfd, sizeof(int));
  }
  return sendmsg(socket_fd, &msg, MSG_NOSIGNAL) >= 0;
}

bool CheckWorkRequests(const Request& request, const uint8_t* tail,
                       size_t tail_bytes, bool send, std::string* why) {
  if (request.count > kWrsMax) {
    *why = "posted more than " + std::to_string(kWrsMax) + " work requests";
    return false;
  }
  TailReader in(tail, tail_bytes);
  for (uint32_t i = 0; i < request.count; ++i) {
    WireWr w;
    if (!in.Take(&w) || w.num_sge > kSgesMax ||
        w.inline_bytes > kInlineBytesMax || (!send && w.inline_bytes != 0)) {
      *why = "sent a malformed work request";
      return false;
    }
    const uint8_t* skip = nullptr;
    if (!in.TakeBytes(sizeof(transport::Sge) * w.num_sge, &skip) ||
        !in.TakeBytes(w.inline_bytes, &skip)) {
      *why = "sent a work request longer than its message";
      return false;
    }
  }
  if (in.left() != 0) {
    *why = "sent bytes after its work requests";
    return false;
  }
  return true;
}

}  // namespace softfab::simd
