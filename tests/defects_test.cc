// Regression tests for the defects of issue 11, through the public sf_* API
// and per backend (the simulator, the simulator under faults, a real device
// through verbs, which skips without one): vectored rendezvous receives, a
// peeked connection request, SF_OPT_CM_DATA_SIZE on a passive endpoint and
// address-vector lookups of bad addresses. Timed waits are in
// tests/timed_wait_test.cc, the device personalities in
// tests/device_personality_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

class DefectsTest : public ::softfab::testing::PerBackendTest {
 protected:
  // Sends `msg` from node 0 (gathered from two iovecs when `gather`) into a
  // receive of `iov_lens` at node 1 (tagged or not), and expects it whole:
  // the entry's length and every iovec holding its part of the bytes.
  void VectoredRendezvous(const std::vector<size_t>& iov_lens, bool tagged,
                          bool gather) {
    ASSERT_TRUE(f.Open(backend(), 2));
    const std::vector<uint8_t> msg = Pattern(10000, 11);
    size_t room = 0;
    for (size_t n : iov_lens) room += n;
    std::vector<uint8_t> in(room, 0xEE);
    std::vector<iovec> riov;
    size_t at = 0;
    for (size_t n : iov_lens) {
      riov.push_back(iovec{in.data() + at, n});
      at += n;
    }
    int rctx = 0;
    ASSERT_EQ(tagged ? sf_trecvv(f.peers[1].ep, riov.data(), nullptr,
                                 riov.size(), SF_ADDR_UNSPEC, 7, 0, &rctx)
                     : sf_recvv(f.peers[1].ep, riov.data(), nullptr,
                                riov.size(), SF_ADDR_UNSPEC, &rctx),
              0)
        << sf_last_error();
    iovec siov[2] = {
        {const_cast<uint8_t*>(msg.data()), gather ? 4000 : msg.size()},
        {const_cast<uint8_t*>(msg.data()) + 4000, msg.size() - 4000}};
    const size_t scount = gather ? 2 : 1;
    int sctx = 0;
    ASSERT_EQ(tagged ? sf_tsendv(f.peers[0].ep, siov, nullptr, scount,
                                 f.peers[0].addr[1], 7, &sctx)
                     : sf_sendv(f.peers[0].ep, siov, nullptr, scount,
                                f.peers[0].addr[1], &sctx),
              0)
        << sf_last_error();
    sf_cq_tagged_entry e{};
    const ssize_t n = f.ReadOne(1, &e);
    if (n == -SF_EAVAIL) {
      sf_cq_err_entry x{};
      ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
      FAIL() << "receive failed: " << sf_strerror(x.err) << " (" << x.err
             << ")";
    }
    ASSERT_EQ(n, 1);
    EXPECT_EQ(e.op_context, &rctx);
    EXPECT_EQ(e.len, msg.size());
    EXPECT_EQ(std::memcmp(in.data(), msg.data(), msg.size()), 0);
    ASSERT_EQ(f.ReadOne(0, &e), 1);
    EXPECT_EQ(e.op_context, &sctx);
  }

  Fixture f;
};

// Issue 11.1: a message above the eager size into a receive of two or more
// iovecs arrives whole (it was refused with EIO: the rendezvous READ had one
// SGE per iovec on QPs created with max_send_sge = 1).
TEST_P(DefectsTest, VectoredRendezvousReceiveArrivesWhole) {
  VectoredRendezvous({33, 30000}, /*tagged=*/true, /*gather=*/true);
}

TEST_P(DefectsTest, VectoredRendezvousUntaggedReceiveArrivesWhole) {
  VectoredRendezvous({33, 30000}, /*tagged=*/false, /*gather=*/false);
}

