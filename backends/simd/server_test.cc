// The fabric daemon against processes that break the protocol, spoken raw
// (a socket, a hello with a memfd, then the mailbox): memory that could
// shrink under the daemon is refused, registrations beyond the memory a
// process shares are refused, and a process that writes nonsense into its
// mailbox is dropped while another one goes on being served.
#include "backends/simd/server.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "backends/simd/client.h"
#include "backends/simd/mailbox.h"
#include "backends/simd/protocol.h"
#include "backends/simd/test_daemon.h"
#include "gtest/gtest.h"
#include "transport/transport.h"

namespace softfab::simd {
namespace {

namespace tp = ::softfab::transport;

// One process's side, spoken by hand.
class RawClient {
 public:
  ~RawClient() {
    if (window_ != nullptr) munmap(window_, kWindowBytes);
    if (memfd_ >= 0) close(memfd_);
    if (fd_ >= 0) close(fd_);
  }
  // Connects and says hello as `node` with a memfd of `bytes` made with
  // `memfd_flags`. True when the daemon answered the hello.
  bool Hello(const std::string& path, int node, unsigned memfd_flags,
             uint64_t bytes) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return false;
    }
    memfd_ = memfd_create("raw", memfd_flags);
    if (memfd_ < 0 || ftruncate(memfd_, static_cast<off_t>(bytes)) != 0) {
      return false;
    }
    void* w = mmap(nullptr, kWindowBytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_NORESERVE, memfd_, 0);
    window_ = w == MAP_FAILED ? nullptr : static_cast<uint8_t*>(w);
    if (!SendHello(fd_, node, memfd_)) return false;
    std::vector<uint8_t> buf(kMessageBytesMax);
    return recv(fd_, buf.data(), buf.size(), 0) > 0;
  }
  // One call through the mailbox: the reply's status (an errno), or -1 when
  // the daemon hung up instead, or -2 when no reply came within 10 s. With
  // `spin`, the reply slot is watched without sleeping (no look at the
  // socket between): calls as close together as a program's, so that the
  // daemon spins between them.
  int Call(Op op, const Request& req, Reply* reply = nullptr,
           bool spin = false) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    Message m(op, &req, sizeof req);
    Mailbox box(window_);
    if (box.PutRequest(++seq_, m.bytes().data(), m.bytes().size())) Ring();
    reply_buf_.resize(kMessageBytesMax);
    while (true) {
      const long n = box.TakeReply(&seen_, reply_buf_.data());
      if (n > 0) {
        Header h;
        Reply r;
        const uint8_t* tail = nullptr;
        if (!Decode(reply_buf_.data(), static_cast<size_t>(n), &h, &r, &tail)) {
          return -1;
        }
        if (reply != nullptr) *reply = r;
        return r.status;
      }
      if (!spin && HungUp(10)) return -1;
      if (std::chrono::steady_clock::now() > deadline) return -2;
    }
  }
  // Whether the daemon closed the connection within `ms` (a reset when it
  // closed with our doorbell still unread).
  bool HungUp(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) != 1) return false;
    char b[64];
    const ssize_t n = recv(fd_, b, sizeof b, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  void Ring() { (void)send(fd_, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT); }
  int memfd() const { return memfd_; }
  uint8_t* window() const { return window_; }
  uint32_t next_seq() { return ++seq_; }

 private:
  int fd_ = -1;
  int memfd_ = -1;
  uint8_t* window_ = nullptr;
  uint32_t seq_ = 0;
  uint32_t seen_ = 0;
  std::vector<uint8_t> reply_buf_;
};

TEST(FabricDaemon, MemoryThatCouldShrinkIsRefused) {
  TestDaemon d;
  RawClient c;
  EXPECT_FALSE(c.Hello(d.path(), 0, 0, kShadowStart));
  EXPECT_NE(d.Log().find("sealed against shrinking"), std::string::npos)
      << d.Log();
}

TEST(FabricDaemon, SharedMemoryCannotShrinkOnceAccepted) {
  TestDaemon d;
  RawClient c;
  ASSERT_TRUE(c.Hello(d.path(), 0, MFD_ALLOW_SEALING, kShadowStart + 4096));
  EXPECT_NE(ftruncate(c.memfd(), 4096), 0);
  EXPECT_EQ(errno, EPERM);
  // Growing is still allowed.
  EXPECT_EQ(ftruncate(c.memfd(), kShadowStart + 8192), 0);
}

