// A non-blocking read on the shared simulated fabric that finds nothing
// parks the process until something concerns it (the README's "How a run
// stays the same run"). The call that parked must return what woke it: if
// it said EAGAIN instead, whether the program ever took that completion
// would depend on whether it read again, and a program deciding that on
// something outside the fabric (Open MPI's fence flag, set by another of
// its threads) took it in some runs and not in others (its completion
// trace differed in 2 of 8 runs of mpi_ring at the last completion).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "api/softfab/fabric.h"
#include "backends/simd/test_daemon.h"
#include "gtest/gtest.h"

namespace softfab::simd {
namespace {

TEST(ParkedRead, AReadThatParkedReturnsWhatWokeIt) {
  TestDaemon d;
  // This process is node 0 of the daemon's fabric.
  ASSERT_EQ(setenv("SOFTFAB_FABRIC", d.path().c_str(), 1), 0);
  ASSERT_EQ(setenv("SOFTFAB_NODE", "0", 1), 0);
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_SIM;
  sf_fabric* fabric = nullptr;
  ASSERT_EQ(sf_fabric_open(&fa, &fabric, nullptr), 0);
  sf_domain* domain = nullptr;
  sf_cq* cq = nullptr;
  sf_av* av = nullptr;
  sf_ep* ep = nullptr;
  sf_cq_attr ca{};
  ca.size = 16;
  ca.format = SF_CQ_FORMAT_TAGGED;
  sf_ep_attr ea{};
  ea.type = SF_EP_RDM;
  ea.caps = SF_MSG | SF_TAGGED;
  ASSERT_EQ(sf_domain_open(fabric, 0, &domain, nullptr), 0);
  ASSERT_EQ(sf_cq_open(domain, &ca, &cq, nullptr), 0);
  ASSERT_EQ(sf_av_open(domain, nullptr, &av, nullptr), 0);
  ASSERT_EQ(sf_endpoint(domain, &ea, &ep, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(ep, &cq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_ep_bind(ep, &av->fid, 0), 0);
  ASSERT_EQ(sf_enable(ep), 0);
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&ep->fid, name, &len), 0);
  sf_addr_t self = 0;
  ASSERT_EQ(sf_av_insert(av, name, 1, &self, 0, nullptr), 1);

  // A message to itself: nothing reaches the fabric before time moves, and
  // time moves only when this process parks in a read that finds nothing.
  char in[8] = {}, out[8] = "parked";
  int recv_ctx = 0, send_ctx = 0;
  ASSERT_EQ(sf_trecv(ep, in, sizeof in, nullptr, self, 7, 0, &recv_ctx), 0);
  ASSERT_EQ(sf_tsend(ep, out, sizeof out, nullptr, self, 7, &send_ctx), 0);
  int reads = 0, taken = 0;
  bool received = false;
  while (!received && reads < 1000) {
    sf_cq_tagged_entry e[4];
    const ssize_t n = sf_cq_read(cq, e, 4);
    ++reads;
    if (n == -SF_EAGAIN) {
      // Parked and woken by something for this process, yet nothing taken.
      ADD_FAILURE() << "read " << reads
                    << " parked, was woken and returned EAGAIN";
      continue;
    }
    ASSERT_GT(n, 0) << sf_last_error();
    for (ssize_t i = 0; i < n; ++i) {
      ++taken;
      if (e[i].op_context == &recv_ctx) received = true;
    }
  }
  EXPECT_TRUE(received);
  EXPECT_STREQ(in, "parked");
  EXPECT_GE(taken, 1);
  sf_close(&ep->fid);
  sf_close(&av->fid);
  sf_close(&cq->fid);
  sf_close(&domain->fid);
  sf_close(&fabric->fid);
}

}  // namespace
}  // namespace softfab::simd
