// A peer in another process for tests of peer failure on a real device: the
// test forks before it opens any device (RDMA registrations and fork do not
// mix), the child opens a verbs fabric of its own and receives a stream,
// checking every byte, until the test kills it. Names and progress travel
// over a socketpair:
//   child -> 'R' and its name (SF_NAME_BYTES; for SF_EP_MSG its listener's),
//            or 'N' and why its fabric did not open (a line);
//   test  -> its endpoint's name (RDM) or anything of that size (MSG);
//   child -> 'W' once kWarmupMessages arrived intact, then 'X' and a line if
//            anything goes wrong.
// The child never returns into the test: it ends with _exit, so no gtest
// state or destructor of the parent runs twice.
#ifndef SOFTFAB_TESTS_PEER_PROCESS_H_
#define SOFTFAB_TESTS_PEER_PROCESS_H_

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"

namespace softfab::testing {

// Stream messages: a 32-bit sequence number, then bytes derived from it.
inline constexpr size_t kStreamMessageBytes = 2048;  // two packets at 1 KiB
inline constexpr int kWarmupMessages = 64;

inline void FillStreamMessage(uint32_t seq, uint8_t* m) {
  std::memcpy(m, &seq, sizeof seq);
  for (size_t i = sizeof seq; i < kStreamMessageBytes; ++i) {
    m[i] = static_cast<uint8_t>(seq * 7 + i);
  }
}
inline bool StreamMessageIntact(const uint8_t* m) {
  uint32_t seq;
  std::memcpy(&seq, m, sizeof seq);
  for (size_t i = sizeof seq; i < kStreamMessageBytes; ++i) {
    if (m[i] != static_cast<uint8_t>(seq * 7 + i)) return false;
  }
  return true;
}

// Writes or reads exactly `len` bytes; the read waits at most `timeout_ms`.
inline bool SendAll(int fd, const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}
inline bool RecvAll(int fd, void* data, size_t len, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    pollfd w{fd, POLLIN, 0};
    if (poll(&w, 1, timeout_ms) != 1) return false;
    const ssize_t n = recv(fd, p, len, 0);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}
// A line (up to '\n' or 200 bytes) for 'N' and 'X' reports.
inline std::string RecvLine(int fd, int timeout_ms) {
  std::string line;
  char c;
  while (line.size() < 200 && RecvAll(fd, &c, 1, timeout_ms) && c != '\n') {
    line += c;
  }
  return line;
}

namespace peer_process_internal {

// Child side: opens everything, reports, receives until killed (or two
// minutes pass). Exit codes: 2 no fabric, 3 an error it reported, 4 nobody
// killed it.
[[noreturn]] inline void ChildMain(int sock, sf_ep_type type) {
  auto fail = [sock](char code, const std::string& what) {
    const std::string line =
        std::string(1, code) + what + ": " + sf_last_error() + "\n";
    (void)SendAll(sock, line.data(), line.size());
    _exit(code == 'N' ? 2 : 3);
  };
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_VERBS;
  sf_fabric* fabric = nullptr;
  if (sf_fabric_open(&fa, &fabric, nullptr) != 0) fail('N', "fabric");
  sf_domain* domain = nullptr;
  sf_cq* cq = nullptr;
  sf_av* av = nullptr;
  sf_eq* eq = nullptr;
  sf_pep* pep = nullptr;
  sf_ep* ep = nullptr;
  sf_cq_attr ca{};
  ca.size = 1024;
  ca.format = SF_CQ_FORMAT_TAGGED;
  sf_ep_attr ea{};
  ea.type = type;
  ea.caps = SF_MSG;
  uint8_t name[1 + SF_NAME_BYTES] = {'R'};
  size_t len = SF_NAME_BYTES;
  if (sf_domain_open(fabric, 0, &domain, nullptr) ||
      sf_cq_open(domain, &ca, &cq, nullptr) ||
      sf_av_open(domain, nullptr, &av, nullptr)) {
    fail('X', "domain");
  }
  if (type == SF_EP_RDM) {
    if (sf_endpoint(domain, &ea, &ep, nullptr) ||
        sf_ep_bind(ep, &cq->fid, SF_TRANSMIT | SF_RECV) ||
        sf_ep_bind(ep, &av->fid, 0) || sf_enable(ep) ||
        sf_getname(&ep->fid, name + 1, &len)) {
      fail('X', "endpoint");
    }
  } else if (sf_eq_open(fabric, nullptr, &eq, nullptr) ||
             sf_passive_ep(domain, &pep, nullptr) ||
             sf_pep_bind(pep, &eq->fid, 0) || sf_listen(pep) ||
             sf_getname(&pep->fid, name + 1, &len)) {
    fail('X', "listener");
  }
  uint8_t theirs[SF_NAME_BYTES];
  if (!SendAll(sock, name, sizeof name) ||
      !RecvAll(sock, theirs, sizeof theirs, 30000)) {
    _exit(3);
  }
  if (type == SF_EP_RDM) {
    sf_addr_t addr;
    if (sf_av_insert(av, theirs, 1, &addr, 0, nullptr) != 1) fail('X', "av");
  } else {
    alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
    auto* entry = reinterpret_cast<sf_eq_cm_entry*>(buf);
    uint32_t event = 0;
    if (sf_eq_sread(eq, &event, buf, sizeof buf, 30000, 0) <= 0 ||
        event != SF_CONNREQ) {
      fail('X', "no connection request");
    }
    ea.info = entry->info;
    if (sf_endpoint(domain, &ea, &ep, nullptr) ||
        sf_ep_bind(ep, &cq->fid, SF_TRANSMIT | SF_RECV) ||
        sf_ep_bind(ep, &eq->fid, 0) || sf_enable(ep) ||
        sf_accept(ep, nullptr, 0)) {
      fail('X', "accept");
    }
    sf_freeinfo(entry->info);
    // SF_CONNECTED comes with the connector's first message at the latest:
    // receives are posted first.
  }
  constexpr int kPosted = 32;
  std::vector<uint8_t> bufs(kPosted * kStreamMessageBytes);
  for (int i = 0; i < kPosted; ++i) {
    if (sf_recv(ep, &bufs[i * kStreamMessageBytes], kStreamMessageBytes,
                nullptr, SF_ADDR_UNSPEC, &bufs[i * kStreamMessageBytes])) {
      fail('X', "recv");
    }
  }
  int received = 0;
  for (int waits = 0; waits < 120; ++waits) {
    sf_cq_tagged_entry e;
    ssize_t n;
    while ((n = sf_cq_sread(cq, &e, 1, nullptr, 1000)) == 1) {
      if (!(e.flags & SF_RECV)) continue;
      auto* m = static_cast<uint8_t*>(e.op_context);
      if (e.len != kStreamMessageBytes || !StreamMessageIntact(m)) {
        fail('X', "message " + std::to_string(received) + " corrupted");
      }
      if (++received == kWarmupMessages && !SendAll(sock, "W", 1)) _exit(3);
      if (sf_recv(ep, m, kStreamMessageBytes, nullptr, SF_ADDR_UNSPEC, m)) {
        fail('X', "repost");
      }
    }
    if (n == -SF_EAVAIL) fail('X', "error completion");
    if (eq) {
      alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
      uint32_t event = 0;
      (void)sf_eq_read(eq, &event, buf, sizeof buf, 0);  // SF_CONNECTED
    }
  }
  _exit(4);
}

}  // namespace peer_process_internal

// The child process, from the test's side. Start forks (before the test
// opens any device); the destructor kills and reaps the child if it is
// still there.
class PeerProcess {
 public:
  PeerProcess() = default;
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;
  ~PeerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status;
      waitpid(pid_, &status, 0);
    }
    if (sock_ >= 0) close(sock_);
  }

  // False if socketpair or fork failed.
  bool Start(sf_ep_type type) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return false;
    }
    fflush(nullptr);  // Nothing buffered is written twice.
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      close(sv[0]);
      peer_process_internal::ChildMain(sv[1], type);
    }
    close(sv[1]);
    sock_ = sv[0];
    return true;
  }

  // The child's name, or "" and *error: "N..." when it has no device, else
  // what went wrong.
  std::vector<uint8_t> Hello(std::string* error) {
    char code = 0;
    std::vector<uint8_t> name(SF_NAME_BYTES);
    if (!RecvAll(sock_, &code, 1, 30000)) {
      *error = "the child said nothing";
    } else if (code != 'R') {
      *error = code + RecvLine(sock_, 1000);
    } else if (!RecvAll(sock_, name.data(), name.size(), 1000)) {
      *error = "the child's name was cut short";
    } else {
      return name;
    }
    return {};
  }
  bool SendName(const void* name) {
    return SendAll(sock_, name, SF_NAME_BYTES);
  }
  // What the child reported ('W', or 'X' and its line), "" if nothing came
  // within `timeout_ms`.
  std::string Report(int timeout_ms) {
    char code = 0;
    if (!RecvAll(sock_, &code, 1, timeout_ms)) return "";
    if (code == 'W') return "W";
    return code + RecvLine(sock_, 1000);
  }
  // SIGKILL, then reap. Returns how the child ended, "killed" when by this
  // signal.
  std::string Kill() {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return "killed";
    if (WIFEXITED(status)) {
      return "had exited with " + std::to_string(WEXITSTATUS(status));
    }
    return "ended with status " + std::to_string(status);
  }

 private:
  pid_t pid_ = -1;
  int sock_ = -1;
};

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_PEER_PROCESS_H_
