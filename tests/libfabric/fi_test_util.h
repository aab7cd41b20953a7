// Helpers for the suites that drive softfab through libfabric's own entry
// points (<rdma/fabric.h>, Debian's libfabric.so.1): libfabric finds
// libsoftfab-fi.so through FI_PROVIDER_PATH, set here to the provider's
// place in the test's runfiles before the first fi_* call, and the
// simulator is chosen by name (fabric "sim"). Every object of a test comes
// from fi_* calls; nothing here includes a softfab header.
#ifndef SOFTFAB_TESTS_LIBFABRIC_FI_TEST_UTIL_H_
#define SOFTFAB_TESTS_LIBFABRIC_FI_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace softfab::fi_test {

// Points libfabric at the provider built beside this test (runfiles), unless
// the caller already set FI_PROVIDER_PATH. Call before any fi_* call.
inline void UseBuiltProvider() {
  if (getenv("FI_PROVIDER_PATH") != nullptr) return;
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  std::string dir = srcdir ? std::string(srcdir) + "/" +
                                 (workspace ? workspace : "softfab") +
                                 "/api/libfabric"
                           : "bazel-bin/api/libfabric";
  setenv("FI_PROVIDER_PATH", dir.c_str(), 1);
}

// Registered by each suite (AddGlobalTestEnvironment) so the provider path
// is set before any test's first fi_* call.
class FiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { UseBuiltProvider(); }
};

// The fabric the suites run on: the simulator, or the verbs device named by
// SOFTFAB_FI_FABRIC (tools/verbs-tests.sh sets it in the rxe VM).
inline const char* FabricName() {
  const char* name = getenv("SOFTFAB_FI_FABRIC");
  return name != nullptr && *name != '\0' ? name : "sim";
}
inline bool OnSimulator() { return strcmp(FabricName(), "sim") == 0; }

// Hints for softfab on FabricName() with the given endpoint type and caps;
// the caller adds to them and frees them with fi_freeinfo.
inline fi_info* SimHints(fi_ep_type type, uint64_t caps) {
  fi_info* h = fi_allocinfo();
  h->fabric_attr->prov_name = strdup("softfab");
  h->fabric_attr->name = strdup(FabricName());
  h->ep_attr->type = type;
  h->caps = caps;
  h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
  h->domain_attr->mr_mode = FI_MR_LOCAL;
  return h;
}

// Reads one entry from `cq` into `entry`, driving progress by also reading
// `other` with count 0, for at most `tries` reads. Returns what the last
// read returned (1, -FI_EAVAIL, or -FI_EAGAIN when nothing came).
inline ssize_t ReadOne(fid_cq* cq, void* entry, fid_cq* other = nullptr,
                       int tries = 1000000) {
  ssize_t rc = -FI_EAGAIN;
  for (int i = 0; i < tries; ++i) {
    rc = fi_cq_read(cq, entry, 1);
    if (rc != -FI_EAGAIN) return rc;
    if (other != nullptr) fi_cq_read(other, nullptr, 0);
  }
  return rc;
}

// Reads `cq` (driving `other`) until an error entry is next, and takes it.
inline void TakeErrorEntry(fid_cq* cq, fid_cq* other, fi_cq_err_entry* err) {
  fi_cq_tagged_entry e{};
  ASSERT_EQ(ReadOne(cq, &e, other), -FI_EAVAIL);
  *err = fi_cq_err_entry{};
  ASSERT_EQ(fi_cq_readerr(cq, err, 0), 1);
}

// The byte at `i` of message `seed`: every byte a test sends is checked.
inline uint8_t PatternByte(uint32_t seed, size_t i) {
  return static_cast<uint8_t>((seed * 131u) ^ (i * 7u) ^ (i >> 8));
}
inline void Fill(void* buf, size_t len, uint32_t seed) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < len; ++i) p[i] = PatternByte(seed, i);
}
// The first index that differs from the pattern, or `len` when all match.
inline size_t FirstBadByte(const void* buf, size_t len, uint32_t seed) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = 0; i < len; ++i) {
    if (p[i] != PatternByte(seed, i)) return i;
  }
  return len;
}

