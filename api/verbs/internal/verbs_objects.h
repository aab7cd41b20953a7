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
#ifndef SOFTFAB_API_VERBS_INTERNAL_VERBS_OBJECTS_H_
#define SOFTFAB_API_VERBS_INTERNAL_VERBS_OBJECTS_H_

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/internal/raw_enum.h"
#include "api/softfab/verbs.h"
#include "transport/backend.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::sim {
class SimFabric;
}  // namespace softfab::sim
namespace softfab::verbs_internal {
struct SfvContext;
}  // namespace softfab::verbs_internal

// A device list entry: the backend it opens on and the node there. The
// entries of sfv_sim_get_device_list are a simulated fabric's nodes and
// belong to that fabric (`owner`); those of sfv_get_device_list are real
// devices, each with a backend of its own, and belong to their list (or to a
// context's copy of it).
struct sfv_device {
  std::shared_ptr<::softfab::transport::Backend> backend;
  int node = 0;
  std::string name;
  uint64_t guid = 0;
  std::string fw_ver;  // what sfv_query_device reports (the transport has none)
  sfv_sim_fabric* owner = nullptr;
};

// A simulated fabric of the sfv_* API: its backend, the simulator inside it
// (for the sfv_sim_* calls that drive or read it on purpose), its nodes'
// list entries, and the wrappers of every context opened on them (kept until
// the fabric goes, so stale use is caught).
struct sfv_sim_fabric {
  std::shared_ptr<::softfab::transport::Backend> backend;
  softfab::sim::SimFabric* sim = nullptr;
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
// The channel the caller sees: `fd` (sfv_comp_channel::fd) is an epoll fd
// watching the transport channel's fd, which the transport keeps O_NONBLOCK;
// the epoll fd's own O_NONBLOCK flag is the caller's, and says whether
// sfv_get_cq_event may wait.
struct ChannelImpl : sfv_comp_channel {
  ChannelImpl() = default;
  ChannelImpl(const ChannelImpl&) = delete;
  ChannelImpl& operator=(const ChannelImpl&) = delete;
  ~ChannelImpl() {
    if (fd >= 0) close(fd);
  }
  tp::CompletionChannel* channel = nullptr;
  // The CQs on this channel, to name the one an event is for. Guarded by `mu`
  // since sfv_get_cq_event may run on another thread than sfv_create_cq.
  std::mutex mu;
  std::map<const tp::CompletionQueue*, CqImpl*> cqs;
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
  // The backend the device came from (shared with the list entry, so a real
  // device's backend outlives its list) and the device every call goes
  // through, open until sfv_close_device gives it back.
  std::shared_ptr<tp::Backend> backend;
  tp::Device* dev = nullptr;
  // A copy of the list entry, so `device` outlives the list as libibverbs'
  // does.
  sfv_device entry;
  bool open = true;
  uint32_t next_handle = 1;
  uint32_t pds = 0;
  uint32_t cqs = 0;
  uint32_t channels = 0;
  std::unordered_map<const void*, std::unique_ptr<PdImpl>> pd_objs;
  std::unordered_map<const void*, std::unique_ptr<MrImpl>> mr_objs;
  std::unordered_map<const void*, std::unique_ptr<CqImpl>> cq_objs;
  std::unordered_map<const void*, std::unique_ptr<SrqImpl>> srq_objs;
  std::unordered_map<const void*, std::unique_ptr<QpImpl>> qp_objs;
  std::unordered_map<const void*, std::unique_ptr<AhImpl>> ah_objs;
  std::unordered_map<const void*, std::unique_ptr<ChannelImpl>> channel_objs;
  // Lookups for async events: transport handle / QP number -> wrapper.
  std::map<uint32_t, CqImpl*> cq_by_handle;
  std::map<uint32_t, SrqImpl*> srq_by_handle;
  std::map<uint32_t, QpImpl*> qp_by_num;
};

// The errno of a status, for calls that return it.
inline int Err(const softfab::Status& s) { return s.code(); }

// Why the last failing call on this thread failed (sfv_last_error).
inline thread_local std::string last_error;

// Records the reason and sets errno, for calls that fail with NULL or -1.
inline void SetError(int code, const char* why) {
  last_error = why;
  errno = code;
}

// `why` defaults to strerror(code).
template <typename T>
T* Fail(int code, const char* why = nullptr) {
  SetError(code, why != nullptr ? why : std::strerror(code));
  return nullptr;
}
template <typename T>
T* Fail(const softfab::Status& s) {
  return Fail<T>(s.code(), s.message());
}

inline SfvContext* Ctx(sfv_context* c) { return static_cast<SfvContext*>(c); }

inline bool ValidMtu(int m) { return m >= SFV_MTU_256 && m <= SFV_MTU_4096; }

inline void SyncState(QpImpl* q) {
  q->state = static_cast<sfv_qp_state>(q->qp->state());
}

}  // namespace softfab::verbs_internal

#endif  // SOFTFAB_API_VERBS_INTERNAL_VERBS_OBJECTS_H_
