// Regression tests for what the fuzz targets (fuzz/, issue 13) found: one
// named case per finding, each failing on the code before its fix. The inputs
// that found them are kept in fuzz/corpus/<target>/regress-* and replayed by
// the //fuzz:*_corpus_test targets too.
#include <gtest/gtest.h>

#include "core/address_vector.h"
#include "core/wire.h"

namespace softfab::testing {
namespace {

wire::Name NameWith(uint8_t gid0, uint16_t lid, uint32_t qpn) {
  wire::Name n;
  n.gid[0] = gid0;
  n.lid = lid;
  n.cm_qpn = qpn;
  return n;
}

// decoders: two names with the same LID and QP number (on RoCE every LID is
// 0, and two nodes' first UD QPs often share a number). Removing one made the
// other unfindable by the source of its datagrams.
TEST(HostileRegression, AvRemoveKeepsOtherNameWithSameLidQpn) {
  core::AddressVector av(8);
  const auto a = av.Insert(NameWith(1, 0, 0x11));
  const auto b = av.Insert(NameWith(2, 0, 0x11));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(av.FindByLidQpn(0, 0x11), *a);
  ASSERT_TRUE(av.Remove(*a).ok());
  EXPECT_EQ(av.FindByLidQpn(0, 0x11), *b);
  ASSERT_TRUE(av.Remove(*b).ok());
  EXPECT_FALSE(av.FindByLidQpn(0, 0x11).has_value());
}

}  // namespace
}  // namespace softfab::testing
