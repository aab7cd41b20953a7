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

}  // namespace softfab::fi_test

#endif  // SOFTFAB_TESTS_LIBFABRIC_FI_TEST_UTIL_H_
