// The fabric daemon's engine (see server.h): sessions, parking and advancing
// virtual time, and the memory each process shares. The transport calls
// themselves are served by ServeRequest (server_requests.cc).
#include "backends/simd/server.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/sim/sim_pcap.h"
#include "backends/simd/address_book.h"
#include "backends/simd/completion_trace.h"
#include "backends/simd/internal/session.h"
#include "backends/simd/internal/thread_watch.h"
#include "backends/simd/internal/time_gate.h"
#include "backends/simd/mailbox.h"
#include "backends/simd/outside_processes.h"
#include "backends/simd/spin_governor.h"

namespace softfab::simd {
namespace internal {
namespace {

// How long the daemon looks for requests without sleeping after serving
// one while a process runs, and how often it looks at the sockets then.
constexpr uint64_t kDaemonSpinNs = 50'000;
constexpr uint64_t kLookEveryNs = 200'000;

uint64_t MonoNs() { return MonotonicNs(); }
uint64_t WallMs() { return MonotonicNs() / 1'000'000; }

// Receives one datagram into `buf` (kept at kMessageBytesMax bytes, so no
// receive clears it again) and the fds that came with it (at most one).
ssize_t ReceiveWithFd(int fd, std::vector<uint8_t>* buf, int* passed_fd) {
  if (buf->size() < kMessageBytesMax) buf->resize(kMessageBytesMax);
  iovec iov{buf->data(), buf->size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  if (passed_fd != nullptr) *passed_fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c), sizeof got);
      if (passed_fd != nullptr && *passed_fd < 0) {
        *passed_fd = got;
      } else {
        close(got);
      }
    }
  }
  if (n < 0) return -errno;
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return -EMSGSIZE;
  return n;
}

class Server final : public FabricServer, public Sessions {
 public:
  explicit Server(const ServerOptions& options) : options_(options) {}
  ~Server() override {
    while (!sessions_.empty()) Drop(sessions_.back().get(), nullptr);
    pcap_.reset();    // attached to the fabric
    fabric_.reset();  // before the memory its registrations lie over
    for (uint8_t* w : retired_windows_) munmap(w, kWindowBytes);
    if (listen_fd_ >= 0) close(listen_fd_);
  }

