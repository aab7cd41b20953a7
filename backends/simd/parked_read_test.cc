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
#include "tests/conformance_fixture.h"

namespace softfab::simd {
namespace {

TEST(ParkedRead, AReadThatParkedReturnsWhatWokeIt) {
  TestDaemon d;
  // This process is node 0 of the daemon's fabric.
  ASSERT_EQ(setenv("SOFTFAB_FABRIC", d.path().c_str(), 1), 0);
  ASSERT_EQ(setenv("SOFTFAB_NODE", "0", 1), 0);
  // Node 0's RDM endpoint, knowing its own name (the fixture's sim fabric is
  // the daemon's, as SOFTFAB_FABRIC says).
  softfab::testing::Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 1));
  sf_ep* ep = f.peers[0].ep;
  sf_cq* cq = f.peers[0].cq;
  const sf_addr_t self = f.peers[0].addr[0];

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
}

}  // namespace
}  // namespace softfab::simd
