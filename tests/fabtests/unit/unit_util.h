// Helpers shared by the fabtests unit programs re-expressed on sf_*: closing
// objects in reverse order, bounded reads of CQs and EQs that drive every
// peer of a Fixture, one checked message between two endpoints, and a
// listener with connecting SF_EP_MSG endpoints.
#ifndef SOFTFAB_TESTS_FABTESTS_UNIT_UNIT_UTIL_H_
#define SOFTFAB_TESTS_FABTESTS_UNIT_UNIT_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/bounded_wait.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace softfab::fabtests {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

// A fabtests program's test, run once per backend (TEST_P on a subclass,
// instantiated with SOFTFAB_INSTANTIATE_PER_BACKEND), with a fixture.
class FabtestsCase : public ::softfab::testing::PerBackendTest {
 protected:
  Fixture f;
};

// Closes what it was given, last first, when it goes out of scope.
class Closer {
 public:
  ~Closer() { CloseAll(); }
  void Add(sf_fid* fid) { fids_.push_back(fid); }
  void CloseAll() {
    for (auto it = fids_.rbegin(); it != fids_.rend(); ++it) {
      EXPECT_EQ(sf_close(*it), 0) << sf_last_error();
    }
    fids_.clear();
  }

 private:
  std::vector<sf_fid*> fids_;
};

// Drives every fixture peer, every CQ in `extra` and every event queue in
// `eqs` (a peek, which consumes nothing) once. A listener is driven only by
// reading its queue.
inline void DriveAll(Fixture& f, const std::vector<sf_cq*>& extra = {},
                     const std::vector<sf_eq*>& eqs = {}) {
  f.Progress();
  for (sf_cq* cq : extra) EXPECT_EQ(sf_cq_read(cq, nullptr, 0), 0);
  for (sf_eq* eq : eqs) {
    alignas(sf_eq_cm_entry) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
    uint32_t event;
    (void)sf_eq_read(eq, &event, buf, sizeof buf, SF_PEEK);
  }
}

// Reads one entry of `cq` (success or error) while driving everything.
// Returns 1, -SF_EAVAIL (the error entry is in *err) or -SF_EAGAIN (none
// came within the bound).
inline ssize_t ReadCq(Fixture& f, sf_cq* cq, sf_cq_tagged_entry* e,
                      sf_cq_err_entry* err = nullptr,
                      const std::vector<sf_cq*>& extra = {}) {
  ssize_t n = -SF_EAGAIN;
  ::softfab::testing::WaitUntil(
      [&] {
        n = sf_cq_read(cq, e, 1);
        return n != -SF_EAGAIN;
      },
      [&] { DriveAll(f, extra); });
  if (n == -SF_EAVAIL) {
    sf_cq_err_entry x{};
    EXPECT_EQ(sf_cq_readerr(cq, &x, 0), 1);
    if (err) *err = x;
  }
  return n;
}

// Reads the next event of `eq` (flags 0 or SF_PEEK) while driving
// everything; returns what sf_eq_read returned last.
inline ssize_t ReadEq(Fixture& f, sf_eq* eq, uint32_t* event, void* buf,
                      size_t len, uint64_t flags = 0,
                      const std::vector<sf_cq*>& extra = {},
                      const std::vector<sf_eq*>& eqs = {}) {
  ssize_t n = -SF_EAGAIN;
  ::softfab::testing::WaitUntil(
      [&] {
        n = sf_eq_read(eq, event, buf, len, flags);
        return n != -SF_EAGAIN;
      },
      [&] { DriveAll(f, extra, eqs); });
  return n;
}

// One message of `len` pattern bytes (seed `seed`) from `tx` to `rx`
// (addressed `dest` in tx's AV; SF_ADDR_UNSPEC on a connected endpoint),
// received whole: both completions come, with their contexts, and the bytes
// are the sender's.
inline void ExpectMessage(Fixture& f, sf_ep* tx, sf_cq* tx_cq, sf_addr_t dest,
                          sf_ep* rx, sf_cq* rx_cq, size_t len, uint32_t seed,
                          const std::vector<sf_cq*>& extra = {}) {
  const std::vector<uint8_t> msg = Pattern(len, seed);
  std::vector<uint8_t> in(len + 1, 0xEE);
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_recv(rx, in.data(), in.size(), nullptr, SF_ADDR_UNSPEC, &rctx),
            0)
      << sf_last_error();
  ssize_t rc;
  while ((rc = sf_send(tx, msg.data(), len, nullptr, dest, &sctx)) ==
         -SF_EAGAIN) {
    DriveAll(f, extra);
  }
  ASSERT_EQ(rc, 0) << sf_last_error();
  std::vector<sf_cq*> all = extra;
  all.push_back(tx_cq);
  all.push_back(rx_cq);
  sf_cq_tagged_entry e{};
  sf_cq_err_entry err{};
  ASSERT_EQ(ReadCq(f, rx_cq, &e, &err, all), 1) << sf_strerror(err.err);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, len);
  EXPECT_TRUE(e.flags & SF_RECV);
  EXPECT_EQ(std::memcmp(in.data(), msg.data(), len), 0);
  EXPECT_EQ(in[len], 0xEE) << "a byte past the message was written";
  ASSERT_EQ(ReadCq(f, tx_cq, &e, &err, all), 1) << sf_strerror(err.err);
  EXPECT_EQ(e.op_context, &sctx);
  EXPECT_TRUE(e.flags & SF_SEND);
}

