// fabtests unit/dom_test on sf_*: many domains open at once on one fabric and
// close again. fabtests opens them all on one fi_info (one device); here all
// on one node of the simulator, and on verbs each a context of its own on the
// fabric's device. Each is checked usable: an endpoint opens on it.
#include <gtest/gtest.h>

#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsDomTest : public FabtestsCase {};

TEST_P(FabtestsDomTest, OpenCloseManyDomains) {
  ASSERT_TRUE(f.Open(backend(), 1));
  // fabtests' -n: the fixture's domain is the first.
  constexpr int kDomains = 16;
  std::vector<sf_domain*> domains;
  for (int i = 1; i < kDomains; ++i) {
    sf_domain* d = nullptr;
    ASSERT_EQ(sf_domain_open(f.fabric, 0, &d, nullptr), 0)
        << "domain " << i << ": " << sf_last_error();
    domains.push_back(d);
  }
  for (sf_domain* d : domains) {
    sf_ep_attr ea{};
    ea.type = SF_EP_RDM;
    ea.caps = SF_MSG;
    sf_ep* ep = nullptr;
    ASSERT_EQ(sf_endpoint(d, &ea, &ep, nullptr), 0) << sf_last_error();
    // A domain with an endpoint is busy.
    EXPECT_EQ(sf_close(&d->fid), -SF_EBUSY);
    EXPECT_EQ(sf_close(&ep->fid), 0) << sf_last_error();
  }
  while (!domains.empty()) {
    EXPECT_EQ(sf_close(&domains.back()->fid), 0) << sf_last_error();
    domains.pop_back();
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsDomTest);

}  // namespace
}  // namespace softfab::fabtests
