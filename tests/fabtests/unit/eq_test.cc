// fabtests unit/eq_test on sf_*: event queues opened at every size, read with
// and without SF_PEEK, filled to their size, waited on with a timeout
// (sf_eq_sread), and sf_eq_readerr on a queue without errors. softfab has no
// sf_eq_write (fi_eq_write), so the events are real ones: connection requests
// from SF_EP_MSG endpoints on node 1 to a listener on node 0, each carrying
// its number as private data. Left out: eq_wait_fd_poll (an sf_eq has no wait
// object; only CQs have SF_WAIT_FD) and the FI_NOTIFY entries fabtests writes
// from the fabric's fid (no user-written events).
// A deliberate difference: a timed-out sf_eq_sread returns -SF_ETIMEDOUT, not
// libfabric's -FI_EAGAIN, so a caller can tell a timeout from a poll.
#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

uint64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

class FabtestsEqTest : public FabtestsCase {
 protected:
  bool sim() const { return backend().backend == SF_BACKEND_SIM; }

  // A listener on node 0 whose queue holds `size` events (0: the default).
  void Listen(size_t size) {
    ASSERT_TRUE(f.Open(backend(), 2));
    sf_eq_attr attr{};
    attr.size = size;
    ASSERT_EQ(sf_eq_open(f.fabric, &attr, &eq_, nullptr), 0) << sf_last_error();
    closer_.Add(&eq_->fid);
    ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &client_eq_, nullptr), 0);
    closer_.Add(&client_eq_->fid);
    ASSERT_EQ(sf_passive_ep(f.peers[0].domain, &pep_, nullptr), 0);
    closer_.Add(&pep_->fid);
    size_t len = sizeof name_;
    ASSERT_EQ(sf_pep_bind(pep_, &eq_->fid, 0), 0);
    ASSERT_EQ(sf_listen(pep_), 0) << sf_last_error();
    ASSERT_EQ(sf_getname(&pep_->fid, name_, &len), 0);
  }

  // `n` more endpoints on node 1 connect, each with its number as data.
  void Connect(int n) {
    for (int i = 0; i < n; ++i) {
      clients_.push_back(std::make_unique<MsgEndpoint>());
      MsgEndpoint& c = *clients_.back();
      ASSERT_TRUE(c.Open(f, closer_, 1, client_eq_));
      cqs_.push_back(c.cq);
      const uint8_t data = static_cast<uint8_t>(clients_.size() - 1);
      ASSERT_EQ(sf_connect(c.ep, name_, &data, 1), 0) << sf_last_error();
    }
  }

  // Reads the listener's queue (waiting for an event); checks it is a
  // request from one of the clients and returns its number, -1 if none came.
  int Read(uint64_t flags) {
    CmEvent ev;
    uint32_t event = ~0u;
    const ssize_t n =
        ReadEq(f, eq_, &event, ev.bytes, sizeof ev.bytes, flags, cqs_);
    return Check(n, event, ev, flags);
  }
  int Check(ssize_t n, uint32_t event, CmEvent& ev, uint64_t flags) {
    EXPECT_EQ(n, static_cast<ssize_t>(sizeof(sf_eq_cm_entry) + 1))
        << sf_last_error();
    if (n != static_cast<ssize_t>(sizeof(sf_eq_cm_entry) + 1)) return -1;
    EXPECT_EQ(event, static_cast<uint32_t>(SF_CONNREQ));
    EXPECT_EQ(ev.entry()->fid, &pep_->fid);
    EXPECT_NE(ev.entry()->info, nullptr);
    // A consuming read's request is the caller's; a peek's, the queue's.
    if (!(flags & SF_PEEK)) sf_freeinfo(ev.entry()->info);
    return ev.entry()->data[0];
  }

  Closer closer_;
  sf_eq* eq_ = nullptr;
  sf_eq* client_eq_ = nullptr;
  sf_pep* pep_ = nullptr;
  uint8_t name_[SF_NAME_BYTES] = {};
  std::vector<std::unique_ptr<MsgEndpoint>> clients_;
  std::vector<sf_cq*> cqs_;
};

// eq_open_close: queues of 1 to 2^16 events open and close.
TEST_P(FabtestsEqTest, OpenCloseSizes) {
  ASSERT_TRUE(f.Open(backend(), 1));
  for (int i = 0; i < 17; ++i) {
    sf_eq_attr attr{};
    attr.size = size_t{1} << i;
    sf_eq* eq = nullptr;
    ASSERT_EQ(sf_eq_open(f.fabric, &attr, &eq, nullptr), 0)
        << attr.size << ": " << sf_last_error();
    ASSERT_EQ(sf_close(&eq->fid), 0) << sf_last_error();
  }
}

// eq_write_read_self: five events read ten times, each first peeked then
// consumed: the peek shows the event the consuming read then takes; every
// request comes exactly once; the queue is then empty (-SF_EAGAIN).
TEST_P(FabtestsEqTest, ReadAlternatingPeek) {
  Listen(32);
  Connect(5);
  std::set<int> seen;
  int peeked = -1;
  for (int i = 0; i < 10; ++i) {
    const int got = Read(i & 1 ? 0 : SF_PEEK);
    if (i & 1) {
      EXPECT_EQ(got, peeked) << "the consuming read took another event";
      EXPECT_TRUE(seen.insert(got).second) << got << " twice";
    } else {
      peeked = got;
    }
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3, 4}));
  CmEvent ev;
  uint32_t event;
  EXPECT_EQ(sf_eq_read(eq_, &event, ev.bytes, sizeof ev.bytes, 0), -SF_EAGAIN);
}

