// How an endpoint addresses a peer (core/internal/endpoint_common.h): RoCE
// always with a GRH carrying the class of service; InfiniBand by LID alone
// inside a subnet (a GRH there adds 40 bytes to every packet), with a GRH
// toward another subnet or a peer without a LID. The simulator and rxe are
// RoCE only, so the InfiniBand rule is checked here, on the decision itself.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "core/internal/endpoint_common.h"
#include "core/wire.h"
#include "transport/transport.h"

namespace softfab::core {
namespace {

namespace tp = ::softfab::transport;

constexpr uint8_t kSubnetA[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
constexpr uint8_t kSubnetB[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 7};

wire::Name NameIn(const uint8_t (&prefix)[8], uint8_t host, uint16_t lid) {
  wire::Name n;
  std::memcpy(n.gid, prefix, 8);
  n.gid[15] = host;
  n.lid = lid;
  return n;
}

TEST(AddressTest, RoceAlwaysRoutesByGid) {
  const wire::Name local = NameIn(kSubnetA, 1, 0);
  const wire::Name peer = NameIn(kSubnetA, 2, 0);
  EXPECT_TRUE(NeedsGrh(tp::kLinkLayerEthernet, local.gid, peer));
  const tp::AhAttr ah = AhAttrFor(peer, true, 104, 3);
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(std::memcmp(ah.grh.dgid.raw, peer.gid, 16), 0);
  EXPECT_EQ(ah.grh.traffic_class, 104);
  EXPECT_EQ(ah.grh.hop_limit, 64);
  EXPECT_EQ(ah.sl, 3);
}

TEST(AddressTest, InfiniBandInsideASubnetRoutesByLidWithoutAGrh) {
  const wire::Name local = NameIn(kSubnetA, 1, 5);
  const wire::Name peer = NameIn(kSubnetA, 2, 9);
  EXPECT_FALSE(NeedsGrh(tp::kLinkLayerInfiniBand, local.gid, peer));
  const tp::AhAttr ah = AhAttrFor(peer, false, 104, 3);
  EXPECT_EQ(ah.is_global, 0);
  EXPECT_EQ(ah.dlid, 9);
  EXPECT_EQ(ah.sl, 3);  // the service level travels in the LRH
  EXPECT_EQ(ah.grh.traffic_class, 0);
}

TEST(AddressTest, InfiniBandTakesAGrhToAnotherSubnetOrAPeerWithoutALid) {
  const wire::Name local = NameIn(kSubnetA, 1, 5);
  EXPECT_TRUE(
      NeedsGrh(tp::kLinkLayerInfiniBand, local.gid, NameIn(kSubnetB, 2, 9)));
  EXPECT_TRUE(
      NeedsGrh(tp::kLinkLayerInfiniBand, local.gid, NameIn(kSubnetA, 2, 0)));
}

}  // namespace
}  // namespace softfab::core
