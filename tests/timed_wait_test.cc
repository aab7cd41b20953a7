// Issue 11.4: timed waits (sf_cq_sread, sf_eq_sread) end at their deadline.
// On the simulator the timeout is virtual time: with nothing arriving by the
// deadline the wait returns -SF_ETIMEDOUT with the clock at exactly start +
// timeout (it used to step to the next event however far away, or return at
// once on an idle fabric); a message due before the deadline ends the wait
// when it arrives. Only -1 ends early on an idle fabric. On verbs the same
// calls wait in real time.
#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Fixture;

constexpr uint64_t kMs = 1'000'000;

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

uint64_t SimNow(sf_fabric* fabric) {
  uint64_t now = 0;
  EXPECT_EQ(sf_sim_now(fabric, &now), 0);
  return now;
}

class TimedWaitTest : public ::softfab::testing::PerBackendTest {
 protected:
  bool sim() const { return backend().backend == SF_BACKEND_SIM; }

  // Runs `wait` (a timed read of `timeout_ms` that must time out) and checks
  // how long it took: exactly the timeout in virtual time on the simulator,
  // at least the timeout in real time on verbs.
  template <typename Wait>
  void ExpectTimesOutAfter(int timeout_ms, Wait wait) {
    const uint64_t sim_start = sim() ? SimNow(f.fabric) : 0;
    const uint64_t real_start = MonotonicNs();
    EXPECT_EQ(wait(), -SF_ETIMEDOUT);
    const uint64_t real = MonotonicNs() - real_start;
    if (sim()) {
      EXPECT_EQ(SimNow(f.fabric) - sim_start, timeout_ms * kMs);
    } else {
      EXPECT_GE(real, timeout_ms * kMs);
      EXPECT_LT(real, timeout_ms * kMs + 10'000 * kMs);
    }
  }

  Fixture f;
};

TEST_P(TimedWaitTest, CqWaitOnQuietFabricEndsAtDeadline) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_cq_tagged_entry e;
  for (int timeout_ms : {30, 0, 2000}) {
    ExpectTimesOutAfter(timeout_ms, [&] {
      return sf_cq_sread(f.peers[1].cq, &e, 1, nullptr, timeout_ms);
    });
  }
}

TEST_P(TimedWaitTest, EqWaitOnQuietFabricEndsAtDeadline) {
  ASSERT_TRUE(f.Open(backend(), 1));
  sf_eq* eq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &eq, nullptr), 0);
  uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  ExpectTimesOutAfter(
      30, [&] { return sf_eq_sread(eq, &event, buf, sizeof buf, 30, 0); });
  EXPECT_EQ(sf_close(&eq->fid), 0);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(TimedWaitTest);

// The simulator alone: a message whose arrival is a known virtual time away.
// Two nodes on links of 4 ms (set up by hand: the fixture has no latency
// knob), connected by a first exchange; then a message is posted and the
// receiver waits for it.
class SimTimedWaitTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kLatencyNs = 4 * kMs;

  void SetUp() override {
    sf_fabric_attr fa{};
    fa.backend = SF_BACKEND_SIM;
    fa.sim_nodes = 2;
    fa.sim_seed = 5;
    fa.sim_latency_ns = kLatencyNs;
    ASSERT_EQ(sf_fabric_open(&fa, &fabric_, nullptr), 0) << sf_last_error();
    uint8_t names[2][SF_NAME_BYTES];
    for (int i = 0; i < 2; ++i) {
      sf_cq_attr ca{};
      ca.format = SF_CQ_FORMAT_TAGGED;
      sf_ep_attr ea{};
      ea.type = SF_EP_RDM;
      ea.caps = SF_MSG | SF_TAGGED;
      size_t len = SF_NAME_BYTES;
      ASSERT_EQ(sf_domain_open(fabric_, i, &domain_[i], nullptr), 0);
      ASSERT_EQ(sf_cq_open(domain_[i], &ca, &cq_[i], nullptr), 0);
      ASSERT_EQ(sf_av_open(domain_[i], nullptr, &av_[i], nullptr), 0);
      ASSERT_EQ(sf_endpoint(domain_[i], &ea, &ep_[i], nullptr), 0);
      ASSERT_EQ(sf_ep_bind(ep_[i], &cq_[i]->fid, SF_TRANSMIT | SF_RECV), 0);
      ASSERT_EQ(sf_ep_bind(ep_[i], &av_[i]->fid, 0), 0);
      ASSERT_EQ(sf_enable(ep_[i]), 0) << sf_last_error();
      ASSERT_EQ(sf_getname(&ep_[i]->fid, names[i], &len), 0);
    }
    ASSERT_EQ(sf_av_insert(av_[0], names[1], 1, &peer_, 0, nullptr), 1);
    sf_addr_t back;
    ASSERT_EQ(sf_av_insert(av_[1], names[0], 1, &back, 0, nullptr), 1);
    // The first message connects; both sides read their entries.
    Post(1);
    sf_cq_tagged_entry e;
    for (int i : {1, 0}) {
      ssize_t n = -SF_EAGAIN;
      for (int r = 0; r < 100000 && n == -SF_EAGAIN; ++r) {
        n = sf_cq_read(cq_[i], &e, 1);
        ASSERT_EQ(sf_cq_read(cq_[1 - i], nullptr, 0), 0);
      }
      ASSERT_EQ(n, 1) << "node " << i;
    }
  }

  void TearDown() override {
    for (int i = 0; i < 2; ++i) {
      for (sf_fid* fid :
           {ep_[i] ? &ep_[i]->fid : nullptr, cq_[i] ? &cq_[i]->fid : nullptr,
            av_[i] ? &av_[i]->fid : nullptr,
            domain_[i] ? &domain_[i]->fid : nullptr}) {
        if (fid) {
          EXPECT_EQ(sf_close(fid), 0) << sf_last_error();
        }
      }
    }
    if (fabric_) {
      EXPECT_EQ(sf_close(&fabric_->fid), 0);
    }
  }

  // A tagged receive at node 1 and a send to it from node 0, both of `tag`.
  void Post(uint64_t tag) {
    ASSERT_EQ(sf_trecv(ep_[1], in_, sizeof in_, nullptr, SF_ADDR_UNSPEC, tag, 0,
                       &in_),
              0);
    ASSERT_EQ(sf_tsend(ep_[0], out_, sizeof out_, nullptr, peer_, tag, &out_),
              0);
  }

  uint64_t Now() { return SimNow(fabric_); }

  sf_fabric* fabric_ = nullptr;
  sf_domain* domain_[2] = {};
  sf_cq* cq_[2] = {};
  sf_av* av_[2] = {};
  sf_ep* ep_[2] = {};
  sf_addr_t peer_ = 0;
  char in_[16] = {};
  char out_[16] = "timed wait";
};

