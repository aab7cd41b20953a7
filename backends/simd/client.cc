// A process's side of the shared simulated fabric (see client.h): the
// connection, its shadow memory, and the transport objects as proxies of the
// daemon's (client_objects.cc).
#include "backends/simd/client.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "backends/simd/internal/connection.h"

namespace softfab::simd {
namespace internal {

Connection::~Connection() {
  if (window_ != nullptr) munmap(window_, kWindowBytes);
  if (memfd_ >= 0) close(memfd_);
  if (fd_ >= 0) close(fd_);
}

Status Connection::Open(const std::string& path, int node, std::string* why) {
  fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *why = "fabric socket path too long: " + path;
    return InvalidArgument("socket path too long");
  }
  std::strcpy(addr.sun_path, path.c_str());
  if (fd_ < 0 ||
      connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int code = errno;
    *why = "no fabric daemon at " + path + " (" + std::strerror(code) +
           "): start one with `softfab fabricd` or run under `softfab run`";
    return Status(code, "cannot reach the fabric daemon");
  }
  // Sealable: the daemon seals it against shrinking before it maps it.
  memfd_ = memfd_create("softfab-shadow", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd_ < 0 || ftruncate(memfd_, static_cast<off_t>(kShadowStart)) != 0) {
    *why = std::string("memfd: ") + std::strerror(errno);
    return Status(ENOMEM, "cannot create shared memory");
  }
  void* w = mmap(nullptr, kWindowBytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_NORESERVE, memfd_, 0);
  if (w == MAP_FAILED) {
    *why = std::string("mmap of the shared window: ") + std::strerror(errno);
    return Status(ENOMEM, "cannot map shared memory");
  }
  window_ = static_cast<uint8_t*>(w);
  file_bytes_ = kShadowStart;
  shadow_end_ = kShadowStart;
  mailbox_ = std::make_unique<Mailbox>(window_);
  // Hello, with the memfd.
  if (!SendHello(fd_, node, memfd_)) {
    *why = std::string("cannot talk to the fabric daemon: ") +
           std::strerror(errno);
    return Status(EIO, "cannot talk to the fabric daemon");
  }
  Reply reply;
  Header h;
  const uint8_t* t = nullptr;
  buf_.resize(kMessageBytesMax);
  const ssize_t n = recv(fd_, buf_.data(), buf_.size(), 0);
  if (n <= 0 || !Decode(buf_.data(), static_cast<size_t>(n), &h, &reply, &t)) {
    *why = "the fabric daemon refused node " + std::to_string(node) +
           " (taken, out of range, or another protocol version: see its log)";
    return Status(ECONNREFUSED, "refused by the fabric daemon");
  }
  return Status::Ok();
}

bool Connection::Post(const Message& m) {
  const std::vector<uint8_t>& b = m.bytes();
  if (b.size() > kMessageBytesMax) return false;
  if (mailbox_->PutRequest(++request_seq_, b.data(), b.size())) {
    const char bell = 1;  // the daemon sleeps: ring
    if (send(fd_, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
        errno != EAGAIN) {
      return false;
    }
  }
  return true;
}

long Connection::AwaitReply(long spin_ns) {
  uint64_t start = 0, last = 0;
  if (spin_ns > 0) start = last = MonotonicNs();
  while (true) {
    const long n = mailbox_->TakeReply(&reply_seen_, buf_.data());
    if (n != 0) return n;
    if (spin_ns > 0) {
      const uint64_t now = MonotonicNs();
      spin_.Looked(last, now);
      last = now;
      if (now - start < static_cast<uint64_t>(spin_ns) && spin_.MaySpin(now)) {
        // Give the core to a process that has work (another of the run,
        // most often the one the daemon just woke) while looking.
        sched_yield();
        continue;
      }
    }
    // Sleep until rung (or the daemon is gone).
    mailbox_->SetClientSleeps(true);
    if (mailbox_->ReplyWaiting(reply_seen_)) {
      mailbox_->SetClientSleeps(false);
      continue;
    }
    char bell[16];
    const ssize_t got = recv(fd_, bell, sizeof bell, 0);
    mailbox_->SetClientSleeps(false);
    if (got == 0 || (got < 0 && errno != EINTR)) return -1;
  }
}

bool Connection::Receive(Reply* reply, std::vector<uint8_t>* tail,
                         long spin_ns) {
  buf_.resize(kMessageBytesMax);
  while (true) {
    const long n = AwaitReply(spin_ns);
    if (n <= 0) return false;
    Header h;
    Request pull;
    const uint8_t* t = nullptr;
    if (static_cast<size_t>(n) >= sizeof(Header)) {
      std::memcpy(&h, buf_.data(), sizeof h);
      if (h.op == Op::kPull &&
          Decode(buf_.data(), static_cast<size_t>(n), &h, &pull, &t)) {
        CopyToShadow(pull.a, pull.b);
        Request done;
        if (!Post(Message(Op::kPullDone, &done, sizeof done))) return false;
        continue;
      }
    }
    if (!Decode(buf_.data(), static_cast<size_t>(n), &h, reply, &t)) {
      return false;
    }
    tail->assign(t, t + h.tail_bytes);
    return true;
  }
}

Status Connection::Call(Op op, const Request& req,
                        const std::vector<uint8_t>* tail_from, Reply* reply,
                        std::vector<uint8_t>* tail) {
  Message m(op, &req, sizeof req);
  if (tail_from != nullptr) {
    m.AppendBytes(tail_from->data(), tail_from->size());
  }
  if (broken_ || !Post(m)) {
    broken_ = true;
    return Status(EIO, "the fabric daemon is gone");
  }
  std::vector<uint8_t> ignored;
  // A park waits for the others: only a short look before sleeping.
  if (!Receive(reply, tail != nullptr ? tail : &ignored,
               op == Op::kPark ? kParkSpinNs : kSpinNs)) {
    broken_ = true;
    return Status(EIO, "the fabric daemon is gone");
  }
  if (reply->dirty_pending > 0 && !syncing_ && wake_fn_ != nullptr) {
    // The fabric wrote into our memory while we were outside: take the
    // ranges before anyone reads what this reply reports.
    syncing_ = true;
    Request sync;
    sync.flags = 1;
    Reply r;
    std::vector<uint8_t> t;
    if (Call(Op::kPark, sync, nullptr, &r, &t).ok()) wake_fn_(wake_self_, r, t);
    syncing_ = false;
  }
  if (reply->status != 0) {
    last_error_ = reply->message;
    return Status(reply->status, last_error_.c_str());
  }
  return Status::Ok();
}

StatusOr<uint64_t> Connection::AllocShadow(uint64_t len) {
  const uint64_t need = (len + 63) & ~uint64_t{63};
  // First fit among freed ranges, else the end of the file.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second >= need) {
      const uint64_t at = it->first;
      const uint64_t left = it->second - need;
      free_.erase(it);
      if (left > 0) free_[at + need] = left;
      return at;
    }
  }
  if (need > kWindowBytes - shadow_end_) {
    return Status(ENOMEM, "the shared window is full");
  }
  const uint64_t at = shadow_end_;
  shadow_end_ += need;
  if (shadow_end_ > file_bytes_) {
    const uint64_t grow = std::max(shadow_end_, file_bytes_ * 2);
    if (ftruncate(memfd_, static_cast<off_t>(grow)) != 0) {
      shadow_end_ = at;
      return Status(ENOMEM, "cannot grow the shared memory");
    }
    file_bytes_ = grow;
  }
  return at;
}