// One side of a connection: domain, CQs, endpoint, bound to `eq`.
struct Active {
  fid_domain* domain = nullptr;
  fid_cq* tx = nullptr;
  fid_cq* rx = nullptr;
  fid_ep* ep = nullptr;

  void Open(fid_fabric* fabric, fi_info* info, fid_eq* eq) {
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    fi_cq_attr attr{};
    attr.format = FI_CQ_FORMAT_TAGGED;
    ASSERT_EQ(fi_cq_open(domain, &attr, &tx, nullptr), 0);
    ASSERT_EQ(fi_cq_open(domain, &attr, &rx, nullptr), 0);
    ASSERT_EQ(fi_endpoint(domain, info, &ep, this), 0);
    ASSERT_EQ(fi_ep_bind(ep, &eq->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &tx->fid, FI_TRANSMIT), 0);
    ASSERT_EQ(fi_ep_bind(ep, &rx->fid, FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep), 0);
  }
  void Close() {
    if (ep) EXPECT_EQ(fi_close(&ep->fid), 0);
    if (tx) EXPECT_EQ(fi_close(&tx->fid), 0);
    if (rx) EXPECT_EQ(fi_close(&rx->fid), 0);
    if (domain) EXPECT_EQ(fi_close(&domain->fid), 0);
  }
};

// Reads `eq` until an event (or error) comes, reading `other` meanwhile so
// both ends make progress. Returns fi_eq_read's result.
ssize_t NextEvent(fid_eq* eq, fid_eq* other, uint32_t* event,
                  fi_eq_cm_entry* entry) {
  alignas(fi_eq_cm_entry) uint8_t scratch[sizeof(fi_eq_cm_entry) + 64];
  for (int i = 0; i < 1000000; ++i) {
    ssize_t rc = fi_eq_read(eq, event, entry, sizeof *entry + 64, 0);
    if (rc != -FI_EAGAIN) return rc;
    // Peeking drives the other queue's endpoints without taking its events.
    uint32_t ev;
    auto* peeked = reinterpret_cast<fi_eq_cm_entry*>(scratch);
    if (fi_eq_read(other, &ev, scratch, sizeof scratch, FI_PEEK) > 0 &&
        ev == FI_CONNREQ) {
      fi_freeinfo(peeked->info);
    }
  }
  return -FI_EAGAIN;
}

// A fabric with a passive endpoint listening on it and two event queues:
// the server's (the passive endpoint's) and a client's.
struct Listening {
  fid_fabric* fabric = nullptr;
  fid_eq* server_eq = nullptr;
  fid_eq* client_eq = nullptr;
  fid_pep* pep = nullptr;

  void Listen(fi_info* info) {
    ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
    fi_eq_attr eq_attr{};
    eq_attr.wait_obj = FI_WAIT_UNSPEC;
    ASSERT_EQ(fi_eq_open(fabric, &eq_attr, &server_eq, nullptr), 0);
    ASSERT_EQ(fi_eq_open(fabric, &eq_attr, &client_eq, nullptr), 0);
    ASSERT_EQ(fi_passive_ep(fabric, info, &pep, nullptr), 0);
    ASSERT_EQ(fi_pep_bind(pep, &server_eq->fid, 0), 0);
    ASSERT_EQ(fi_listen(pep), 0);
  }
  void CloseAll() {
    if (pep) EXPECT_EQ(fi_close(&pep->fid), 0);
    if (server_eq) EXPECT_EQ(fi_close(&server_eq->fid), 0);
    if (client_eq) EXPECT_EQ(fi_close(&client_eq->fid), 0);
    if (fabric) EXPECT_EQ(fi_close(&fabric->fid), 0);
    pep = nullptr;
    server_eq = client_eq = nullptr;
    fabric = nullptr;
  }
};

}  // namespace softfab::fi_test

#endif  // SOFTFAB_TESTS_LIBFABRIC_FI_TEST_UTIL_H_
