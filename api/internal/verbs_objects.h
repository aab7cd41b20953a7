// The objects behind the sfv_* handles (api/softfab/verbs.h), shared by the
// files of //api:verbs and by nothing else: the C wrappers around the
// transport's objects, the context that owns them, and the conversions every
// file uses. Conversions happen in //api:verbs and only there: Status codes
// become errno return values (post/modify/destroy) or NULL + errno (create), as
// libibverbs does.
//
// The files of //api:verbs define their sfv_* calls inside this namespace: a
// function with C linkage is the same global function whichever namespace
// declares it, and there the wrappers and helpers need no qualification.
#ifndef SOFTFAB_API_INTERNAL_VERBS_OBJECTS_H_
#define SOFTFAB_API_INTERNAL_VERBS_OBJECTS_H_

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "api/softfab/verbs.h"
#include "backends/sim/sim_fabric.h"
#include "core/status.h"
#include "core/transport.h"

namespace softfab::verbs_internal {
struct SfvContext;
}  // namespace softfab::verbs_internal

struct sfv_device {
  sfv_sim_fabric* fabric;
  ::softfab::transport::Device* dev;
  int node;
};

struct sfv_sim_fabric {
  std::unique_ptr<softfab::sim::SimFabric> sim;
  std::vector<std::unique_ptr<sfv_device>> devices;
  std::vector<std::unique_ptr<softfab::verbs_internal::SfvContext>> contexts;
};

namespace softfab::verbs_internal {

namespace tp = ::softfab::transport;

struct PdImpl : sfv_pd {
  tp::ProtectionDomain* pd;
};
struct MrImpl : sfv_mr {
  tp::MemoryRegion* mr;
};
struct CqImpl : sfv_cq {
  tp::CompletionQueue* cq;
};
struct SrqImpl : sfv_srq {
  tp::SharedReceiveQueue* srq;
  uint32_t max_sge;
};
struct QpImpl : sfv_qp {
  tp::QueuePair* qp;
  // Checked before an SGE list is read, so an oversized num_sge never reads
  // past the list.
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
};
struct AhImpl : sfv_ah {
  tp::AddressHandle* ah;
};

// A context owns the C wrappers of everything created under it; the transport
// objects are owned by the device and released through their Destroy() methods.
// The maps are keyed by address for validation lookups only: nothing iterates
// them.
struct SfvContext : sfv_context {
  sfv_sim_fabric* fabric = nullptr;
  bool open = true;
  uint32_t next_handle = 1;
  uint32_t pds = 0;
  uint32_t cqs = 0;
  std::unordered_map<const void*, std::unique_ptr<PdImpl>> pd_objs;
  std::unordered_map<const void*, std::unique_ptr<MrImpl>> mr_objs;
  std::unordered_map<const void*, std::unique_ptr<CqImpl>> cq_objs;
  std::unordered_map<const void*, std::unique_ptr<SrqImpl>> srq_objs;
  std::unordered_map<const void*, std::unique_ptr<QpImpl>> qp_objs;
  std::unordered_map<const void*, std::unique_ptr<AhImpl>> ah_objs;
  // Lookups for async events: transport handle / QP number -> wrapper.
  std::map<uint32_t, CqImpl*> cq_by_handle;
  std::map<uint32_t, SrqImpl*> srq_by_handle;
  std::map<uint32_t, QpImpl*> qp_by_num;
};

// The errno of a status, for calls that return it.
inline int Err(const softfab::Status& s) { return s.code(); }

template <typename T>
T* Fail(int code) {
  errno = code;
  return nullptr;
}

inline SfvContext* Ctx(sfv_context* c) { return static_cast<SfvContext*>(c); }

// The integer in a C enum field. A C caller may store any int there; reading an
// out-of-range value through the C++ enum type would be undefined, so copy the
// bits.
template <typename E>
int Raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

inline bool ValidMtu(int m) { return m >= SFV_MTU_256 && m <= SFV_MTU_4096; }

inline void SyncState(QpImpl* q) {
  q->state = static_cast<sfv_qp_state>(q->qp->state());
}

}  // namespace softfab::verbs_internal

#endif  // SOFTFAB_API_INTERNAL_VERBS_OBJECTS_H_