// eq_size_verify: a queue of `size` events holds `size` of them (fabtests
// writes 32 into 32; a device under emulation connects 8 into 8).
TEST_P(FabtestsEqTest, HoldsItsSize) {
  const int size = backend().backend == SF_BACKEND_VERBS ? 8 : 32;
  Listen(size);
  Connect(size);
  // Let every request in before any is read: wait on the clients' queue
  // (where nothing comes) for many retry intervals, 10 ms of virtual time on
  // the simulator (a connector retries every 0.2 ms), 1 s on a device (every
  // 10 ms), peeking at the listener's queue every tenth of it (which drives
  // the listener). Then all are in the listener's queue at once.
  const int step_ms = backend().backend == SF_BACKEND_SIM ? 1 : 100;
  for (int i = 0; i < 10; ++i) {
    CmEvent ev;
    uint32_t event = 0;
    EXPECT_EQ(
        sf_eq_sread(client_eq_, &event, ev.bytes, sizeof ev.bytes, step_ms, 0),
        -SF_ETIMEDOUT);
    (void)sf_eq_read(eq_, &event, ev.bytes, sizeof ev.bytes, SF_PEEK);
  }
  std::set<int> seen;
  for (int i = 0; i < size; ++i) {
    CmEvent ev;
    uint32_t event = 0;
    const ssize_t n = sf_eq_read(eq_, &event, ev.bytes, sizeof ev.bytes, 0);
    const int got = Check(n, event, ev, 0);
    EXPECT_TRUE(seen.insert(got).second) << got;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(size));
}

// eq_wait_fd_sread: a 2,000 ms sf_eq_sread on an empty queue times out after
// 1,500 to 2,500 ms (virtual time on the simulator, exactly 2,000; real time
// on a device); with an event waiting, the same call returns it at once
// (within 5 ms).
TEST_P(FabtestsEqTest, SreadTimeoutAndPending) {
  Listen(32);
  CmEvent ev;
  uint32_t event = ~0u;
  uint64_t sim_start = 0, sim_end = 0;
  if (sim()) ASSERT_EQ(sf_sim_now(f.fabric, &sim_start), 0);
  uint64_t start = MonotonicMs();
  EXPECT_EQ(sf_eq_sread(eq_, &event, ev.bytes, sizeof ev.bytes, 2000, 0),
            -SF_ETIMEDOUT);
  uint64_t elapsed = MonotonicMs() - start;
  if (sim()) {
    ASSERT_EQ(sf_sim_now(f.fabric, &sim_end), 0);
    elapsed = (sim_end - sim_start) / 1'000'000;
    EXPECT_EQ(elapsed, 2000u);
  }
  EXPECT_GE(elapsed, 1500u);
  EXPECT_LE(elapsed, 2500u);

  Connect(1);
  ASSERT_EQ(Read(SF_PEEK), 0);  // The request is in the queue now.
  if (sim()) ASSERT_EQ(sf_sim_now(f.fabric, &sim_start), 0);
  start = MonotonicMs();
  const ssize_t n =
      sf_eq_sread(eq_, &event, ev.bytes, sizeof ev.bytes, 2000, 0);
  elapsed = MonotonicMs() - start;
  EXPECT_EQ(Check(n, event, ev, 0), 0);
  if (sim()) {
    ASSERT_EQ(sf_sim_now(f.fabric, &sim_end), 0);
    EXPECT_EQ(sim_end, sim_start) << "virtual time passed";
  }
  EXPECT_LE(elapsed, 5u);
}

// eq_wait_read_peek: five events peeked (each peek the same first one),
// then all five read.
TEST_P(FabtestsEqTest, ReadPeekThenRead) {
  Listen(32);
  Connect(5);
  ::softfab::testing::WaitUntil([] { return false; },
                                [&] { DriveAll(f, cqs_); }, 5000, 1000);
  const int first = Read(SF_PEEK);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Read(SF_PEEK), first);
  std::set<int> seen;
  EXPECT_EQ(Read(0), first);
  seen.insert(first);
  for (int i = 1; i < 5; ++i) EXPECT_TRUE(seen.insert(Read(0)).second);
  EXPECT_EQ(seen.size(), 5u);
}

// eq_wait_sread_peek: a peeking sf_eq_sread leaves the event for the next
// sf_eq_sread (the peek does not consume what the wait reported).
TEST_P(FabtestsEqTest, SreadPeekLeavesTheEvent) {
  Listen(32);
  auto sread = [&](uint64_t flags) {
    CmEvent ev;
    uint32_t event = ~0u;
    ssize_t n = -SF_ETIMEDOUT;
    // On the simulator a wait runs virtual time, so this is a bound in
    // events; on a device, up to 2 s a try.
    for (int tries = 0; tries < 10 && n == -SF_ETIMEDOUT; ++tries) {
      n = sf_eq_sread(eq_, &event, ev.bytes, sizeof ev.bytes, 2000, flags);
      DriveAll(f, cqs_);
    }
    return Check(n, event, ev, flags);
  };
  Connect(1);
  EXPECT_EQ(sread(0), 0);
  Connect(1);
  EXPECT_EQ(sread(SF_PEEK), 1);
  EXPECT_EQ(sread(0), 1);
}

// eq_readerr_ret_eagain: with five events read and no error, sf_eq_readerr
// gives -SF_EAGAIN.
TEST_P(FabtestsEqTest, ReaderrWithoutErrorIsEagain) {
  Listen(32);
  Connect(5);
  for (int i = 0; i < 5; ++i) EXPECT_GE(Read(0), 0);
  sf_eq_err_entry err{};
  EXPECT_EQ(sf_eq_readerr(eq_, &err, 0), -SF_EAGAIN);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsEqTest);

}  // namespace
}  // namespace softfab::fabtests