TEST(FabricDaemon, RegistrationBeyondTheSharedMemoryIsRefused) {
  TestDaemon d;
  RawClient c;
  ASSERT_TRUE(c.Hello(d.path(), 1, MFD_ALLOW_SEALING, kShadowStart + 4096));
  Reply pd;
  ASSERT_EQ(c.Call(Op::kAllocPd, Request{}, &pd), 0);
  Request reg;
  reg.handle = pd.handle;
  reg.a = 0x10000;
  reg.flags = 1;  // local write
  reg.c = kShadowStart;
  reg.b = 4096;  // inside the file: accepted
  EXPECT_EQ(c.Call(Op::kRegMr, reg), 0);
  reg.b = 8192;  // past its end
  EXPECT_EQ(c.Call(Op::kRegMr, reg), EINVAL);
  reg.c = kShadowStart - 64;  // over the mailbox
  reg.b = 64;
  EXPECT_EQ(c.Call(Op::kRegMr, reg), EINVAL);
}

TEST(FabricDaemon, NonsenseInOneMailboxDropsOnlyThatProcess) {
  TestDaemon d;
  RawClient bad, good;
  ASSERT_TRUE(bad.Hello(d.path(), 0, MFD_ALLOW_SEALING, kShadowStart));
  ASSERT_TRUE(good.Hello(d.path(), 1, MFD_ALLOW_SEALING, kShadowStart));
  ASSERT_EQ(good.Call(Op::kAllocPd, Request{}), 0);
  // A request size past the slot, then its number and the doorbell.
  const uint32_t huge = 0xffffffff, seq = bad.next_seq();
  std::memcpy(bad.window() + Mailbox::kRequestBytes, &huge, sizeof huge);
  __atomic_store_n(
      reinterpret_cast<uint32_t*>(bad.window() + Mailbox::kRequestSeq), seq,
      __ATOMIC_SEQ_CST);
  bad.Ring();
  EXPECT_TRUE(bad.HungUp(5000));
  EXPECT_NE(d.Log().find("impossible size"), std::string::npos) << d.Log();
  EXPECT_EQ(good.Call(Op::kAllocPd, Request{}), 0);
  // A well-sized request that is not a message at all.
  RawClient worse;
  ASSERT_TRUE(worse.Hello(d.path(), 2, MFD_ALLOW_SEALING, kShadowStart));
  uint8_t junk[64];
  std::memset(junk, 0xa5, sizeof junk);
  Mailbox(worse.window()).PutRequest(worse.next_seq(), junk, sizeof junk);
  worse.Ring();
  EXPECT_TRUE(worse.HungUp(5000));
  EXPECT_NE(d.Log().find("malformed"), std::string::npos) << d.Log();
  EXPECT_EQ(good.Call(Op::kAllocPd, Request{}), 0);
}

TEST(FabricDaemon, HugePageMemoryIsRefused) {
  // A hugetlbfs memfd maps without reserving its pages: the daemon's first
  // write could meet none and die of SIGBUS.
  const int probe = memfd_create("probe", MFD_HUGETLB);
  if (probe < 0) GTEST_SKIP() << "no hugetlbfs memfd on this kernel";
  close(probe);
  TestDaemon d;
  RawClient c;
  EXPECT_FALSE(
      c.Hello(d.path(), 0, MFD_HUGETLB | MFD_ALLOW_SEALING, uint64_t{2} << 20));
  EXPECT_NE(d.Log().find("not an ordinary memfd"), std::string::npos)
      << d.Log();
}

// Descriptors this process holds (the daemon runs in it, on a thread).
int OpenFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

