// fabtests unit/getinfo_test on sf_*, where it applies. softfab has no
// fi_getinfo: what an application asks for it passes to sf_fabric_open and
// sf_endpoint, and sf_ep_query reports what it got. So the checks become:
// every combination of primary capabilities is either refused (-SF_EINVAL,
// fi_getinfo's -FI_ENODATA) or granted with exactly the primary capabilities
// asked for (caps1, caps2); a domain that does not exist is refused (neg1);
// every endpoint has a source address of its own (src*, no_hints*); and the
// endpoint attributes asked for are the ones reported. Left out, with what
// softfab lacks: api_version (no version call), the message and RMA ordering
// tests (no ordering attributes, no RMA), mr_mode (no MR modes: descriptors
// are optional), progress1/2 (progress is always manual, with no attribute),
// caps3/caps4 (no domain capabilities), util1 (no utility providers).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

// libfabric's primary capabilities (fabtests' PRIMARY_CAPS), by its values;
// the ones softfab does not define are named here.
constexpr uint64_t kRma = 1ULL << 2;
constexpr uint64_t kAtomic = 1ULL << 4;
constexpr uint64_t kCollective = 1ULL << 6;
constexpr uint64_t kHmem = 1ULL << 47;
constexpr uint64_t kNamedRxCtx = 1ULL << 58;
constexpr uint64_t kPrimary[] = {SF_MSG,  kRma,         SF_TAGGED,
                                 kAtomic, SF_MULTICAST, kCollective,
                                 kHmem,   kNamedRxCtx,  SF_DIRECTED_RECV};
// What softfab offers of them.
constexpr uint64_t kOffered = SF_MSG | SF_TAGGED | SF_DIRECTED_RECV;
// fabtests' OPT_CAPS that softfab may add: the modifiers SF_SEND, SF_RECV
// (and SF_VARIABLE_MSG, a capability only when asked for).
constexpr uint64_t kOptional = SF_SEND | SF_RECV;

class FabtestsGetinfoTest : public FabtestsCase {};

// caps1: every combination of the primary capabilities, on every endpoint
// type: refused with -SF_EINVAL when it holds one softfab does not offer;
// else granted, reporting every capability asked for and no primary one
// more (check_caps, check_no_extra_caps).
TEST_P(FabtestsGetinfoTest, PrimaryCapsCombinations) {
  ASSERT_TRUE(f.Open(backend(), 1));
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG, SF_EP_DGRAM}) {
    for (uint32_t combo = 0; combo < (1u << 9); ++combo) {
      uint64_t caps = 0;
      for (int b = 0; b < 9; ++b) {
        if (combo & (1u << b)) caps |= kPrimary[b];
      }
      sf_ep_attr ea{};
      ea.type = type;
      ea.caps = caps;
      sf_ep* ep = nullptr;
      const int rc = sf_endpoint(f.peers[0].domain, &ea, &ep, nullptr);
      SCOPED_TRACE(::testing::Message()
                   << "type " << type << " caps 0x" << std::hex << caps);
      if (caps & ~kOffered) {
        EXPECT_EQ(rc, -SF_EINVAL);
        continue;
      }
      ASSERT_EQ(rc, 0) << sf_last_error();
      sf_ep_attr got{};
      ASSERT_EQ(sf_ep_query(ep, &got), 0);
      EXPECT_EQ(got.caps & caps, caps) << "a capability asked for is missing";
      if (caps & (SF_MSG | SF_TAGGED)) {
        EXPECT_EQ(got.caps & ~(caps | kOptional), 0u)
            << "more than asked for: 0x" << std::hex << got.caps;
      }
      EXPECT_EQ(sf_close(&ep->fid), 0);
    }
  }
}

// caps2: with no capabilities asked for, the endpoint reports what softfab
// offers by default (messages and tagged messages) and nothing unknown.
TEST_P(FabtestsGetinfoTest, NoCapsGivesTheDefaults) {
  ASSERT_TRUE(f.Open(backend(), 1));
  sf_ep_attr ea{};
  ea.type = SF_EP_RDM;
  sf_ep* ep = nullptr;
  ASSERT_EQ(sf_endpoint(f.peers[0].domain, &ea, &ep, nullptr), 0);
  sf_ep_attr got{};
  ASSERT_EQ(sf_ep_query(ep, &got), 0);
  EXPECT_EQ(got.caps, SF_MSG | SF_TAGGED | kOptional);
  EXPECT_EQ(sf_close(&ep->fid), 0);
}

