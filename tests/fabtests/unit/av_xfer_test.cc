// fabtests functional/av_xfer on sf_*: RDM transfers across an address
// vector entry removed and inserted again. av_removal_test: a message one
// way, both sides remove the other's address, insert it again, and a message
// goes the other way; av_reinsert_test: the same, the second message in the
// first one's direction. The re-inserted address need not be the old index.
#include <gtest/gtest.h>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsAvXfer : public FabtestsCase {
 protected:
  // Both sides remove the other's address, then insert its name again.
  void RemoveAndReinsert() {
    for (int i : {0, 1}) {
      Peer& p = f.peers[i];
      const int other = 1 - i;
      uint8_t name[SF_NAME_BYTES];
      size_t len = sizeof name;
      ASSERT_EQ(sf_av_lookup(p.av, p.addr[other], name, &len), 0);
      ASSERT_EQ(sf_av_remove(p.av, &p.addr[other], 1, 0), 0) << sf_last_error();
      len = sizeof name;
      EXPECT_EQ(sf_av_lookup(p.av, p.addr[other], name, &len), -SF_EINVAL);
      // A send to the removed address is refused.
      EXPECT_EQ(sf_send(p.ep, name, 1, nullptr, p.addr[other], nullptr),
                -SF_EINVAL);
      ASSERT_EQ(sf_av_insert(p.av, name, 1, &p.addr[other], 0, nullptr), 1);
    }
  }
  void Transfer(int from, int to, uint32_t seed) {
    ExpectMessage(f, f.peers[from].ep, f.peers[from].cq, f.peers[from].addr[to],
                  f.peers[to].ep, f.peers[to].cq, 1000, seed);
  }

  using Peer = ::softfab::testing::Peer;
};

TEST_P(FabtestsAvXfer, AvRemoval) {
  ASSERT_TRUE(f.Open(backend(), 2));
  Transfer(1, 0, 1);
  RemoveAndReinsert();
  Transfer(0, 1, 2);
}

TEST_P(FabtestsAvXfer, AvReinsert) {
  ASSERT_TRUE(f.Open(backend(), 2));
  Transfer(1, 0, 3);
  RemoveAndReinsert();
  Transfer(1, 0, 4);
  Transfer(0, 1, 5);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsAvXfer);

}  // namespace
}  // namespace softfab::fabtests