void Connection::FreeShadow(uint64_t at, uint64_t len) {
  const uint64_t n = (len + 63) & ~uint64_t{63};
  free_[at] = n;
  // Merge with the next free range, then with the previous one.
  auto it = free_.find(at);
  auto next = std::next(it);
  if (next != free_.end() && at + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

void Connection::AddMr(const ShadowMr& mr) {
  by_lkey_[mr.lkey] = mr;
  by_shadow_[mr.shadow] = mr.lkey;
}

void Connection::RemoveMr(uint32_t lkey) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return;
  by_shadow_.erase(it->second.shadow);
  by_lkey_.erase(it);
}

// Calls `fn(user, shadow, n)` for the part of shadow range [at, at + len)
// that registrations cover.
template <typename Fn>
void Connection::ForShadowRange(uint64_t at, uint64_t len, Fn fn) {
  auto it = by_shadow_.upper_bound(at);
  if (it != by_shadow_.begin()) --it;
  for (; it != by_shadow_.end() && it->first < at + len; ++it) {
    const ShadowMr& mr = by_lkey_[it->second];
    const uint64_t lo = std::max(at, mr.shadow);
    const uint64_t hi = std::min(at + len, mr.shadow + mr.length);
    if (lo >= hi) continue;
    fn(reinterpret_cast<uint8_t*>(mr.user_addr + (lo - mr.shadow)),
       window_ + lo, hi - lo);
  }
}

void Connection::CopyToShadow(uint64_t at, uint64_t len) {
  ForShadowRange(at, len, [](uint8_t* user, uint8_t* shadow, uint64_t n) {
    std::memcpy(shadow, user, n);
  });
}

void Connection::CopyFromShadow(uint64_t at, uint64_t len) {
  ForShadowRange(at, len, [](uint8_t* user, uint8_t* shadow, uint64_t n) {
    std::memcpy(user, shadow, n);
  });
}

void Connection::CopySgesToShadow(const transport::Sge* sges, int n) {
  for (int i = 0; i < n; ++i) {
    auto it = by_lkey_.find(sges[i].lkey);
    if (it == by_lkey_.end()) continue;  // the fabric refuses it
    const ShadowMr& mr = it->second;
    const uint64_t len =
        sges[i].length == 0 ? (uint64_t{1} << 31) : sges[i].length;
    if (sges[i].addr < mr.user_addr ||
        sges[i].addr - mr.user_addr > mr.length ||
        len > mr.length - (sges[i].addr - mr.user_addr)) {
      continue;  // outside its region: the fabric refuses it
    }
    std::memcpy(window_ + mr.shadow + (sges[i].addr - mr.user_addr),
                reinterpret_cast<const void*>(sges[i].addr), len);
  }
}

uint64_t Connection::NowNs() const {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(window_),
                         __ATOMIC_ACQUIRE);
}

}  // namespace internal

int NodeFromEnvironment(std::string* source) {
  for (const char* name :
       {kNodeEnv, "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < 0 || n > 65535) continue;
    if (source != nullptr) *source = name;
    return static_cast<int>(n);
  }
  return -1;
}

}  // namespace softfab::simd
