// The objects behind the sf_* handles (api/softfab/fabric.h), shared by the
// files of //api:fabric and by nothing else.
//
// Each public object is a struct deriving from the sf_* one; calls check the
// fid's magic and class before casting (As<T>, IsClass, ObjectOf<T>), validate
// the rest of their arguments, and convert the core's Status into -SF_E*
// exactly once, through Fail (which leaves the reason for sf_last_error).
//
// The files of //api:fabric define their sf_* calls inside this namespace:
// a function with C linkage is the same global function whichever namespace
// declares it, and there the objects and helpers need no qualification.
#ifndef SOFTFAB_API_FABRIC_INTERNAL_FABRIC_OBJECTS_H_
#define SOFTFAB_API_FABRIC_INTERNAL_FABRIC_OBJECTS_H_

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "api/internal/raw_enum.h"
#include "api/softfab/fabric.h"
#include "core/address_vector.h"
#include "core/async_events.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/event_queue.h"
#include "core/mr_cache.h"
#include "transport/backend.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::sim {
class SimFabric;
}  // namespace softfab::sim

namespace softfab::fabric_internal {

namespace core = ::softfab::core;
namespace tp = ::softfab::transport;
using ::softfab::Status;

constexpr uint32_t kMagic = 0x5F0FAB5F;

// Why the last failing call on this thread failed (sf_last_error).
inline thread_local const char* last_error = "";

inline int Fail(int code, const char* why) {
  last_error = why;
  return -code;
}
inline int Fail(const Status& s) { return Fail(s.code(), s.message()); }
// For reasons built at run time (a device's diagnostics): kept per thread until
// the next failure.
inline thread_local std::string last_error_text;
inline int FailWith(int code, std::string why) {
  last_error_text = std::move(why);
  last_error = last_error_text.c_str();
  return -code;
}

struct Ep;
struct Srx;

struct Cq;

struct Domain;

// A fabric's class of service (api/fabric/class_of_service.cc).
using ClassOfService = core::ClassOfService;

struct Fabric : sf_fabric {
  using Public = sf_fabric;
  // The backend (transport/backend.h): the simulated fabric or a real device.
  // Every call goes through it and none asks which it is.
  std::unique_ptr<tp::Backend> backend;
  // The in-process simulator behind `backend` when there is one, for the
  // simulator's C++ extension alone (api/sim/sim_api.h: sf_sim_fabric).
  softfab::sim::SimFabric* sim_extension = nullptr;
  // Whether registrations the protocol makes of user buffers are kept
  // (fabric.h, SF_VERBS_MR_CACHE): where unmaps are watched (the verbs
  // default), also where they cannot be (the application's promise), or not
  // at all (one registration per operation; the simulator, which reads live
  // memory and charges nothing for registering).
  enum class MrCacheMode { kOff, kWatched, kTrusted };
  MrCacheMode mr_cache = MrCacheMode::kOff;
  // The class of service its endpoints' paths travel in (sf_fabric_attr's
  // traffic_class, service_level, pkey_index, or the environment).
  ClassOfService class_of_service;
  // How long a blocking read polls before it sleeps on the completion
  // channel (WaitFor): a completion that comes meanwhile costs no system
  // call. Set by a real device's opener ($SOFTFAB_SREAD_SPIN_US, default
  // 20 us); 0 on the simulators, whose time is virtual.
  uint64_t sread_spin_ns = 0;
  // backend->ParksIdleReads(), asked once: only such a backend is told of a
  // read that found nothing, or asked for its health then (ReadCq, ReadEq).
  bool parks_idle_reads = false;
  int children = 0;
  std::vector<Cq*> waitable;     // CQs with a wait fd, kept in step.
  std::vector<Domain*> domains;  // Open domains, in opening order.
};

struct Domain : sf_domain {
  using Public = sf_domain;
  Fabric* fabric = nullptr;
  tp::Device* device = nullptr;
  tp::ProtectionDomain* pd = nullptr;
  int children = 0;
  // Live registrations, so a desc is checked without reading through it, and
  // the last one a post found there (a program posts with the same one again
  // and again: that check is a comparison); cleared when it closes.
  std::set<const void*> mrs;
  const void* last_mr_found = nullptr;
  std::vector<Srx*> srxs;  // Shared receive contexts, in creation order.
  // The completion channel every endpoint's CQs raise events on, so a waiter
  // on a backend whose time runs by itself can sleep on its fd.
  tp::CompletionChannel* channel = nullptr;
  // Registrations of user buffers the protocol makes (rendezvous), reused
  // when the fabric asked for a cache; closed after the endpoints, before the
  // protection domain.
  std::unique_ptr<core::MrCache> mr_cache;
  // Endpoints and listeners on this domain (armed before sleeping).
  std::vector<core::Endpoint*> endpoints;
  // RC settings for endpoints created from now on (api/sim/sim_api.h,
  // sf_sim_domain_tune); 0 keeps the core's default.
  uint8_t tuned_rc_timeout = 0;
  uint8_t tuned_rc_retry_count = 0;
  uint32_t tuned_credits = 0;
  // The reader of the device's asynchronous events, made with the first
  // endpoint and shared with every open domain on the same device (on a
  // simulated fabric each node's device is one, however many domains open
  // it); it lives as long as the last of them.
  std::shared_ptr<core::AsyncEventDispatcher> async_events;
};

struct Cq : sf_cq {
  using Public = sf_cq;
  Domain* domain = nullptr;
  std::unique_ptr<core::CompletionQueue> cq;
  sf_cq_format format = SF_CQ_FORMAT_CONTEXT;
  std::vector<Ep*> eps;  // Bound endpoints, in binding order.
  // SF_WAIT_FD: an epoll fd (`wait_fd`, handed out) watching an eventfd of
  // the CQ's own (`signal_fd`), written while reading the CQ would find work
  // (SyncWaitFds: entries, an entry the core made itself, backend work
  // pending), and the domain's completion channel, which an armed CQ raises
  // while the program sleeps.
  int wait_fd = -1;
  int signal_fd = -1;
  bool signalled = false;
  ~Cq() {
    if (wait_fd >= 0) close(wait_fd);
    if (signal_fd >= 0) close(signal_fd);
  }
};

// Brings every wait fd of `f` in line with what reading its CQ would do:
// readable while entries wait or the backend has work pending, and quiet
// again once read. Called after every call that can change either.
// Defined with the wait objects (api/fabric/wait.cc); inline, the test that
// a fabric has no wait fd at all (every data call makes it).
void SyncWaitFdsOf(Fabric* f);
inline void SyncWaitFds(Fabric* f) {
  if (!f->waitable.empty()) SyncWaitFdsOf(f);
}

struct Av : sf_av {
  using Public = sf_av;
  Domain* domain = nullptr;
  std::unique_ptr<core::AddressVector> av;
  int users = 0;
};

struct Mr : sf_mr {
  using Public = sf_mr;
  Domain* domain = nullptr;
  tp::MemoryRegion* mr = nullptr;
};

struct Eq : sf_eq {
  using Public = sf_eq;
  Fabric* fabric = nullptr;
  std::unique_ptr<core::EventQueue> eq;
  int users = 0;                  // Endpoints and listeners bound to it.
  std::vector<uint8_t> err_data;  // The last error event's private data.
};

struct Pep : sf_pep {
  using Public = sf_pep;
  Domain* domain = nullptr;
  std::unique_ptr<core::Endpoint> ep;  // A listener.
  Eq* eq = nullptr;
};

}  // namespace softfab::fabric_internal