  Status Init(std::string* why) {
    sim::SimConfig config = options_.config;
    config.shared_by_processes = true;
    config.observer = this;
    if (Status s = sim::ValidateSimConfig(config); !s.ok()) {
      *why = std::string("fabric configuration refused: ") + s.message();
      return s;
    }
    fabric_ = sim::CreateSimFabric(config);
    fabric_->HoldDoorbells(true);
    if (!options_.pcap_path.empty()) {
      auto pcap =
          sim::PcapCapture::Open(fabric_.get(), options_.pcap_path, why);
      if (!pcap.ok()) return pcap.status();
      pcap_ = std::move(*pcap);
    }
    if (!options_.trace_path.empty()) {
      trace_ = std::make_unique<CompletionTrace>(config.nodes);
    }
    nodes_.assign(static_cast<size_t>(config.nodes), nullptr);
    listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options_.socket_path.size() >= sizeof addr.sun_path) {
      *why = "socket path too long: " + options_.socket_path;
      return InvalidArgument("socket path too long");
    }
    std::strcpy(addr.sun_path, options_.socket_path.c_str());
    if (listen_fd_ < 0 ||
        bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) !=
            0 ||
        listen(listen_fd_, 64) != 0) {
      const int code = errno;
      *why = "cannot listen on " + options_.socket_path + ": " +
             std::strerror(code);
      return Status(code, "cannot listen");
    }
    return Status::Ok();
  }

  int Run(int stop_fd) override {
    std::vector<pollfd> fds;
    uint64_t served_ns = 0;  // when a request was last served
    uint64_t looked_ns = 0;  // when the sockets were last looked at
    while (true) {
      if (options_.expected_nodes > 0 &&
          summary_.nodes_connected >=
              static_cast<uint64_t>(options_.expected_nodes) &&
          sessions_.empty()) {
        return 0;
      }
      uint64_t now = MonoNs();
      if (ServeMailboxes()) served_ns = now;
      if (const Advancing a = CanAdvance(); a != Advancing::kNo) Advance(a);
      Watchdog();
      // Someone running while others wait: look again soon, to notice it
      // fall asleep outside the fabric. Someone running who asked something
      // lately: spin, looking at the sockets (new processes, processes gone,
      // address sessions) now and then.
      bool waiting = false, running = false;
      for (const auto& x : sessions_) {
        if (x->node >= 0) (x->parked ? waiting : running) = true;
      }
      now = MonoNs();
      const bool spin =
          running && now - served_ns < kDaemonSpinNs && spin_.MaySpin(now);
      if (spin) {
        sched_yield();  // a process with work comes first
        spin_.Looked(now, MonoNs());
      }
      if (spin && now - looked_ns < kLookEveryNs) continue;
      looked_ns = now;
      fds.clear();
      fds.push_back({listen_fd_, POLLIN, 0});
      if (stop_fd >= 0) fds.push_back({stop_fd, POLLIN, 0});
      const size_t first_session = fds.size();
      for (const auto& s : sessions_) fds.push_back({s->fd, POLLIN, 0});
      if (!spin && !SleepOnMailboxes(true)) continue;  // a request came in
      const int r = poll(fds.data(), fds.size(),
                         spin                                    ? 0
                         : (waiting && running) || watch_.busy() ? 1
                                                                 : 1000);
      if (!spin) SleepOnMailboxes(false);
      if (r < 0 && errno != EINTR) return errno;
      if (r <= 0) continue;
      if (stop_fd >= 0 && (fds[1].revents & POLLIN)) return 0;
      if (fds[0].revents & POLLIN) Accept();
      // A dropped session leaves the vector, so look each fd up again.
      for (size_t i = first_session; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        Session* s = Find(fds[i].fd);
        if (s != nullptr) Receive(s);
      }
    }
  }

  // One request from each node session's mailbox that has one, in session
  // order (the order changes nothing: doorbells are held until an advance).
  bool ServeMailboxes() {
    bool served = false;
    for (Session* s : NodeSessions()) {
      const long n =
          Mailbox(s->window).TakeRequest(&s->request_seen, buf_.data());
      if (n < 0) {
        Drop(s, "wrote a request of an impossible size");
        continue;
      }
      if (n == 0) continue;
      served = true;
      Handle(s, static_cast<size_t>(n), -1);
    }
    return served;
  }

  // The daemon goes to sleep (`on`) or wakes: every node session's flag
  // says so. Going to sleep, false when a request came in meanwhile (the
  // flags are cleared again: serve it instead).
  bool SleepOnMailboxes(bool on) {
    bool waiting = false;
    for (Session* s : NodeSessions()) {
      Mailbox box(s->window);
      box.SetDaemonSleeps(on);
      if (on && box.RequestWaiting(s->request_seen)) waiting = true;
    }
    if (waiting) SleepOnMailboxes(false);
    return !waiting;
  }

  // The sessions that have said hello as a node, as a list apart from
  // sessions_ (serving may drop one), reused so that the loop, which asks on
  // every turn, allocates nothing: callers must not ask again while they go
  // through it.
  const std::vector<Session*>& NodeSessions() {
    node_sessions_.clear();
    for (const auto& s : sessions_) {
      if (s->node >= 0 && s->window != nullptr) {
        node_sessions_.push_back(s.get());
      }
    }
    return node_sessions_;
  }

  RunSummary summary() const override {
    RunSummary s = summary_;
    s.digest = fabric_->digest();
    s.now_ns = fabric_->clock().NowNs();
    s.stats = fabric_->stats();
    return s;
  }

  Status Finish(std::string* why) override {
    if (pcap_ != nullptr) {
      if (Status s = pcap_->Close(); !s.ok()) {
        *why = "cannot write the capture " + options_.pcap_path;
        return s;
      }
    }
    if (trace_ != nullptr) {
      if (Status s = trace_->Write(options_.trace_path); !s.ok()) {
        *why = "cannot write the completion trace " + options_.trace_path +
               ": " + std::strerror(s.code());
        return s;
      }
    }
    return Status::Ok();
  }

  // ---- Sessions (session.h) ----
  sim::SimFabric& fabric() override { return *fabric_; }
  void TookCompletions(const Session& s, uint32_t cq,
                       const tp::WorkCompletion* wcs, int n) override {
    if (trace_ != nullptr) {
      trace_->Record(s.node, fabric_->clock().NowNs(), cq, wcs, n);
    }
  }
  Session* SessionOfNode(int32_t node) override {
    return node >= 0 && static_cast<size_t>(node) < nodes_.size()
               ? nodes_[static_cast<size_t>(node)]
               : nullptr;
  }

  // ---- sim::SimObserver ----
  void OnMemoryWritten(const void* addr, uint64_t len) override {
    Session* s = SessionOfAddress(addr);
    if (s == nullptr) return;
    s->dirty.push_back(
        {static_cast<uint64_t>(static_cast<const uint8_t*>(addr) - s->window),
         len});
    s->concerned = true;
  }
  void BeforeMemoryRead(const void* addr, uint64_t len) override {
    Session* s = SessionOfAddress(addr);
    if (s == nullptr || !s->parked) return;
    // The owner is parked inside a call: it may copy its memory now.
    Request pull;
    pull.a =
        static_cast<uint64_t>(static_cast<const uint8_t*>(addr) - s->window);
    pull.b = len;
    Message m(Op::kPull, &pull, sizeof pull);
    if (!Send(s, m)) {
      Drop(s, "cannot be written to");
      return;
    }
    // Bounded: a process that does not answer within the watchdog's time is
    // treated as gone.
    Mailbox box(s->window);
    const uint64_t deadline = WallMs() + options_.watchdog_ms;
    while (true) {
      const long n = box.TakeRequest(&s->request_seen, pull_buf_.data());
      if (n < 0 || (n > 0 && static_cast<size_t>(n) < sizeof(Header))) {
        Drop(s, "wrote a request of an impossible size");
        return;
      }
      if (n > 0) {
        Header h;
        std::memcpy(&h, pull_buf_.data(), sizeof h);
        if (h.op != Op::kPullDone) {
          Drop(s, "answered a pull with another message");
        }
        return;
      }
      const uint64_t now = WallMs();
      if (now >= deadline) {
        Drop(s, "did not answer a memory pull");
        return;
      }
      box.SetDaemonSleeps(true);
      pollfd p{s->fd, POLLIN, 0};
      if (!box.RequestWaiting(s->request_seen)) {
        (void)poll(&p, 1,
                   static_cast<int>(std::min<uint64_t>(deadline - now, 1000)));
      }
      box.SetDaemonSleeps(false);
      if (p.revents != 0 && !DrainDoorbells(s)) {
        Drop(s, "went during a memory pull");
        return;
      }
    }
  }
  void OnNodeEvent(int32_t node) override {
    if (Session* s = SessionOfNode(node)) s->concerned = true;
  }
  void OnAsyncEvent(int32_t node) override {
    SetAsyncEventFlag(SessionOfNode(node), true);
  }
  void OnCompletionAdded(int32_t node, const tp::CompletionQueue* cq) override {
    if (Session* s = SessionOfNode(node)) SetCqFlag(s, cq, true);
  }

 private:
  Session* Find(int fd) {
    for (auto& s : sessions_) {
      if (s->fd == fd) return s.get();
    }
    return nullptr;
  }
  Session* SessionOfAddress(const void* addr) {
    const auto* p = static_cast<const uint8_t*>(addr);
    for (Session* s : nodes_) {
      if (s != nullptr && s->window != nullptr && p >= s->window &&
          p < s->window + kWindowBytes) {
        return s;
      }
    }
    return nullptr;
  }

  void Accept() {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        cred.uid != getuid()) {
      ++summary_.clients_refused;
      std::fprintf(options_.log,
                   "softfab fabricd: refused a connection from uid %u (only "
                   "uid %u may use this fabric)\n",
                   cred.uid, getuid());
      close(fd);
      return;
    }
    auto s = std::make_unique<Session>();
    s->fd = fd;
    struct stat st {};
    if (fstat(fd, &st) == 0) s->fd_inode = st.st_ino;
    s->pid = cred.pid;
    s->parent = ParentOf(cred.pid);
    s->last_heard_ms = WallMs();
    sessions_.push_back(std::move(s));
  }

  // The socket of `s` is readable: a node session's doorbells (or its end),
  // else a request (the hello, an address session's).
  void Receive(Session* s) {
    if (s->node >= 0 && s->window != nullptr) {
      if (!DrainDoorbells(s)) Drop(s, nullptr);  // the process went
      return;
    }
    int passed = -1;
    const ssize_t n = ReceiveWithFd(s->fd, &buf_, &passed);
    if (n == 0 || n == -ECONNRESET) {
      if (passed >= 0) close(passed);
      Drop(s, nullptr);  // the process went
      return;
    }
    if (n < 0) {
      if (passed >= 0) close(passed);
      Drop(s, "sent a malformed message");
      return;
    }
    Handle(s, static_cast<size_t>(n), passed);
  }

  // Reads what waits on the socket of `s` (at most 64 doorbells a call, so
  // a process that floods its socket cannot hold the daemon here: poll
  // comes back for the rest); false when the process is gone.
  static bool DrainDoorbells(Session* s) {
    char bell[64];
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = recv(s->fd, bell, sizeof bell, MSG_DONTWAIT);
      if (n > 0) continue;
      if (n == 0) return false;
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
    return true;
  }

  // A request of `n` bytes in buf_ (with the fd that came with it, or -1).
  void Handle(Session* s, size_t n, int passed) {
    s->last_heard_ms = WallMs();
    Header h;
    Request req;
    const uint8_t* tail = nullptr;
    if (!Decode(buf_.data(), n, &h, &req, &tail)) {
      if (passed >= 0) close(passed);
      Drop(s, "sent a malformed message");
      return;
    }
    ++summary_.requests;
    ++requests_since_advance_;
    if (h.op == Op::kHello) {
      const std::string refused = Hello(s, req, passed);
      if (!refused.empty()) Drop(s, refused.c_str());
      return;
    }
    if (passed >= 0) close(passed);
    if (s->address_only) {
      ServeAddress(s, h.op, req, tail, h.tail_bytes);
      return;
    }
    if (s->node < 0) {
      Drop(s, "spoke before saying hello");
      return;
    }
    if (h.op == Op::kPark && (req.flags & 1) != 0) {
      s->parked = true;
      Wake(s, /*idle=*/false);  // the ranges so far, no waiting
      return;
    }
    if (h.op == Op::kPark) {
      s->parked = true;
      s->deadline_ns = req.c;
      s->parked_tid = static_cast<pid_t>(req.b);
      s->parked_polling = (req.flags & kParkPolling) != 0;
      if (s->concerned || !s->dirty.empty()) Wake(s, /*idle=*/false);
      return;
    }
    Message reply;
    std::string why;
    if (!ServeRequest(*this, s, h.op, req, tail, h.tail_bytes, &reply, &why)) {
      Drop(s, why.c_str());
      return;
    }
    if (!s->dirty.empty()) {
      Reply r;
      std::memcpy(&r, reply.bytes().data() + sizeof(Header), sizeof r);
      r.dirty_pending = static_cast<uint32_t>(s->dirty.size());
      std::memcpy(reply.mutable_bytes().data() + sizeof(Header), &r, sizeof r);
    }
    if (!Send(s, reply)) Drop(s, "cannot be written to");
  }

  // kHello: the process's node, protocol version and memfd. Empty when
  // accepted.
  std::string Hello(Session* s, const Request& req, int memfd) {
    std::string refused = TakeHello(s, req, memfd);
    // A memfd the session did not keep (a refused hello's, an address
    // session's) is closed.
    if (memfd >= 0 && s->memfd != memfd) close(memfd);
    return refused;
  }
  std::string TakeHello(Session* s, const Request& req, int memfd) {
    if (s->node >= 0 || s->address_only) return "said hello twice";
    const int32_t node = static_cast<int32_t>(req.handle);
    if (req.count != kProtocolVersion) {
      return "speaks protocol version " + std::to_string(req.count) +
             ", this daemon " + std::to_string(kProtocolVersion);
    }
    if (node == kAddressSessionNode) {
      s->address_only = true;
      Reply reply;
      Message m(Op::kHello, &reply, sizeof reply);
      return SendOnSocket(s, m) ? "" : "cannot be written to";
    }
    if (node < 0 || static_cast<size_t>(node) >= nodes_.size()) {
      return "asked for node " + std::to_string(node) + " of a fabric of " +
             std::to_string(nodes_.size());
    }
    if (nodes_[static_cast<size_t>(node)] != nullptr || taken(node)) {
      return "asked for node " + std::to_string(node) + ", already taken";
    }
    if (memfd < 0) return "sent no shared memory";
    // The daemon writes into this memory: were it to shrink under a shadow,
    // the write would kill the daemon (SIGBUS) and every process with it.
    // So it is sealed against shrinking, and registrations must lie inside
    // it (server_requests.cc).
    // Only an ordinary memfd (tmpfs): a hugetlbfs one maps without
    // reserving its pages, and the first write could meet none (SIGBUS).
    struct stat st {};
    struct statfs fs {};
    if (fstatfs(memfd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) {
      return "sent shared memory that is not an ordinary memfd (tmpfs)";
    }
    if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
        fstat(memfd, &st) != 0 ||
        static_cast<uint64_t>(st.st_size) < kShadowStart) {
      return "sent shared memory that cannot be sealed against shrinking "
             "(a memfd made with MFD_ALLOW_SEALING) or is smaller than its "
             "header and mailbox";
    }
    void* window = mmap(nullptr, kWindowBytes, PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_NORESERVE, memfd, 0);
    if (window == MAP_FAILED) return "shared memory cannot be mapped";
    s->memfd = memfd;
    s->window = static_cast<uint8_t*>(window);
    s->node = node;
    s->device = fabric_->device(node);
    nodes_[static_cast<size_t>(node)] = s;
    ever_connected_.push_back(node);
    ++summary_.nodes_connected;
    WriteClock(s);
    SetAsyncEventFlag(s, s->device->AsyncEventPending().value_or(true));
    Reply reply;
    reply.now_ns = fabric_->clock().NowNs();
    Message m(Op::kHello, &reply, sizeof reply);
    if (!SendOnSocket(s, m)) return "cannot be written to";
    return "";
  }
  // An address session's requests (address_book.h).
  void ServeAddress(Session* s, Op op, const Request& req, const uint8_t* tail,
                    uint32_t tail_bytes) {
    Reply r;
    EndpointName name{};
    const uint32_t ip = static_cast<uint32_t>(req.a);
    const uint16_t port = static_cast<uint16_t>(req.b);
    if ((op != Op::kBindAddress && op != Op::kLookUpAddress) ||
        req.a > UINT32_MAX || req.b > UINT16_MAX ||
        (op == Op::kBindAddress && tail_bytes != kNameBytes)) {
      Drop(s, "an address session may only bind and look up addresses");
      return;
    }
    std::optional<EndpointName> found;
    if (op == Op::kBindAddress) {
      std::memcpy(name.data(), tail, kNameBytes);
      if (!book_.Bind(s, ip, port, name)) r.status = EADDRINUSE;
    } else {
      found = book_.Find(ip, port);
      if (!found) r.status = ECONNREFUSED;
    }
    Message m(op, &r, sizeof r);
    if (found) m.AppendBytes(found->data(), found->size());
    if (!Send(s, m)) Drop(s, nullptr);
  }
  // The node of the process an address session belongs to (its pid's node
  // session), or -1.
  int32_t NodeOfOwner(const void* owner) const {
    pid_t pid = 0;
    for (const auto& s : sessions_) {
      if (s.get() == owner) pid = s->pid;
    }
    for (const auto& s : sessions_) {
      if (s->pid == pid && s->node >= 0) return s->node;
    }
    return -1;
  }

  bool taken(int32_t node) const {
    return std::find(ever_connected_.begin(), ever_connected_.end(), node) !=
           ever_connected_.end();
  }

  using Advancing = TimeGate::Verdict;
  Advancing CanAdvance() {
    return gate_.Check(sessions_, ever_connected_.size(), WallMs(), MonoNs());
  }

  void Advance(Advancing how) {
    if (how == Advancing::kLook) {
      ++summary_.look_rounds;
      for (Session* s : watch_.TakeLooks()) Wake(s, /*idle=*/false);
      return;
    }
    watch_.Moved();
    const bool patient = how == Advancing::kSomeoneOutside;
    if (patient && fabric_->pending_events() == 0 && !AnyHeld()) return;
    ++summary_.advances;
    if (how != Advancing::kEveryoneParked) ++summary_.outside_advances;
    fabric_->HoldDoorbells(false);
    bool woke = false;
    while (!woke) {
      for (const auto& s : sessions_) {
        if (s->parked && (s->concerned || !s->dirty.empty())) woke = true;
      }
      if (woke) break;
      uint64_t deadline = UINT64_MAX;
      for (const auto& s : sessions_) {
        if (s->parked) deadline = std::min(deadline, s->deadline_ns);
      }
      const uint64_t next = fabric_->next_event_ns();
      if (patient && next == UINT64_MAX) break;  // wait for the outsider
      if (patient) deadline = UINT64_MAX;        // and fire no deadline
      if (next == UINT64_MAX && deadline == UINT64_MAX) {
        // Nothing will ever happen: every parked call returns (an unbounded
        // wait reports the fabric idle).
        for (const auto& s : sessions_) s->idle = true;
        break;
      }
      if (deadline < next) {
        fabric_->RunUntil(deadline);
        for (const auto& s : sessions_) {
          if (s->parked && s->deadline_ns <= deadline) s->concerned = true;
        }
        continue;
      }
      fabric_->Step();
    }
    fabric_->HoldDoorbells(true);
    requests_since_advance_ = 0;
    // Sessions may be dropped while waking (a write fails): iterate a copy.
    std::vector<Session*> all;
    for (const auto& s : sessions_) all.push_back(s.get());
    for (Session* s : all) {
      WriteClock(s);
      const bool idle = s->idle;
      s->idle = false;
      // Last use of `s`: a failed write drops (deletes) it.
      if (s->parked && (s->concerned || !s->dirty.empty() || idle)) {
        Wake(s, idle && !s->concerned && s->dirty.empty());
      }
    }
  }

  // Answers a parked session's kPark: the ranges written into its memory
  // and the channels with events, then it runs again.
  void Wake(Session* s, bool idle) {
    Reply reply;
    reply.now_ns = fabric_->clock().NowNs();
    reply.a = idle ? 1 : 0;
    const size_t ranges = std::min<size_t>(s->dirty.size(), kRangesMax);
    reply.count = static_cast<uint32_t>(ranges);
    std::vector<uint32_t> channels = ChannelsWithEvents(s);
    reply.handle = static_cast<uint32_t>(channels.size());
    Message m(Op::kPark, &reply, sizeof reply);
    for (size_t i = 0; i < ranges; ++i) m.Append(s->dirty[i]);
    for (uint32_t c : channels) m.Append(c);
    s->dirty.erase(s->dirty.begin(),
                   s->dirty.begin() + static_cast<ptrdiff_t>(ranges));
    s->parked = false;
    s->concerned = !s->dirty.empty();  // more than one reply's worth
    if (!Send(s, m)) Drop(s, "cannot be written to");
  }

  // Whether requests since the last advance left doorbells or wakeups held.
  bool AnyHeld() const { return requests_since_advance_ > 0; }

  void WriteClock(Session* s) {
    if (s->window == nullptr) return;
    const uint64_t now = fabric_->clock().NowNs();
    __atomic_store_n(reinterpret_cast<uint64_t*>(s->window), now,
                     __ATOMIC_RELEASE);
  }

  // A reply: into a node session's mailbox (ringing it if it sleeps), else
  // on the socket.
  bool Send(Session* s, const Message& m) {
    if (s->node < 0 || s->window == nullptr) return SendOnSocket(s, m);
    const std::vector<uint8_t>& b = m.bytes();
    if (b.size() > kMessageBytesMax) return false;
    if (Mailbox(s->window).PutReply(++s->reply_seq, b.data(), b.size())) {
      const char bell = 1;
      if (send(s->fd, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
          errno != EAGAIN) {
        return false;
      }
    }
    return true;
  }
  bool SendOnSocket(Session* s, const Message& m) {
    const std::vector<uint8_t>& b = m.bytes();
    return send(s->fd, b.data(), b.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(b.size());
  }

  void Watchdog() {
    const uint64_t now = WallMs();
    for (const auto& s : sessions_) {
      if (s->parked || s->node < 0) continue;
      if (now - s->last_heard_ms > options_.watchdog_ms && !s->named) {
        s->named = true;
        std::fprintf(options_.log,
                     "softfab: node %d (pid %d) has kept the fabric "
                     "from advancing for %llu ms: it is neither parked in a "
                     "call nor gone; %s\n",
                     s->node, static_cast<int>(s->pid),
                     static_cast<unsigned long long>(now - s->last_heard_ms),
                     gate_.WhyNotAsleep(sessions_, s.get()));
      }
      if (now - s->last_heard_ms <= options_.watchdog_ms) s->named = false;
    }
  }

  // Ends a session: its node's objects stay in the fabric (its HCA model
  // keeps answering) and its memory is unmapped. `why` (may be null) is
  // logged when the session broke the protocol.
  void Drop(Session* s, const char* why) {
    if (why != nullptr) {
      ++summary_.clients_refused;
      std::fprintf(options_.log,
                   "softfab fabricd: dropped node %d (pid %d): %s\n", s->node,
                   static_cast<int>(s->pid), why);
    }
    watch_.Forget(s->pid);
    if (s->node >= 0) {
      nodes_[static_cast<size_t>(s->node)] = nullptr;
      fabric_->HaltNode(s->node);  // its HCA answers no more
    }
    book_.Unbind(s);
    // The window stays mapped until the daemon ends: the node's objects live
    // on in the fabric, and an event still under way (this may be one) may
    // touch their memory.
    if (s->window != nullptr) retired_windows_.push_back(s->window);
    s->window = nullptr;
    if (s->memfd >= 0) close(s->memfd);
    close(s->fd);
    auto it = std::find_if(sessions_.begin(), sessions_.end(),
                           [s](const auto& p) { return p.get() == s; });
    if (it != sessions_.end()) sessions_.erase(it);
  }

  const ServerOptions options_;
  std::unique_ptr<sim::SimFabric> fabric_;
  int listen_fd_ = -1;
  std::vector<std::unique_ptr<Session>> sessions_;  // in connection order
  std::vector<Session*> nodes_;                     // by node
  std::vector<Session*> node_sessions_;             // NodeSessions()'s
  std::vector<int32_t> ever_connected_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(kMessageBytesMax);
  // Answers to pulls (during an advance).
  std::vector<uint8_t> pull_buf_ = std::vector<uint8_t>(kMessageBytesMax);
  std::vector<uint8_t*> retired_windows_;  // of sessions gone, unmapped last
  RunSummary summary_;
  uint64_t requests_since_advance_ = 0;
  ThreadWatch watch_{getpid(), options_.watchdog_ms, options_.log};
  TimeGate gate_{options_.expected_nodes, options_.outside_ms,
                 options_.watchdog_ms, &watch_};
  SpinGovernor spin_;  // whether the loop may spin (spin_governor.h)
  std::unique_ptr<sim::PcapCapture> pcap_;
  std::unique_ptr<CompletionTrace> trace_;
  AddressBook book_{[this](const void* owner) { return NodeOfOwner(owner); }};
};

}  // namespace
}  // namespace internal

StatusOr<std::unique_ptr<FabricServer>> CreateFabricServer(
    const ServerOptions& options, std::string* why) {
  auto server = std::make_unique<internal::Server>(options);
  if (Status s = server->Init(why); !s.ok()) return s;
  return std::unique_ptr<FabricServer>(std::move(server));
}

}  // namespace softfab::simd
