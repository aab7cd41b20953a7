// The objects of the sf_*-over-fi_* shim: the sf_* API (api/softfab/fabric.h)
// implemented with libfabric calls only, so that the suites written against
// sf_* (tests/conformance_*, tests/buffer_shape_test, tests/fabtests) run once
// more through libfabric's entry points and softfab's provider. Each sf_*
// object holds the fid it stands for; every fid is opened with its sf_*
// object as context, which maps libfabric's events back.
#ifndef SOFTFAB_TESTS_LIBFABRIC_SF_OVER_FI_INTERNAL_SHIM_OBJECTS_H_
#define SOFTFAB_TESTS_LIBFABRIC_SF_OVER_FI_INTERNAL_SHIM_OBJECTS_H_

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"

namespace softfab::sf_over_fi {
struct Eq;
}

// The shim's sf_info: a connection request's fi_info. One returned by a read
// with SF_PEEK belongs to its event queue (`owner`) until sf_freeinfo or the
// queue's close.
struct sf_info {
  fi_info* fi = nullptr;
  softfab::sf_over_fi::Eq* owner = nullptr;
};

namespace softfab::sf_over_fi {

constexpr uint32_t kMagic = 0x5F0F1F1F;

// Why the last failing call failed (sf_last_error).
inline thread_local std::string last_error;
inline int Fail(int rc, const char* what) {
  last_error = std::string(what) + ": " + fi_strerror(rc < 0 ? -rc : rc);
  return rc < 0 ? rc : -rc;
}

struct Fabric : sf_fabric {
  fid_fabric* fi = nullptr;
  bool sim = true;
  std::string name;       // the fabric's (and its domain's) name
  fi_info* info[4] = {};  // per sf_ep_type (1 MSG, 2 DGRAM, 3 RDM)
};
struct Domain : sf_domain {
  Fabric* fabric = nullptr;
  fid_domain* fi = nullptr;
  int node = 0;
};
struct Ep;
struct Cq : sf_cq {
  fid_cq* fi = nullptr;
  fi_cq_format format = FI_CQ_FORMAT_CONTEXT;
  // Buffered endpoints whose receives it reports: their fi_recv_context
  // names the fid_ep, which the sf_* face reports as the sf_ep.
  std::vector<Ep*> buffered;
};
// Rewrites the fi_recv_context.ep of `count` entries just read from `cq`
// (untagged buffered receives) from the fid_ep to the shim's sf_ep.
void NameShimEndpoints(Cq* cq, void* entries, ssize_t count);
struct Av : sf_av {
  fid_av* fi = nullptr;
};
struct Mr : sf_mr {
  fid_mr* fi = nullptr;
};
struct Eq : sf_eq {
  fid_eq* fi = nullptr;
  std::vector<sf_info*> peeked;  // requests it owns (SF_PEEK reads)
};
struct Pep : sf_pep {
  fid_pep* fi = nullptr;
};
struct Ep : sf_ep {
  fid_ep* fi = nullptr;
  sf_ep_attr attr{};
  fi_info* info = nullptr;
  // Buffered: the contexts claims will complete with (NameShimEndpoints).
  std::vector<void*> claims;
};

// An enum field as the caller stored it: tests pass values outside the enum
// on purpose, and loading those as the enum type is undefined.
template <typename E>
int Raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// The object behind a public pointer when it is open and of that class.
template <typename T, typename Pub>
T* As(Pub* p, sf_fclass fclass) {
  return p != nullptr && p->fid.magic == kMagic && p->fid.fclass == fclass
             ? static_cast<T*>(p)
             : nullptr;
}
inline bool IsClass(const sf_fid* f, sf_fclass fclass) {
  return f != nullptr && f->magic == kMagic && f->fclass == fclass;
}
template <typename T>
T* New(sf_fclass fclass, void* context) {
  auto* t = new T;
  t->fid.fclass = fclass;
  t->fid.magic = kMagic;
  t->fid.context = context;
  return t;
}
template <typename T>
void Delete(T* t) {
  t->fid.magic = 0;
  delete t;
}

// The libfabric fid an sf_* object stands for (nullptr when none).
fid* FiFid(sf_fid* f);

}  // namespace softfab::sf_over_fi

#endif  // SOFTFAB_TESTS_LIBFABRIC_SF_OVER_FI_INTERNAL_SHIM_OBJECTS_H_