TEST(FabricDaemon, RefusedHellosLeaveNoDescriptorBehind) {
  TestDaemon d;
  const int before = OpenFds();
  for (int i = 0; i < 20; ++i) {
    RawClient c;  // node 99 of a fabric of 4: refused
    EXPECT_FALSE(c.Hello(d.path(), 99, MFD_ALLOW_SEALING, kShadowStart));
  }
  // The daemon closes the refused sessions' sockets and memfds as it drops
  // them; give it a moment to get through the last.
  int after = OpenFds();
  for (int i = 0; i < 100 && after != before; ++i) {
    usleep(10'000);
    after = OpenFds();
  }
  EXPECT_EQ(after, before);
}

TEST(FabricDaemon, ADoorbellFloodDoesNotStopTheOthers) {
  TestDaemon d;
  RawClient flooder, good;
  ASSERT_TRUE(flooder.Hello(d.path(), 0, MFD_ALLOW_SEALING, kShadowStart));
  ASSERT_TRUE(good.Hello(d.path(), 1, MFD_ALLOW_SEALING, kShadowStart));
  std::atomic<bool> stop{false};
  std::thread flood([&] {
    while (!stop.load()) flooder.Ring();
  });
  // Every call is served while the flood goes on.
  int served = 0;
  while (served < 50 && good.Call(Op::kAllocPd, Request{}) == 0) ++served;
  stop = true;
  flood.join();
  EXPECT_EQ(served, 50);
}

// Node 0 in a child process, outside the fabric between its calls: says
// hello, runs `body(c, ready_fd, wake_fd)` and exits 0 (2: refused). The
// test keeps `ready`'s read end and `wake`'s write end.
class OutsideNode {
 public:
  template <typename Body>
  OutsideNode(const std::string& path, Body body) {
    if (pipe(ready_) != 0 || pipe(wake_) != 0) return;
    pid_ = fork();
    if (pid_ != 0) {
      close(ready_[1]);
      close(wake_[0]);
      return;
    }
    close(ready_[0]);
    close(wake_[1]);
    RawClient c;
    if (!c.Hello(path, 0, MFD_ALLOW_SEALING, kShadowStart)) _exit(2);
    body(c, ready_[1], wake_[0]);
    _exit(0);
  }
  int ready() const { return ready_[0]; }
  int wake() const { return wake_[1]; }
  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Ends its wait on `wake` and returns whether it exited 0.
  bool Finish() {
    close(wake_[1]);
    int status = 0;
    waitpid(pid_, &status, 0);
    close(ready_[0]);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

 private:
  int ready_[2] = {-1, -1};
  int wake_[2] = {-1, -1};
  pid_t pid_ = -1;
};

// A process asleep outside the fabric (here on a pipe) counts as parked;
// once something outside wakes it, time must wait for it again at once,
// not a millisecond later. The daemon looks at /proc at most once a
// millisecond per process while it spins, and used to let that look stand:
// a process woken by a TCP byte could answer it, and the peer that byte
// released could post and park, all within the millisecond, and time moved
// past the completions the woken process was running to poll (fi_pingpong
// under loss took a second path in about one run of three).
TEST(FabricDaemon, AProcessWokenOutsideTheFabricHoldsTimeAtOnce) {
  TestDaemon d;
  // Node 0 sleeps on the pipe; each byte wakes it to run 20 ms without a
  // call (as a program computes between its calls), say so, and sleep again.
  OutsideNode node0(d.path(), [](RawClient&, int ready, int wake) {
    (void)!write(ready, "r", 1);
    char b;
    while (read(wake, &b, 1) == 1) {
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      while (std::chrono::steady_clock::now() < until) {
      }
      (void)!write(ready, "d", 1);
    }
  });
  ASSERT_TRUE(node0.started());
  char b;
  ASSERT_EQ(read(node0.ready(), &b, 1),
            1);  // node 0 first in the daemon's eyes
  RawClient node1;
  ASSERT_TRUE(node1.Hello(d.path(), 1, MFD_ALLOW_SEALING, kShadowStart));
  int early = 0;
  for (int i = 0; i < 20; ++i) {
    // Calls for 5 ms, so that the daemon spins, looking at node 0 (asleep
    // long enough to count as parked) every millisecond; then wake it, and
    // park at once.
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
    while (std::chrono::steady_clock::now() < until) {
      ASSERT_EQ(node1.Call(Op::kRandom, Request{}, nullptr, /*spin=*/true), 0);
    }
    ASSERT_EQ(write(node0.wake(), "w", 1), 1);
    // Parked with a deadline: an advance fires it and wakes us.
    Request park;
    park.c = 1'000'000ull * (i + 1);
    ASSERT_EQ(node1.Call(Op::kPark, park), 0);
    // Time moved: node 0 must have finished running and be asleep again.
    pollfd p{node0.ready(), POLLIN, 0};
    if (poll(&p, 1, 0) != 1) ++early;
    ASSERT_EQ(read(node0.ready(), &b, 1), 1);
    EXPECT_EQ(b, 'd');
  }
  EXPECT_EQ(early, 0) << "time moved while node 0 ran, in " << early
                      << " of 20 tries";
  EXPECT_TRUE(node0.Finish());
}

// A doorbell can be left unread: a process about to sleep for its reply
// says so, then sees the reply already there and takes it without reading
// the socket, while the daemon, having seen it say so, rings. The process
// then runs outside the fabric with that byte queued, and the daemon took
// any byte queued to a sleeper for one about to wake it: time never moved
// again (fi_pingpong, the server waiting on TCP for a client parked in the
// fabric, stopped in about one run of fifteen). Here node 0 leaves a
// doorbell so and sleeps on a pipe; node 1 parks with a deadline, which
// time must reach.
TEST(FabricDaemon, ALeftOverDoorbellDoesNotHoldTime) {
  TestDaemon d;
  OutsideNode node0(d.path(), [](RawClient& c, int ready, int wake) {
    // About to sleep, then the reply seen in the slot (spin: the socket is
    // not read): the daemon's doorbell stays queued.
    Mailbox(c.window()).SetClientSleeps(true);
    if (c.Call(Op::kRandom, Request{}, nullptr, /*spin=*/true) != 0) _exit(3);
    Mailbox(c.window()).SetClientSleeps(false);
    (void)!write(ready, "r", 1);
    char b;
    (void)!read(wake, &b, 1);  // asleep outside the fabric
  });
  ASSERT_TRUE(node0.started());
  char b;
  ASSERT_EQ(read(node0.ready(), &b, 1), 1);
  RawClient node1;
  ASSERT_TRUE(node1.Hello(d.path(), 1, MFD_ALLOW_SEALING, kShadowStart));
  Request park;
  park.c = 1'000'000;  // 1 ms of virtual time
  // -2: no wake within 10 s of wall time.
  EXPECT_EQ(node1.Call(Op::kPark, park), 0);
  EXPECT_TRUE(node0.Finish());
}

// The watchdog names a process that holds time and says why, so that a run
// that stops can be read from its log. Node 0 runs `outside` (told to stop
// by a byte on `wake`) while node 1 parks; node 1's park returns once node 0
// is gone.
void ExpectHeldBecause(void (*outside)(int ready, int wake),
                       const std::string& reason) {
  TestDaemon d({}, /*watchdog_ms=*/200);
  OutsideNode node0(d.path(), [outside](RawClient&, int ready, int wake) {
    outside(ready, wake);
  });
  ASSERT_TRUE(node0.started());
  char b;
  ASSERT_EQ(read(node0.ready(), &b, 1), 1);
  RawClient node1;
  ASSERT_TRUE(node1.Hello(d.path(), 1, MFD_ALLOW_SEALING, kShadowStart));
  int parked = -3;
  std::thread park([&] {
    Request r;
    r.c = 1'000'000;
    parked = node1.Call(Op::kPark, r);
  });
  for (int i = 0; i < 500 && d.Log().find(reason) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string log = d.Log();
  EXPECT_NE(log.find("node 0 (pid " + std::to_string(node0.pid()) +
                     ") has kept the fabric from advancing"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(reason), std::string::npos) << log;
  ASSERT_EQ(write(node0.wake(), "w", 1), 1);
  EXPECT_TRUE(node0.Finish());
  park.join();
  EXPECT_EQ(parked, 0);  // node 0 gone: time moved
}

TEST(FabricDaemon, TheWatchdogSaysAProcessIsAtWork) {
  ExpectHeldBecause(
      [](int ready, int wake) {
        (void)!write(ready, "r", 1);
        pollfd p{wake, POLLIN, 0};
        while (poll(&p, 1, 0) == 0) {
        }
      },
      "a thread of it is at work");
}

TEST(FabricDaemon, TheWatchdogSaysBytesAreOnTheirWayToASleeper) {
  ExpectHeldBecause(
      [](int ready, int wake) {
        // A byte queued to it by a socket of its own: about to wake, as far
        // as the daemon can tell.
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) _exit(3);
        if (write(sp[0], "x", 1) != 1) _exit(3);
        (void)!write(ready, "r", 1);
        char b;
        (void)!read(wake, &b, 1);
      },
      "it sleeps outside the fabric, but bytes are on their way to it or "
      "another process of the run");
}

// Open MPI's ranks wait for the launcher's fence release in a loop that
// polls the fabric and sleeps 100 us, until a flag set by another thread of
// theirs (PMIx's, which reads the release from a socket) clears. A rank's
// empty poll parks it; were time to move while the release was on its way
// (in the launcher, or in the rank's other thread), the rank would act on
// it at a later virtual time in some runs than in others. Here a launcher
// process starts a rank (node 0) whose second thread takes each release
// from a pipe; the test, node 1, sends the launcher a release and parks at
// once with a deadline 1 ms ahead. The rank must act on its release (here:
// read the virtual time) before time moves, in every try.
TEST(FabricDaemon, ARankReleasedByAnotherOfItsThreadsActsBeforeTimeMoves) {
  TestDaemon d;
  constexpr int kTries = 20;
  int trigger[2], report[2];
  ASSERT_EQ(pipe(trigger), 0);
  ASSERT_EQ(pipe(report), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    close(trigger[1]);
    close(report[0]);
    int release[2];
    if (pipe(release) != 0) _exit(2);
    const pid_t rank = fork();
    if (rank < 0) _exit(2);
    if (rank == 0) {
      close(release[1]);
      RawClient c;
      if (!c.Hello(d.path(), 0, MFD_ALLOW_SEALING, kShadowStart)) _exit(3);
      std::atomic<int> released{0};
      std::thread pmix([&] {
        char b;
        while (read(release[0], &b, 1) == 1) ++released;
      });
      uint64_t ready = 0;
      (void)!write(report[1], &ready, sizeof ready);
      Request poll;
      poll.c = UINT64_MAX;  // no deadline
      poll.flags = kParkPolling;
      poll.b = static_cast<uint64_t>(gettid());
      Request now;
      now.flags = 1;  // the ranges so far and the time, no waiting
      for (int i = 0; i < kTries; ++i) {
        while (released.load() <= i) {
          if (c.Call(Op::kPark, poll) != 0) _exit(4);
          usleep(100);
        }
        Reply r;
        if (c.Call(Op::kPark, now, &r) != 0) _exit(5);
        (void)!write(report[1], &r.now_ns, sizeof r.now_ns);
      }
      close(release[0]);  // only after the thread is done with it
      pmix.join();
      _exit(0);
    }
    close(release[0]);
    char b;
    while (read(trigger[0], &b, 1) == 1) {
      if (write(release[1], &b, 1) != 1) _exit(6);
    }
    close(release[1]);
    int status = 0;
    waitpid(rank, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 7);
  }
  close(trigger[0]);
  close(report[1]);
  uint64_t t = 0;
  ASSERT_EQ(read(report[0], &t, sizeof t), static_cast<ssize_t>(sizeof t));
  RawClient node1;
  ASSERT_TRUE(node1.Hello(d.path(), 1, MFD_ALLOW_SEALING, kShadowStart));
  uint64_t now = 0;
  int late = 0;
  for (int i = 0; i < kTries; ++i) {
    ASSERT_EQ(write(trigger[1], "r", 1), 1);
    Request park;
    park.c = now + 1'000'000;
    Reply woken;
    ASSERT_EQ(node1.Call(Op::kPark, park, &woken), 0);
    // A rank still parked with nothing for it returns when nothing more
    // can happen.
    Request idle;
    idle.c = UINT64_MAX;
    ASSERT_EQ(node1.Call(Op::kPark, idle), 0);
    ASSERT_EQ(read(report[0], &t, sizeof t), static_cast<ssize_t>(sizeof t));
    if (t != now) ++late;
    now = woken.now_ns;
  }
  EXPECT_EQ(late, 0) << "time moved before the rank acted on its release, in "
                     << late << " of " << kTries << " tries";
  close(trigger[1]);
  int status = 0;
  waitpid(launcher, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(report[0]);
}

// The core looks for async events at every progress, so a process must see
// without a request whether any wait: a byte in its header page, set by the
// daemon when its node's device queues one (here the port going down at
// 1 ms) and cleared when the last one is taken.
TEST(FabricDaemon, AnAsyncEventShowsInTheHeaderPageUntilTaken) {
  sim::TimedFault down;
  down.kind = sim::TimedFaultKind::kLinkDown;
  down.time_ns = 1'000'000;
  down.node = 0;
  sim::FaultPlan faults;
  faults.timed_faults = {down};
  TestDaemon d(faults);
  std::string why;
  auto backend = ConnectSimdBackend(d.path(), 0, &why);
  ASSERT_TRUE(backend.ok()) << why;
  auto device = (*backend)->OpenDevice(0, &why);
  ASSERT_TRUE(device.ok()) << why;
  tp::Device* dev = *device;
  ASSERT_TRUE(dev->AsyncEventPending().has_value());
  EXPECT_FALSE(*dev->AsyncEventPending());
  tp::AsyncEvent e;
  EXPECT_EQ(dev->GetAsyncEvent(&e).code(), EAGAIN);
  // Nothing to do: time moves to the fault, which concerns node 0.
  (*backend)->NothingToRead();
  EXPECT_GE(dev->clock().NowNs(), 1'000'000u);
  EXPECT_TRUE(dev->AsyncEventPending().value_or(false));
  ASSERT_TRUE(dev->GetAsyncEvent(&e).ok());
  EXPECT_EQ(e.event_type, tp::AsyncEventType::kPortErr);
  EXPECT_EQ(e.time_ns, 1'000'000u);
  EXPECT_FALSE(dev->AsyncEventPending().value_or(true));
  EXPECT_EQ(dev->GetAsyncEvent(&e).code(), EAGAIN);
  (*backend)->CloseDevice(dev);
}

}  // namespace
}  // namespace softfab::simd