// The fixture's AddEndpoint, with the CQ and endpoint it opened (even on
// failure) closed by `closer`.
inline ::testing::AssertionResult AddEndpoint(
    Fixture& f, Closer& closer, int node, sf_ep_type type,
    std::initializer_list<sf_fid*> binds, bool enable, sf_cq** cq, sf_ep** ep,
    sf_wait_obj wait = SF_WAIT_NONE, sf_info* info = nullptr) {
  auto added = f.AddEndpoint(node, type, binds, enable, cq, ep, wait, info);
  if (*cq) closer.Add(&(*cq)->fid);
  if (*ep) closer.Add(&(*ep)->fid);
  return added;
}

// A listening passive endpoint on fixture node 0, its events on `eq`.
struct Listener {
  sf_eq* eq = nullptr;
  sf_pep* pep = nullptr;
  uint8_t name[SF_NAME_BYTES] = {};

  ::testing::AssertionResult Open(Fixture& f, Closer& closer) {
    if (sf_eq_open(f.fabric, nullptr, &eq, nullptr)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    closer.Add(&eq->fid);
    if (sf_passive_ep(f.peers[0].domain, &pep, nullptr)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    closer.Add(&pep->fid);
    size_t len = sizeof name;
    if (sf_pep_bind(pep, &eq->fid, 0) || sf_listen(pep) ||
        sf_getname(&pep->fid, name, &len)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    return ::testing::AssertionSuccess();
  }
};

// An SF_EP_MSG endpoint with a CQ of its own on fixture node `node`, its
// connection events on `eq`.
struct MsgEndpoint {
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;

  ::testing::AssertionResult Open(Fixture& f, Closer& closer, int node,
                                  sf_eq* eq, sf_info* info = nullptr,
                                  sf_wait_obj wait = SF_WAIT_NONE) {
    return AddEndpoint(f, closer, node, SF_EP_MSG, {&eq->fid}, true, &cq, &ep,
                       wait, info);
  }
};

// Room for a connection event and the most private data a connection takes.
struct CmEvent {
  alignas(sf_eq_cm_entry) uint8_t bytes[sizeof(sf_eq_cm_entry) + 64] = {};
  sf_eq_cm_entry* entry() { return reinterpret_cast<sf_eq_cm_entry*>(bytes); }
};

// Connects `client` (on its queue `ceq`) to `l`, accepting on a new endpoint
// at node 0 (`server`, events on l.eq): both sides see SF_CONNECTED.
inline ::testing::AssertionResult Connect(Fixture& f, Closer& closer,
                                          Listener& l, MsgEndpoint& client,
                                          sf_eq* ceq, MsgEndpoint* server,
                                          sf_wait_obj wait = SF_WAIT_NONE) {
  if (sf_connect(client.ep, l.name, nullptr, 0)) {
    return ::testing::AssertionFailure() << "connect: " << sf_last_error();
  }
  CmEvent ev;
  uint32_t event = 0;
  const std::vector<sf_cq*> extra = {client.cq};
  if (ReadEq(f, l.eq, &event, ev.bytes, sizeof ev.bytes, 0, extra) <= 0 ||
      event != SF_CONNREQ) {
    return ::testing::AssertionFailure() << "connreq: " << sf_last_error();
  }
  auto opened = server->Open(f, closer, 0, l.eq, ev.entry()->info, wait);
  sf_freeinfo(ev.entry()->info);
  if (!opened) return opened;
  if (sf_accept(server->ep, nullptr, 0)) {
    return ::testing::AssertionFailure() << "accept: " << sf_last_error();
  }
  const std::vector<sf_cq*> both = {client.cq, server->cq};
  if (ReadEq(f, ceq, &event, ev.bytes, sizeof ev.bytes, 0, both) <= 0 ||
      event != SF_CONNECTED || ev.entry()->fid != &client.ep->fid) {
    return ::testing::AssertionFailure() << "client: " << sf_last_error();
  }
  if (ReadEq(f, l.eq, &event, ev.bytes, sizeof ev.bytes, 0, both) <= 0 ||
      event != SF_CONNECTED || ev.entry()->fid != &server->ep->fid) {
    return ::testing::AssertionFailure() << "server: " << sf_last_error();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace softfab::fabtests

#endif  // SOFTFAB_TESTS_FABTESTS_UNIT_UNIT_UTIL_H_
