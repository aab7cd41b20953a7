// fabtests' regression/sighandler_test on sf_*: a process that has set up a
// fabric (fabric, domain, CQ, AV, enabled endpoint) still dies of SIGINT as
// the default disposition says: softfab installs no handler of its own for
// it. The program forks a child that sets up and spins, then sends it
// SIGINT; here a death test's child sets up and raises SIGINT.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

class FabtestsSighandlerTest : public ::softfab::testing::PerBackendTest {};

TEST_P(FabtestsSighandlerTest, SigintStillKillsAfterSetup) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  const Backend b = backend();
  EXPECT_EXIT(
      {
        Fixture f;
        if (!OpenPair(f, b, SF_EP_RDM)) std::_Exit(3);
        struct sigaction now {};
        if (sigaction(SIGINT, nullptr, &now) != 0) std::_Exit(4);
        if (now.sa_handler != SIG_DFL) std::_Exit(5);  // Someone's handler.
        std::raise(SIGINT);
        std::_Exit(6);  // SIGINT did not end the process.
      },
      ::testing::KilledBySignal(SIGINT), "");
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsSighandlerTest);

}  // namespace
}  // namespace softfab::fabtests