// neg1: a domain that does not exist is refused: a node past the simulated
// fabric; on verbs a device of no such name (-SF_ENODEV).
TEST_P(FabtestsGetinfoTest, NonexistentDomain) {
  if (backend().backend == SF_BACKEND_VERBS) {
    sf_fabric_attr fa{};
    fa.backend = SF_BACKEND_VERBS;
    fa.verbs_device = "invalid_domain";
    sf_fabric* fabric = nullptr;
    EXPECT_EQ(sf_fabric_open(&fa, &fabric, nullptr), -SF_ENODEV);
    EXPECT_EQ(fabric, nullptr);
    ASSERT_TRUE(f.Open(backend(), 1));
    sf_domain* d = nullptr;
    EXPECT_EQ(sf_domain_open(f.fabric, 64, &d, nullptr), -SF_EINVAL);
    return;
  }
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_domain* d = nullptr;
  for (int node : {2, -1, 4096}) {
    EXPECT_EQ(sf_domain_open(f.fabric, node, &d, nullptr), -SF_EINVAL) << node;
  }
}

// The simulator's "hints" that cannot be met are refused, as fi_getinfo
// refuses hints no provider matches: no nodes, too many, a fault
// probability outside [0, 1], an unknown backend.
// (The simulator's own attributes: a plain test, not one per backend.)
TEST(FabtestsGetinfoSimTest, UnmatchableFabricAttributes) {
  sf_fabric* fabric = nullptr;
  for (int c = 0; c < 5; ++c) {
    sf_fabric_attr fa{};
    fa.backend = SF_BACKEND_SIM;
    fa.sim_nodes = 2;
    if (c == 0) fa.sim_nodes = 0;
    if (c == 1) fa.sim_nodes = 4097;
    if (c == 2) fa.sim_drop = 1.5;
    if (c == 3) fa.sim_reorder = -0.1;
    if (c == 4) fa.backend = static_cast<sf_backend>(7);
    EXPECT_EQ(sf_fabric_open(&fa, &fabric, nullptr), -SF_EINVAL) << c;
  }
}

// src1-4, no_hints1-5 (check_srcaddr): every endpoint, and a passive one,
// has a source address (its name), each its own.
TEST_P(FabtestsGetinfoTest, EveryEndpointHasItsOwnName) {
  ASSERT_TRUE(f.Open(backend(), 2));
  Closer closer;
  std::set<std::string> names;
  auto add = [&](sf_fid* fid) {
    uint8_t name[SF_NAME_BYTES];
    size_t len = sizeof name;
    ASSERT_EQ(sf_getname(fid, name, &len), 0) << sf_last_error();
    EXPECT_EQ(len, size_t{SF_NAME_BYTES});
    EXPECT_TRUE(names.emplace(reinterpret_cast<char*>(name), len).second)
        << "two endpoints share a name";
  };
  for (int i = 0; i < 2; ++i) {
    add(&f.peers[i].ep->fid);
    for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG, SF_EP_DGRAM}) {
      sf_ep_attr ea{};
      ea.type = type;
      sf_ep* ep = nullptr;
      ASSERT_EQ(sf_endpoint(f.peers[i].domain, &ea, &ep, nullptr), 0);
      closer.Add(&ep->fid);
      add(&ep->fid);
    }
    sf_pep* pep = nullptr;
    ASSERT_EQ(sf_passive_ep(f.peers[i].domain, &pep, nullptr), 0);
    closer.Add(&pep->fid);
    add(&pep->fid);
  }
  // A short buffer: -SF_ETOOSMALL with the size it needs.
  uint8_t name[4];
  size_t len = sizeof name;
  EXPECT_EQ(sf_getname(&f.peers[0].ep->fid, name, &len), -SF_ETOOSMALL);
  EXPECT_EQ(len, size_t{SF_NAME_BYTES});
}

// The endpoint attributes asked for (fi_info's tx_attr/rx_attr sizes) are
// the ones reported; limits beyond what softfab takes are refused; the
// query-only ones are consistent (DGRAM carries the 40-byte GRH prefix).
TEST_P(FabtestsGetinfoTest, EndpointAttributesAsAskedFor) {
  ASSERT_TRUE(f.Open(backend(), 1));
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG, SF_EP_DGRAM}) {
    SCOPED_TRACE(type);
    sf_ep_attr ea{};
    ea.type = type;
    ea.caps = SF_MSG;
    ea.tx_size = 64;
    ea.rx_size = 128;
    sf_ep* ep = nullptr;
    ASSERT_EQ(sf_endpoint(f.peers[0].domain, &ea, &ep, nullptr), 0);
    sf_ep_attr got{};
    ASSERT_EQ(sf_ep_query(ep, &got), 0);
    EXPECT_EQ(got.type, type);
    EXPECT_EQ(got.tx_size, 64u);
    EXPECT_EQ(got.rx_size, 128u);
    EXPECT_GT(got.max_msg_size, 0u);
    EXPECT_LE(got.inject_size, got.max_msg_size);
    EXPECT_EQ(got.msg_prefix_size, type == SF_EP_DGRAM ? 40u : 0u);
    EXPECT_EQ(sf_close(&ep->fid), 0);
    ea.tx_size = (size_t{1} << 20) + 1;
    EXPECT_EQ(sf_endpoint(f.peers[0].domain, &ea, &ep, nullptr), -SF_EINVAL);
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsGetinfoTest);

}  // namespace
}  // namespace softfab::fabtests
