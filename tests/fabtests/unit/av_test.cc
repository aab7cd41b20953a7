// fabtests unit/av_test on sf_*: the address vector (FI_AV_TABLE) opened at
// every size, inserts of good names (with and without fi_addr, before and
// after an endpoint is bound), a vector of one good and one refused name,
// lookups and removes of good and bad addresses. Names are real endpoints'
// (sf_getname), as fabtests' are real sockaddrs. FI_SYNC_ERR
// (av_goodbad_vector_sync_err) is left out: sf_av_insert takes no flags.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsAvTest : public FabtestsCase {
 protected:
  // Opens `nodes` peers; names_ holds every peer's endpoint name.
  void OpenPeers(int nodes) {
    ASSERT_TRUE(f.Open(backend(), nodes));
    names_.resize(nodes * SF_NAME_BYTES);
    for (int i = 0; i < nodes; ++i) {
      size_t len = SF_NAME_BYTES;
      ASSERT_EQ(
          sf_getname(&f.peers[i].ep->fid, &names_[i * SF_NAME_BYTES], &len), 0);
    }
  }
  sf_av* OpenAv(size_t count) {
    sf_av_attr attr{};
    attr.count = count;
    sf_av* av = nullptr;
    EXPECT_EQ(sf_av_open(f.peers[0].domain, &attr, &av, nullptr), 0)
        << sf_last_error();
    if (av) closer_.Add(&av->fid);
    return av;
  }
  const uint8_t* name(int i) const { return &names_[i * SF_NAME_BYTES]; }

  Closer closer_;
  std::vector<uint8_t> names_;
};

// av_open_close: vectors of 1 to 2^16 addresses open and close.
TEST_P(FabtestsAvTest, OpenCloseSizes) {
  OpenPeers(1);
  for (int i = 0; i < 17; ++i) {
    sf_av_attr attr{};
    attr.count = size_t{1} << i;
    sf_av* av = nullptr;
    ASSERT_EQ(sf_av_open(f.peers[0].domain, &attr, &av, nullptr), 0)
        << attr.count << ": " << sf_last_error();
    ASSERT_EQ(sf_close(&av->fid), 0) << sf_last_error();
  }
}

// av_good: one good name inserts, with an address other than NOTAVAIL.
TEST_P(FabtestsAvTest, InsertGood) {
  OpenPeers(2);
  sf_av* av = OpenAv(4);
  sf_addr_t addr = SF_ADDR_NOTAVAIL;
  ASSERT_EQ(sf_av_insert(av, name(1), 1, &addr, 0, nullptr), 1)
      << sf_last_error();
  EXPECT_NE(addr, SF_ADDR_NOTAVAIL);
}

// av_null_fi_addr: an insert without fi_addr inserts (FI_AV_TABLE: the
// addresses are the insertion order, so the caller can do without them).
TEST_P(FabtestsAvTest, InsertWithoutFiAddr) {
  OpenPeers(2);
  sf_av* av = OpenAv(4);
  ASSERT_EQ(sf_av_insert(av, names_.data(), 2, nullptr, 0, nullptr), 2)
      << sf_last_error();
  uint8_t out[SF_NAME_BYTES];
  for (int i = 0; i < 2; ++i) {
    size_t len = sizeof out;
    ASSERT_EQ(sf_av_lookup(av, i, out, &len), 0) << i;
    EXPECT_EQ(std::memcmp(out, name(i), SF_NAME_BYTES), 0) << i;
  }
}

// av_insert_stages: inserts before and after the vector is bound to an
// endpoint (and, the fabtests TODO, after that endpoint is enabled) all
// succeed, and the endpoint then reaches every one of them.
TEST_P(FabtestsAvTest, InsertStages) {
  OpenPeers(4);
  sf_av* av = OpenAv(32);
  sf_addr_t addr[4];
  ASSERT_EQ(sf_av_insert(av, name(1), 1, &addr[1], 0, nullptr), 1);
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(
      AddEndpoint(f, closer_, 0, SF_EP_RDM, {&av->fid}, false, &cq, &ep));
  ASSERT_EQ(sf_av_insert(av, name(2), 1, &addr[2], 0, nullptr), 1);
  ASSERT_EQ(sf_enable(ep), 0) << sf_last_error();
  ASSERT_EQ(sf_av_insert(av, name(3), 1, &addr[3], 0, nullptr), 1);
  for (int i = 1; i < 4; ++i) {
    EXPECT_NE(addr[i], SF_ADDR_NOTAVAIL);
    ExpectMessage(f, ep, cq, addr[i], f.peers[i].ep, f.peers[i].cq, 64, i,
                  {cq});
  }
}

// av_lookup_good: every inserted name looks up as itself, at consecutive
// table indexes from 0.
TEST_P(FabtestsAvTest, LookupGood) {
  OpenPeers(4);
  sf_av* av = OpenAv(4);
  sf_addr_t addr[4];
  ASSERT_EQ(sf_av_insert(av, names_.data(), 4, addr, 0, nullptr), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(addr[i], static_cast<sf_addr_t>(i));
    uint8_t out[SF_NAME_BYTES] = {};
    size_t len = sizeof out;
    ASSERT_EQ(sf_av_lookup(av, addr[i], out, &len), 0) << sf_last_error();
    EXPECT_EQ(len, size_t{SF_NAME_BYTES});
    EXPECT_EQ(std::memcmp(out, name(i), SF_NAME_BYTES), 0) << i;
  }
}