// Every iovec the endpoint takes (SF_IOV_LIMIT), each holding a part.
TEST_P(DefectsTest, VectoredRendezvousFillsEveryIovec) {
  std::vector<size_t> lens(SF_IOV_LIMIT, 0);
  for (size_t i = 0; i + 1 < lens.size(); ++i) lens[i] = 1000 + 777 * i;
  lens.back() = 20000;
  VectoredRendezvous(lens, /*tagged=*/true, /*gather=*/false);
}

// The limit is what the calls take: one more iovec is refused up front.
TEST_P(DefectsTest, IovLimitIsEnforced) {
  ASSERT_TRUE(f.Open(backend(), 2));
  uint8_t buf[SF_IOV_LIMIT + 1][8];
  iovec iov[SF_IOV_LIMIT + 1];
  for (int i = 0; i <= SF_IOV_LIMIT; ++i) iov[i] = {buf[i], sizeof buf[i]};
  EXPECT_EQ(sf_trecvv(f.peers[1].ep, iov, nullptr, SF_IOV_LIMIT + 1,
                      SF_ADDR_UNSPEC, 1, 0, nullptr),
            -SF_EINVAL);
  EXPECT_EQ(sf_tsendv(f.peers[0].ep, iov, nullptr, SF_IOV_LIMIT + 1,
                      f.peers[0].addr[1], 1, nullptr),
            -SF_EINVAL);
}

// Closes the objects it was given, newest first, when it goes out of scope
// (before the fixture closes the domains and the fabric).
class Closer {
 public:
  ~Closer() {
    for (auto it = fids_.rbegin(); it != fids_.rend(); ++it) {
      EXPECT_EQ(sf_close(*it), 0) << sf_last_error();
    }
  }
  void Add(sf_fid* fid) { fids_.push_back(fid); }

 private:
  std::vector<sf_fid*> fids_;
};

// A listener on node 0 (its event queue eq[0]) and an SF_EP_MSG endpoint on
// node 1 (eq[1]) that has sent it a connection request with `data`; until the
// request is peeked, both queues are driven.
struct PendingConnection {
  sf_eq* eq[2] = {};
  sf_pep* pep = nullptr;
  sf_cq* ccq = nullptr;
  sf_ep* cep = nullptr;