// Outside the internal namespace: the public header declares it.
struct sf_info {
  uint32_t magic = 0;
  std::shared_ptr<const ::softfab::core::ConnRequest> request;
};

namespace softfab::fabric_internal {

struct Srx : sf_ep {
  using Public = sf_ep;
  Domain* domain = nullptr;
  std::unique_ptr<core::RxContext> rx;
  int users = 0;  // Endpoints bound to it.
};

struct Ep : sf_ep {
  using Public = sf_ep;
  Domain* domain = nullptr;
  std::unique_ptr<core::Endpoint> ep;
  Cq* tx_cq = nullptr;
  Cq* rx_cq = nullptr;
  Av* av = nullptr;
  Srx* srx = nullptr;
  Eq* eq = nullptr;
  // SF_EP_MSG created from an SF_CONNREQ: the request sf_accept takes.
  std::shared_ptr<const core::ConnRequest> request;
  // The primary capabilities asked for (SF_MSG, SF_TAGGED), which
  // sf_ep_query reports.
  uint64_t primary_caps = 0;
};

// The reader of `d`'s device's asynchronous events (Domain::async_events).
inline core::AsyncEventDispatcher* AsyncEventsOf(Domain* d) {
  if (d->async_events == nullptr) {
    for (const Domain* other : d->fabric->domains) {
      if (other->device == d->device && other->async_events != nullptr) {
        d->async_events = other->async_events;
        break;
      }
    }
  }
  if (d->async_events == nullptr) {
    d->async_events = std::make_shared<core::AsyncEventDispatcher>(d->device);
  }
  return d->async_events.get();
}

// What an endpoint takes from its domain and backend: the CQs raise events
// on the domain's channel, user buffers are registered through the domain's
// cache, the device's asynchronous events are read by the domain's reader,
// and inline sends and CM timing follow the backend's tuning (real
// networks retry on their own scale; the simulator keeps the core's
// defaults, so its runs stay as they were).
inline void SetBackendTiming(Domain* d, core::EndpointAttr* a) {
  if (d->tuned_rc_timeout != 0) a->rc_timeout = d->tuned_rc_timeout;
  if (d->tuned_rc_retry_count != 0) {
    a->rc_retry_count = d->tuned_rc_retry_count;
  }
  if (d->tuned_credits != 0) a->credits = d->tuned_credits;
  a->channel = d->channel;
  a->mr_cache = d->mr_cache.get();
  a->async_events = AsyncEventsOf(d);
  const tp::BackendTuning t = d->fabric->backend->tuning();
  a->inline_sends = t.inline_sends;
  a->defer_reposts = t.defer_reposts;
  if (t.cm_retry_ns != 0) a->cm_retry_ns = t.cm_retry_ns;
  if (t.cm_retries_max != 0) a->cm_retries_max = t.cm_retries_max;
  a->class_of_service = d->fabric->class_of_service;
}

// Takes an endpoint or listener off its domain's list (before it goes).
inline void ForgetEndpoint(Domain* d, core::Endpoint* ep) {
  auto& all = d->endpoints;
  auto it = std::find(all.begin(), all.end(), ep);
  if (it != all.end()) all.erase(it);
}

inline void InitFid(sf_fid* fid, sf_fclass fclass, void* context) {
  fid->fclass = fclass;
  fid->magic = kMagic;
  fid->context = context;
}

// Begins an object's life: a fid header, and one more child of its parent
// (nullptr for a fabric).
template <typename T>
T* NewObject(sf_fclass fclass, void* context, int* parent_children) {
  auto* object = new T;
  InitFid(&object->fid, fclass, context);
  if (parent_children != nullptr) ++*parent_children;
  return object;
}

// Ends an object's life: its parent counts one child fewer, and a stale
// handle to it is recognised as closed.
template <typename T>
int Release(T* object, int* parent_children) {
  --*parent_children;
  object->fid.magic = 0;
  delete object;
  return 0;
}

// Per-type casts from the public struct pointer: the object, or null when
// `p` is null, closed, or of another class.
template <typename T, typename Pub>
T* As(Pub* p, sf_fclass fclass) {
  return p && p->fid.magic == kMagic && p->fid.fclass == fclass
             ? static_cast<T*>(p)
             : nullptr;
}
inline Fabric* AsFabric(sf_fabric* p) { return As<Fabric>(p, SF_CLASS_FABRIC); }
inline Domain* AsDomain(sf_domain* p) { return As<Domain>(p, SF_CLASS_DOMAIN); }
inline Cq* AsCq(sf_cq* p) { return As<Cq>(p, SF_CLASS_CQ); }
inline Av* AsAv(sf_av* p) { return As<Av>(p, SF_CLASS_AV); }
inline Mr* AsMr(sf_mr* p) { return As<Mr>(p, SF_CLASS_MR); }
inline Ep* AsEp(sf_ep* p) { return As<Ep>(p, SF_CLASS_EP); }
inline Eq* AsEq(sf_eq* p) { return As<Eq>(p, SF_CLASS_EQ); }
inline Pep* AsPep(sf_pep* p) { return As<Pep>(p, SF_CLASS_PEP); }
inline Srx* AsSrx(sf_ep* p) { return As<Srx>(p, SF_CLASS_SRX_CTX); }
inline bool IsClass(const sf_fid* fid, sf_fclass fclass) {
  return fid != nullptr && fid->magic == kMagic && fid->fclass == fclass;
}
// The object a fid heads (the fid is the first member of the public struct
// the object derives from); the caller has checked its class.
template <typename T>
T* ObjectOf(sf_fid* fid) {
  return static_cast<T*>(reinterpret_cast<typename T::Public*>(fid));
}

}  // namespace softfab::fabric_internal

#endif  // SOFTFAB_API_FABRIC_INTERNAL_FABRIC_OBJECTS_H_
