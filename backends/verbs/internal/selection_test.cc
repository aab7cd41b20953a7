// Host tests of choosing a verbs device's port and GID (internal/selection.h):
// the automatic choices and the errors with their diagnostics.
#include "backends/verbs/internal/selection.h"

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <string>

namespace softfab::verbs::internal {
namespace {

namespace tp = ::softfab::transport;

VerbsGidInfo Gid(int index, VerbsGidType type, bool ipv4) {
  VerbsGidInfo g;
  g.index = index;
  g.type = type;
  if (ipv4) {
    g.gid.raw[10] = 0xff;
    g.gid.raw[11] = 0xff;
    g.gid.raw[12] = 192;
    g.gid.raw[13] = 0;
    g.gid.raw[14] = 2;
    g.gid.raw[15] = 1;
  } else {
    g.gid.raw[0] = 0xfe;
    g.gid.raw[1] = 0x80;
    g.gid.raw[15] = 1;
  }
  return g;
}

// rxe0 as Soft-RoCE shows it: link-local v1/v2, then IPv4-mapped v1/v2.
VerbsDeviceInfo Rxe() {
  VerbsDeviceInfo d;
  d.name = "rxe0";
  VerbsPortInfo p;
  p.port_num = 1;
  p.state = tp::PortState::kActive;
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  p.gids = {Gid(0, VerbsGidType::kRoceV1, false),
            Gid(1, VerbsGidType::kRoceV2, false),
            Gid(2, VerbsGidType::kRoceV1, true),
            Gid(3, VerbsGidType::kRoceV2, true)};
  d.ports.push_back(p);
  return d;
}

TEST(SelectPort, FirstActiveByDefault) {
  VerbsDeviceInfo d = Rxe();
  d.ports.insert(d.ports.begin(), d.ports[0]);
  d.ports[0].port_num = 1;
  d.ports[0].state = tp::PortState::kDown;
  d.ports[1].port_num = 2;
  const VerbsPortInfo* port = nullptr;
  std::string diag;
  ASSERT_TRUE(SelectPort(d, 0, &port, &diag).ok());
  EXPECT_EQ(port->port_num, 2);
}

TEST(SelectPort, DownPortIsNamedWithItsState) {
  VerbsDeviceInfo d = Rxe();
  d.ports[0].state = tp::PortState::kDown;
  const VerbsPortInfo* port = nullptr;
  std::string diag;
  EXPECT_EQ(SelectPort(d, 1, &port, &diag).code(), ENETDOWN);
  EXPECT_NE(diag.find("rxe0 port 1 is DOWN"), std::string::npos) << diag;
  EXPECT_EQ(SelectPort(d, 0, &port, &diag).code(), ENETDOWN);
  EXPECT_NE(diag.find("port 1: DOWN (Ethernet)"), std::string::npos) << diag;
}

TEST(SelectPort, MissingPortIsInvalid) {
  const VerbsPortInfo* port = nullptr;
  std::string diag;
  EXPECT_EQ(SelectPort(Rxe(), 3, &port, &diag).code(), EINVAL);
  EXPECT_NE(diag.find("no port 3"), std::string::npos) << diag;
}

TEST(SelectGid, RoceV2Ipv4MappedPreferred) {
  VerbsDeviceInfo d = Rxe();
  int index = -5;
  std::string diag;
  ASSERT_TRUE(SelectGid(d, d.ports[0], -1, &index, &diag).ok());
  EXPECT_EQ(index, 3);
  d.ports[0].gids.pop_back();  // no IPv4 address: the link-local v2 one
  ASSERT_TRUE(SelectGid(d, d.ports[0], -1, &index, &diag).ok());
  EXPECT_EQ(index, 1);
}

TEST(SelectGid, NoRoceV2IsAnAddressError) {
  VerbsDeviceInfo d = Rxe();
  d.ports[0].gids = {Gid(0, VerbsGidType::kRoceV1, false)};
  int index = 0;
  std::string diag;
  EXPECT_EQ(SelectGid(d, d.ports[0], -1, &index, &diag).code(), EADDRNOTAVAIL);
  EXPECT_NE(diag.find("no RoCEv2 GID"), std::string::npos) << diag;
  EXPECT_NE(diag.find("0 fe80::1 RoCEv1"), std::string::npos) << diag;
}

TEST(SelectGid, InfinibandTakesIndexZero) {
  VerbsDeviceInfo d = Rxe();
  d.ports[0].link_layer = IBV_LINK_LAYER_INFINIBAND;
  d.ports[0].gids = {Gid(0, VerbsGidType::kIb, false)};
  int index = -5;
  std::string diag;
  ASSERT_TRUE(SelectGid(d, d.ports[0], -1, &index, &diag).ok());
  EXPECT_EQ(index, 0);
}

TEST(SelectGid, BadIndexListsTheValidEntries) {
  VerbsDeviceInfo d = Rxe();
  int index = 0;
  std::string diag;
  ASSERT_TRUE(SelectGid(d, d.ports[0], 2, &index, &diag).ok());
  EXPECT_EQ(index, 2);
  EXPECT_EQ(SelectGid(d, d.ports[0], 7, &index, &diag).code(), EINVAL);
  EXPECT_NE(diag.find("no valid GID at index 7"), std::string::npos) << diag;
  EXPECT_NE(diag.find("3 ::ffff:192.0.2.1 RoCEv2"), std::string::npos) << diag;
  EXPECT_EQ(SelectGid(d, d.ports[0], -2, &index, &diag).code(), EINVAL);
}

TEST(MemlockWarning, SmallLimitsAreReportedWithTheFix) {
  EXPECT_EQ(MemlockWarning(true, 0), "");
  EXPECT_EQ(MemlockWarning(false, kMemlockWarnBytes), "");
  const std::string w = MemlockWarning(false, 8u << 20);
  EXPECT_NE(w.find("8192 KiB"), std::string::npos) << w;
  EXPECT_NE(w.find("ulimit -l unlimited"), std::string::npos) << w;
  EXPECT_NE(w.find("limits.conf"), std::string::npos) << w;
}

TEST(FormatGid, Ipv6Notation) {
  EXPECT_EQ(FormatGid(Gid(0, VerbsGidType::kRoceV2, true).gid),
            "::ffff:192.0.2.1");
  EXPECT_EQ(FormatGid(Gid(0, VerbsGidType::kRoceV2, false).gid), "fe80::1");
}

}  // namespace
}  // namespace softfab::verbs::internal