  ::testing::AssertionResult Start(Fixture& f, Closer& closer,
                                   const char* data) {
    for (sf_eq*& q : eq) {
      if (sf_eq_open(f.fabric, nullptr, &q, nullptr)) break;
      closer.Add(&q->fid);
    }
    uint8_t name[SF_NAME_BYTES];
    size_t len = sizeof name;
    if (eq[1] == nullptr ||
        sf_passive_ep(f.peers[0].domain, &pep, nullptr) != 0) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    closer.Add(&pep->fid);
    if (sf_pep_bind(pep, &eq[0]->fid, 0) || sf_listen(pep) ||
        sf_getname(&pep->fid, name, &len)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    auto added = f.AddEndpoint(1, SF_EP_MSG, {&eq[1]->fid}, true, &ccq, &cep);
    if (ccq) closer.Add(&ccq->fid);
    if (cep) closer.Add(&cep->fid);
    if (!added) return added;
    if (sf_connect(cep, name, data, std::strlen(data))) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    return ::testing::AssertionSuccess();
  }
};

// Issue 11.2: a peeked SF_CONNREQ carries its request (info was NULL): the
// same info on every peek of the event, owned by the event queue (so peeking
// leaks nothing) yet freeable with sf_freeinfo and good for accepting, while
// the consuming read returns an info of its own, the caller's.
TEST_P(DefectsTest, PeekedConnReqCarriesItsOwnInfo) {
  ASSERT_TRUE(f.Open(backend(), 2));
  Closer closer;
  PendingConnection c;
  ASSERT_TRUE(c.Start(f, closer, "hello"));
  sf_eq* const* eq = c.eq;
  sf_pep* pep = c.pep;

  uint8_t buf[3][sizeof(sf_eq_cm_entry) + 64];
  auto entry = [&](int i) { return reinterpret_cast<sf_eq_cm_entry*>(buf[i]); };
  uint32_t event = 0;
  ssize_t n = -SF_EAGAIN;
  for (int r = 0; r < 100000 && n == -SF_EAGAIN; ++r) {
    n = sf_eq_read(eq[0], &event, buf[0], sizeof buf[0], SF_PEEK);
    uint32_t other = 0;
    ASSERT_EQ(sf_eq_read(eq[1], &other, buf[2], sizeof buf[2], 0), -SF_EAGAIN);
  }
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(sf_eq_cm_entry) + 5));
  ASSERT_EQ(event, static_cast<uint32_t>(SF_CONNREQ));
  EXPECT_EQ(entry(0)->fid, &pep->fid);
  EXPECT_EQ(std::memcmp(entry(0)->data, "hello", 5), 0);
  sf_info* peeked = entry(0)->info;
  ASSERT_NE(peeked, nullptr);
  ASSERT_EQ(sf_eq_read(eq[0], &event, buf[1], sizeof buf[1], SF_PEEK), n);
  EXPECT_EQ(entry(1)->info, peeked);

  // The consuming read: the same event, with an info of its own.
  ASSERT_EQ(sf_eq_read(eq[0], &event, buf[1], sizeof buf[1], 0), n);
  ASSERT_EQ(event, static_cast<uint32_t>(SF_CONNREQ));
  sf_info* consumed = entry(1)->info;
  ASSERT_NE(consumed, nullptr);
  EXPECT_NE(consumed, peeked);
  EXPECT_EQ(sf_eq_read(eq[0], &event, buf[1], sizeof buf[1], SF_PEEK),
            -SF_EAGAIN);
  sf_freeinfo(consumed);  // Freeing one leaves the other usable.

  // The peeked info accepts the connection.
  sf_ep_attr ea{};
  ea.type = SF_EP_MSG;
  ea.caps = SF_MSG;
  ea.info = peeked;
  sf_ep* aep = nullptr;
  ASSERT_EQ(sf_endpoint(f.peers[0].domain, &ea, &aep, nullptr), 0)
      << sf_last_error();
  closer.Add(&aep->fid);
  sf_freeinfo(peeked);
  ASSERT_EQ(sf_ep_bind(aep, &f.peers[0].cq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_ep_bind(aep, &eq[0]->fid, 0), 0);
  ASSERT_EQ(sf_enable(aep), 0) << sf_last_error();
  ASSERT_EQ(sf_accept(aep, nullptr, 0), 0) << sf_last_error();
  bool connected[2] = {false, false};
  for (int r = 0; r < 100000 && !(connected[0] && connected[1]); ++r) {
    for (int i : {0, 1}) {
      if (connected[i]) continue;
      n = sf_eq_read(eq[i], &event, buf[i], sizeof buf[i], 0);
      if (n == -SF_EAGAIN) continue;
      ASSERT_GT(n, 0) << sf_last_error();
      ASSERT_EQ(event, static_cast<uint32_t>(SF_CONNECTED));
      connected[i] = true;
    }
    f.Progress();
  }
  EXPECT_TRUE(connected[0] && connected[1]);
}

// The event queue releases the infos of peeks nobody freed when it closes
// (run under AddressSanitizer, a leak fails the test), and a rejected
// request's consumed info is the caller's to free.
TEST_P(DefectsTest, PeekedInfoNotFreedGoesWithItsEventQueue) {
  ASSERT_TRUE(f.Open(backend(), 2));
  Closer closer;
  PendingConnection c;
  ASSERT_TRUE(c.Start(f, closer, ""));
  sf_eq* const* eq = c.eq;
  uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint8_t other[sizeof(sf_eq_cm_entry) + 64];
  auto* entry = reinterpret_cast<sf_eq_cm_entry*>(buf);
  uint32_t event = 0;
  ssize_t n = -SF_EAGAIN;
  for (int r = 0; r < 100000 && n == -SF_EAGAIN; ++r) {
    n = sf_eq_read(eq[0], &event, buf, sizeof buf, SF_PEEK);
    (void)sf_eq_read(eq[1], &event, other, sizeof other, SF_PEEK);
  }
  ASSERT_GT(n, 0);
  for (int r = 0; r < 100; ++r) {
    ASSERT_EQ(sf_eq_read(eq[0], &event, buf, sizeof buf, SF_PEEK), n);
  }
  ASSERT_EQ(sf_eq_read(eq[0], &event, buf, sizeof buf, 0), n);
  EXPECT_EQ(sf_reject(c.pep, entry->info, nullptr, 0), 0);
  sf_freeinfo(entry->info);
}