// The message is one link latency (4 ms; links without a bandwidth limit)
// away: waits that end before it end at their deadlines, to the nanosecond,
// and one whose deadline is its arrival time returns it.
TEST_F(SimTimedWaitTest, WaitsEndAtTheirDeadlineBeforeTheMessage) {
  Post(2);
  const uint64_t start = Now();
  sf_cq_tagged_entry e;
  EXPECT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, 1), -SF_ETIMEDOUT);
  EXPECT_EQ(Now(), start + 1 * kMs);
  EXPECT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, 2), -SF_ETIMEDOUT);
  EXPECT_EQ(Now(), start + 3 * kMs);
  ASSERT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, 1), 1) << sf_last_error();
  EXPECT_EQ(Now(), start + kLatencyNs);
  EXPECT_EQ(e.op_context, &in_);
  EXPECT_STREQ(in_, out_);
}

// A zero timeout looks once, the clock unmoved; a wait whose deadline lies
// past the message returns it before the deadline; the next wait, with
// nothing more to come to node 1, ends 30 ms later to the nanosecond.
TEST_F(SimTimedWaitTest, WaitReturnsTheMessageBeforeItsDeadline) {
  Post(3);
  const uint64_t start = Now();
  sf_cq_tagged_entry e;
  EXPECT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, 0), -SF_ETIMEDOUT);
  EXPECT_EQ(Now(), start);
  ASSERT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, 30), 1);
  EXPECT_GE(Now(), start + kLatencyNs);
  EXPECT_LT(Now(), start + 30 * kMs);
  const uint64_t then = Now();
  EXPECT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, 30), -SF_ETIMEDOUT);
  EXPECT_EQ(Now(), then + 30 * kMs);
  ASSERT_EQ(sf_cq_read(cq_[0], &e, 1), 1);
  EXPECT_EQ(e.op_context, &out_);
}

// The documented early exit of an unbounded wait: on an idle fabric nothing
// can arrive, so -1 returns at once, the clock unmoved; a bounded wait
// there still lasts its timeout.
TEST_F(SimTimedWaitTest, OnlyUnboundedWaitEndsEarlyOnIdleFabric) {
  sf_cq_tagged_entry e;
  // Let the first exchange's acks and credit returns settle.
  for (int r = 0; r < 100; ++r) {
    if (sf_cq_sread(cq_[1], &e, 1, nullptr, -1) == -SF_ETIMEDOUT) break;
  }
  const uint64_t start = Now();
  EXPECT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, -1), -SF_ETIMEDOUT);
  EXPECT_EQ(Now(), start);
  EXPECT_EQ(sf_cq_sread(cq_[1], &e, 1, nullptr, 2000), -SF_ETIMEDOUT);
  EXPECT_EQ(Now(), start + 2000 * kMs);
}

}  // namespace
