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
#include "backends/sim/sim_fabric.h"
#include "backends/verbs/verbs_device.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs_internal {
struct SfvContext;
}  // namespace softfab::verbs_internal

// A device of either backend. Simulated: `fabric` and `dev` are the fabric and
// its node's device, owned by the fabric. Real: both are null, and each
// context opens the device by `name` for itself; the entry belongs to the
// list that holds it (sfv_free_device_list deletes it) or to a context.
struct sfv_device {
  sfv_sim_fabric* fabric = nullptr;
  ::softfab::transport::Device* dev = nullptr;
  int node = -1;
  std::string name;
  uint64_t guid = 0;  // real devices: from the list
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
  // The simulated fabric, or null on a real device.
  sfv_sim_fabric* fabric = nullptr;
  // The device every call goes through: the fabric's node, or `hardware`.
  tp::Device* dev = nullptr;
  // Real devices: the opened device (destroyed with the context, by
  // sfv_close_device) and a copy of the list entry, so `device` outlives the
  // list as libibverbs' does.
  std::unique_ptr<softfab::verbs::VerbsDevice> hardware;
  sfv_device hardware_entry;
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

// Opens a real device's list entry (api/verbs/verbs_hardware.cc): a context that owns
// the opened device, or NULL + errno with the reason in sfv_last_error.
sfv_context* OpenHardwareContext(const sfv_device& entry);

inline bool ValidMtu(int m) { return m >= SFV_MTU_256 && m <= SFV_MTU_4096; }

inline void SyncState(QpImpl* q) {
  q->state = static_cast<sfv_qp_state>(q->qp->state());
}

}  // namespace softfab::verbs_internal

#endif  // SOFTFAB_API_VERBS_INTERNAL_VERBS_OBJECTS_H_
