// Incast through the sf_* API, per backend: 32 peers each send what their
// credits allow into one endpoint that does not poll meanwhile, and no RNR
// NAK results, because the credits an endpoint grants never exceed the
// receive buffers it has (core/wireup.cc GrantFor; README "Receive buffers
// and credits"). On rxe in the VM the device itself counts the NAKs (its
// hw_counters in sysfs), so the senders' HCAs, not softfab, are the
// witnesses; on the simulator the fabric counts them. Before the grants were
// bounded, every peer had 64 credits while buffers stopped at 16 windows of
// 64, and the shared receive queue ran dry: NAKs on both.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "api/sim/sim_api.h"
#include "api/softfab/fabric.h"
#include "backends/sim/sim_fabric.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

// RNR NAKs every RDMA device of this machine has sent and received so far
// (rxe's send_rnr_err and rcvd_rnr_err), or -1 when no device counts them.
int64_t DeviceRnrNaks() {
  int64_t total = -1;
  DIR* dir = opendir("/sys/class/infiniband");
  if (dir == nullptr) return -1;
  while (dirent* d = readdir(dir)) {
    if (d->d_name[0] == '.') continue;
    for (const char* counter : {"send_rnr_err", "rcvd_rnr_err"}) {
      std::ifstream in(std::string("/sys/class/infiniband/") + d->d_name +
                       "/ports/1/hw_counters/" + counter);
      int64_t v = 0;
      if (in >> v) total = (total < 0 ? 0 : total) + v;
    }
  }
  closedir(dir);
  return total;
}

class IncastTest : public ::softfab::testing::PerBackendTest {
 protected:
  // RNR NAKs so far: the simulated fabric's, or the devices'.
  int64_t RnrNaks(Fixture& f) {
    if (backend().backend == SF_BACKEND_SIM) {
      return static_cast<int64_t>(
          softfab::sf_sim_fabric(f.fabric)->stats().rnr_naks);
    }
    return DeviceRnrNaks();
  }
};

TEST_P(IncastTest, PeersSendingAllTheirCreditsAtOnceMeetNoRnr) {
  constexpr int kSenders = 32;
  constexpr size_t kSize = 2048;
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), kSenders + 1));
  if (backend().backend == SF_BACKEND_VERBS && DeviceRnrNaks() < 0) {
    GTEST_SKIP() << "the device counts no RNR NAKs (no hw_counters in sysfs)";
  }
  std::vector<uint8_t> in(kSize);
  sf_cq_tagged_entry e;
  // Connected: one message from each sender, then the credits written back.
  for (int i = 1; i <= kSenders; ++i) {
    ASSERT_EQ(sf_trecv(f.peers[0].ep, in.data(), kSize, nullptr, SF_ADDR_UNSPEC,
                       0, ~uint64_t{0}, nullptr),
              0);
    ASSERT_EQ(sf_tsend(f.peers[i].ep, in.data(), 8, nullptr, f.peers[i].addr[0],
                       0, nullptr),
              0)
        << sf_last_error();
    ASSERT_EQ(f.ReadOne(0, &e), 1);
    ASSERT_EQ(f.ReadOne(i, &e), 1);
  }
  for (int r = 0; r < 2000; ++r) f.Progress();
  const int64_t naks_before = RnrNaks(f);
  ASSERT_GE(naks_before, 0);
  // Every sender sends until its credits run out; the receiver does not
  // poll, so none of its buffers is posted again meanwhile.
  std::vector<std::vector<uint8_t>> payload(kSenders + 1);
  std::vector<int> sent(kSenders + 1, 0), done(kSenders + 1, 0);
  int total = 0;
  for (int i = 1; i <= kSenders; ++i) {
    payload[i] = Pattern(kSize, static_cast<uint32_t>(i));
    while (sf_tsend(f.peers[i].ep, payload[i].data(), kSize, nullptr,
                    f.peers[i].addr[0], static_cast<uint64_t>(i),
                    nullptr) == 0) {
      ++sent[i];
      ++total;
    }
  }
  ASSERT_GT(total, 1024);  // more than 16 full windows
  // The senders alone, until every send completed (each was taken into a
  // buffer) or a NAK was counted.
  int completed = 0;
  for (int r = 0; r < 200000 && completed < total && RnrNaks(f) == naks_before;
       ++r) {
    for (int i = 1; i <= kSenders; ++i) {
      while (sf_cq_read(f.peers[i].cq, &e, 1) == 1) {
        ++done[i];
        ++completed;
      }
    }
  }
  EXPECT_EQ(RnrNaks(f), naks_before);
  // Then every message arrives whole.
  std::vector<int> got(kSenders + 1, 0);
  for (int n = 0; n < total; ++n) {
    ASSERT_EQ(sf_trecv(f.peers[0].ep, in.data(), kSize, nullptr, SF_ADDR_UNSPEC,
                       0, ~uint64_t{0}, nullptr),
              0);
    ASSERT_EQ(f.ReadOne(0, &e), 1) << "message " << n;
    ASSERT_GE(e.tag, 1u);
    ASSERT_LE(e.tag, static_cast<uint64_t>(kSenders));
    ++got[e.tag];
    EXPECT_EQ(in, payload[e.tag]);
  }
  for (int i = 1; i <= kSenders; ++i) {
    EXPECT_EQ(got[i], sent[i]) << i;
    while (done[i] < sent[i] && f.ReadOne(i, &e) == 1) ++done[i];
    EXPECT_EQ(done[i], sent[i]) << i;
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(IncastTest);

}  // namespace