// Issue 11.3: SF_OPT_CM_DATA_SIZE is answered by a passive endpoint (it was
// refused with -SF_EINVAL), with the value an active endpoint gives; a
// passive endpoint has no other option, and none can be set on it.
TEST_P(DefectsTest, PassiveEndpointAnswersCmDataSize) {
  ASSERT_TRUE(f.Open(backend(), 1));
  sf_pep* pep = nullptr;
  ASSERT_EQ(sf_passive_ep(f.peers[0].domain, &pep, nullptr), 0);
  f.pep = pep;
  size_t active = 0, passive = 0;
  size_t len = sizeof active;
  ASSERT_EQ(sf_getopt(&f.peers[0].ep->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE,
                      &active, &len),
            0);
  len = sizeof passive;
  ASSERT_EQ(sf_getopt(&pep->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE, &passive,
                      &len),
            0)
      << sf_last_error();
  EXPECT_EQ(len, sizeof passive);
  EXPECT_EQ(passive, active);
  EXPECT_EQ(passive, 56u);
  len = 1;
  EXPECT_EQ(sf_getopt(&pep->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE, &passive,
                      &len),
            -SF_ETOOSMALL);
  EXPECT_EQ(len, sizeof passive);
  len = sizeof passive;
  EXPECT_EQ(sf_getopt(&pep->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV,
                      &passive, &len),
            -SF_ENOSYS);
  EXPECT_EQ(sf_setopt(&pep->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE, &passive,
                      sizeof passive),
            -SF_EINVAL);
}

// Issue 11.5: looking up an address that was never set, was removed, or is
// out of the vector's range gives -SF_EINVAL (fi_av(3)), not -SF_ENOENT.
TEST_P(DefectsTest, AvLookupOfBadAddressIsInvalid) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_av_attr attr{};
  attr.count = 8;
  sf_av* av = nullptr;
  ASSERT_EQ(sf_av_open(f.peers[0].domain, &attr, &av, nullptr), 0);
  Closer closer;
  closer.Add(&av->fid);
  uint8_t names[2][SF_NAME_BYTES];
  for (int i : {0, 1}) {
    size_t len = SF_NAME_BYTES;
    ASSERT_EQ(sf_getname(&f.peers[i].ep->fid, names[i], &len), 0);
  }
  sf_addr_t addr[2] = {};
  ASSERT_EQ(sf_av_insert(av, names, 2, addr, 0, nullptr), 2);
  uint8_t out[SF_NAME_BYTES];
  size_t len = sizeof out;
  ASSERT_EQ(sf_av_lookup(av, addr[1], out, &len), 0);
  EXPECT_EQ(std::memcmp(out, names[1], SF_NAME_BYTES), 0);
  ASSERT_EQ(sf_av_remove(av, &addr[1], 1, 0), 0);
  for (sf_addr_t bad : {addr[1], sf_addr_t{5}, sf_addr_t{8}, sf_addr_t{500},
                        SF_ADDR_NOTAVAIL}) {
    len = sizeof out;
    EXPECT_EQ(sf_av_lookup(av, bad, out, &len), -SF_EINVAL) << bad;
  }
  len = sizeof out;
  EXPECT_EQ(sf_av_lookup(av, addr[0], out, &len), 0);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(DefectsTest);

}  // namespace