// av_lookup_bad: a slot not inserted, one past the range, UINT64_MAX and a
// removed address all give -SF_EINVAL.
TEST_P(FabtestsAvTest, LookupBad) {
  OpenPeers(3);
  sf_av* av = OpenAv(3);
  sf_addr_t addr[2];
  ASSERT_EQ(sf_av_insert(av, names_.data(), 2, addr, 0, nullptr), 2);
  uint8_t out[SF_NAME_BYTES];
  for (sf_addr_t bad :
       {sf_addr_t{2}, sf_addr_t{2 + 32}, sf_addr_t{UINT64_MAX}}) {
    size_t len = sizeof out;
    EXPECT_EQ(sf_av_lookup(av, bad, out, &len), -SF_EINVAL) << bad;
  }
  ASSERT_EQ(sf_av_remove(av, &addr[0], 1, 0), 0);
  size_t len = sizeof out;
  EXPECT_EQ(sf_av_lookup(av, addr[0], out, &len), -SF_EINVAL);
  // A short buffer: -SF_ETOOSMALL, the size it needs written back.
  len = 4;
  EXPECT_EQ(sf_av_lookup(av, addr[1], out, &len), -SF_ETOOSMALL);
  EXPECT_EQ(len, size_t{SF_NAME_BYTES});
}

// av_remove_good: every inserted address removes, one by one.
TEST_P(FabtestsAvTest, RemoveGood) {
  OpenPeers(4);
  sf_av* av = OpenAv(4);
  sf_addr_t addr[4];
  ASSERT_EQ(sf_av_insert(av, names_.data(), 4, addr, 0, nullptr), 4);
  for (sf_addr_t& a : addr) {
    ASSERT_NE(a, SF_ADDR_NOTAVAIL);
    EXPECT_EQ(sf_av_remove(av, &a, 1, 0), 0) << sf_last_error();
  }
}

// av_remove_bad: removing past the range, UINT64_MAX, an address twice, or a
// vector of addresses one of which is gone gives -SF_EINVAL (and the last
// removes none of them).
TEST_P(FabtestsAvTest, RemoveBad) {
  OpenPeers(3);
  sf_av* av = OpenAv(4);
  sf_addr_t addr[3];
  ASSERT_EQ(sf_av_insert(av, names_.data(), 3, addr, 0, nullptr), 3);
  for (sf_addr_t bad :
       {sf_addr_t{3 + 1}, sf_addr_t{UINT64_MAX}, sf_addr_t{3 + 32}}) {
    EXPECT_EQ(sf_av_remove(av, &bad, 1, 0), -SF_EINVAL) << bad;
  }
  ASSERT_EQ(sf_av_remove(av, &addr[0], 1, 0), 0);
  EXPECT_EQ(sf_av_remove(av, &addr[0], 1, 0), -SF_EINVAL);
  EXPECT_EQ(sf_av_remove(av, addr, 3, 0), -SF_EINVAL);
  uint8_t out[SF_NAME_BYTES];
  for (int i : {1, 2}) {
    size_t len = sizeof out;
    EXPECT_EQ(sf_av_lookup(av, addr[i], out, &len), 0) << "removed " << i;
  }
}

// av_bad: a name that cannot be an endpoint's is refused: the insert returns
// 0 and the address is SF_ADDR_NOTAVAIL.
TEST_P(FabtestsAvTest, InsertBad) {
  OpenPeers(1);
  sf_av* av = OpenAv(4);
  for (int which : {0, 1}) {
    uint8_t bad[SF_NAME_BYTES];
    std::memcpy(bad, name(0), SF_NAME_BYTES);
    if (which == 0) {
      bad[18] = 0xFF;  // The reserved bytes after the LID are not zero.
    } else {
      bad[23] = 0x01;  // A QP number of more than 24 bits.
    }
    sf_addr_t addr = 0;
    EXPECT_EQ(sf_av_insert(av, bad, 1, &addr, 0, nullptr), 0) << which;
    EXPECT_EQ(addr, SF_ADDR_NOTAVAIL) << which;
  }
}

// av_goodbad_vector: one good and one bad name insert as 1, the good one at
// an address, the bad one SF_ADDR_NOTAVAIL. Bad twice over: a malformed name,
// and a good name that no longer fits the vector (count 1).
TEST_P(FabtestsAvTest, InsertGoodBadVector) {
  OpenPeers(2);
  {
    sf_av* av = OpenAv(4);
    uint8_t two[2 * SF_NAME_BYTES];
    std::memcpy(two, name(0), SF_NAME_BYTES);
    std::memcpy(two + SF_NAME_BYTES, name(1), SF_NAME_BYTES);
    two[SF_NAME_BYTES + 19] = 0x5A;
    sf_addr_t addr[2] = {SF_ADDR_NOTAVAIL, 0};
    EXPECT_EQ(sf_av_insert(av, two, 2, addr, 0, nullptr), 1);
    EXPECT_NE(addr[0], SF_ADDR_NOTAVAIL);
    EXPECT_EQ(addr[1], SF_ADDR_NOTAVAIL);
  }
  sf_av* small = OpenAv(1);
  sf_addr_t addr[2] = {SF_ADDR_NOTAVAIL, 0};
  EXPECT_EQ(sf_av_insert(small, names_.data(), 2, addr, 0, nullptr), 1);
  EXPECT_NE(addr[0], SF_ADDR_NOTAVAIL);
  EXPECT_EQ(addr[1], SF_ADDR_NOTAVAIL);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsAvTest);

}  // namespace
}  // namespace softfab::fabtests
