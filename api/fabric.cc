// The sf_* messaging API (api/softfab/fabric.h) over the core.
//
// Each public object is a struct deriving from the sf_* one; calls check the
// fid's magic and class before casting, validate the rest of their arguments,
// and convert the core's Status into -SF_E* exactly once, here.
#include "api/softfab/fabric.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "core/address_vector.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/event_queue.h"
#include "core/flags.h"
#include "core/status.h"
#include "core/transport.h"
#include "core/wire.h"

namespace {

namespace core = ::softfab::core;
namespace tp = ::softfab::transport;
using ::softfab::Status;

static_assert(SF_MSG == core::kMsg && SF_TAGGED == core::kTagged &&
                  SF_RECV == core::kRecv && SF_SEND == core::kSend &&
                  SF_MULTI_RECV == core::kMultiRecv &&
                  SF_REMOTE_CQ_DATA == core::kRemoteCqData &&
                  SF_MORE == core::kMore && SF_PEEK == core::kPeek &&
                  SF_FENCE == core::kFence &&
                  SF_COMPLETION == core::kCompletion &&
                  SF_INJECT == core::kInject &&
                  SF_INJECT_COMPLETE == core::kInjectComplete &&
                  SF_TRANSMIT_COMPLETE == core::kTransmitComplete &&
                  SF_DELIVERY_COMPLETE == core::kDeliveryComplete &&
                  SF_MATCH_COMPLETE == core::kMatchComplete &&
                  SF_CLAIM == core::kClaim && SF_DISCARD == core::kDiscard &&
                  SF_DIRECTED_RECV == core::kDirectedRecv &&
                  SF_MULTICAST == core::kMulticast &&
                  SF_SELECTIVE_COMPLETION ==
                      core::Endpoint::kSelectiveCompletion &&
                  SF_ETRUNC == ::softfab::kErrTruncated &&
                  SF_EOPBADSTATE == ::softfab::kErrOpBadState &&
                  SF_BUFFERED_RECV == core::kBufferedRecv &&
                  SF_VARIABLE_MSG == core::kVariableMsg &&
                  SF_EAVAIL == core::CompletionQueue::kErrAvail &&
                  SF_NAME_BYTES == ::softfab::wire::kNameBytes,
              "public and core constants must agree");

constexpr uint32_t kMagic = 0x5F0FAB5F;

thread_local const char* last_error = "";

int Fail(int code, const char* why) {
  last_error = why;
  return -code;
}
int Fail(const Status& s) { return Fail(s.code(), s.message()); }

struct Ep;
struct Srx;

struct Cq;

struct Fabric : sf_fabric {
  using Public = sf_fabric;
  std::unique_ptr<softfab::sim::SimFabric> sim;
  int children = 0;
  std::vector<Cq*> waitable;  // CQs with a wait fd, kept in step.
};

struct Domain : sf_domain {
  using Public = sf_domain;
  Fabric* fabric = nullptr;
  tp::Device* device = nullptr;
  tp::ProtectionDomain* pd = nullptr;
  int children = 0;
  // Live registrations, so a desc is checked without reading through it.
  std::set<const void*> mrs;
  std::vector<Srx*> srxs;  // Shared receive contexts, in creation order.
};

struct Cq : sf_cq {
  using Public = sf_cq;
  Domain* domain = nullptr;
  std::unique_ptr<core::CompletionQueue> cq;
  sf_cq_format format = SF_CQ_FORMAT_CONTEXT;
  std::vector<Ep*> eps;  // Bound endpoints, in binding order.
  std::vector<core::CqEntry> scratch = std::vector<core::CqEntry>(64);
  std::vector<uint64_t> scratch_src = std::vector<uint64_t>(64);
  int wait_fd = -1;  // SF_WAIT_FD: an eventfd, readable while signalled.
  bool signalled = false;
  ~Cq() {
    if (wait_fd >= 0) close(wait_fd);
  }
};

// Brings every wait fd of `f` in line with what reading its CQ would do:
// readable while entries wait or the simulated fabric has events pending.
// Called after every call that can change either.
void SyncWaitFds(Fabric* f) {
  if (f->waitable.empty()) return;
  const bool busy = f->sim->pending_events() > 0;
  for (Cq* c : f->waitable) {
    const bool want = busy || c->cq->pending() > 0 || c->cq->has_error();
    if (want == c->signalled) continue;
    uint64_t v = 1;
    ssize_t n =
        want ? write(c->wait_fd, &v, sizeof v) : read(c->wait_fd, &v, sizeof v);
    if (n == static_cast<ssize_t>(sizeof v)) c->signalled = want;
  }
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

}  // namespace

// Outside the anonymous namespace: the public header declares it.
struct sf_info {
  uint32_t magic = 0;
  std::shared_ptr<const ::softfab::core::ConnRequest> request;
};

namespace {

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
};

void InitFid(sf_fid* fid, sf_fclass fclass, void* context) {
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
Fabric* AsFabric(sf_fabric* p) { return As<Fabric>(p, SF_CLASS_FABRIC); }
Domain* AsDomain(sf_domain* p) { return As<Domain>(p, SF_CLASS_DOMAIN); }
Cq* AsCq(sf_cq* p) { return As<Cq>(p, SF_CLASS_CQ); }
Av* AsAv(sf_av* p) { return As<Av>(p, SF_CLASS_AV); }
Mr* AsMr(sf_mr* p) { return As<Mr>(p, SF_CLASS_MR); }
Ep* AsEp(sf_ep* p) { return As<Ep>(p, SF_CLASS_EP); }
Eq* AsEq(sf_eq* p) { return As<Eq>(p, SF_CLASS_EQ); }
Pep* AsPep(sf_pep* p) { return As<Pep>(p, SF_CLASS_PEP); }
bool ValidInfo(const sf_info* info) {
  return info != nullptr && info->magic == kMagic && info->request != nullptr;
}
Srx* AsSrx(sf_ep* p) { return As<Srx>(p, SF_CLASS_SRX_CTX); }
bool IsClass(const sf_fid* fid, sf_fclass fclass) {
  return fid != nullptr && fid->magic == kMagic && fid->fclass == fclass;
}
// The object a fid heads (the fid is the first member of the public struct
// the object derives from); the caller has checked its class.
template <typename T>
T* ObjectOf(sf_fid* fid) {
  return static_cast<T*>(reinterpret_cast<typename T::Public*>(fid));
}

// Resolves user descriptors (sf_mr_desc values) into transport regions of
// `domain`; false when one is not a live registration of that domain.
bool ResolveDesc(Domain* domain, void** desc, size_t count,
                 tp::MemoryRegion** out) {
  for (size_t i = 0; i < count; ++i) {
    out[i] = nullptr;
    if (desc == nullptr || desc[i] == nullptr) continue;
    if (domain->mrs.count(desc[i]) == 0) return false;
    out[i] = static_cast<Mr*>(static_cast<sf_mr*>(desc[i]))->mr;
  }
  return true;
}

void ProgressCq(Cq* cq) {
  for (Ep* ep : cq->eps) ep->ep->Progress();
}

// What every post checks after finding its object: the iov count and the
// descriptors (resolved into transport registrations).
int CheckPost(Domain* domain, void** desc, size_t count,
              tp::MemoryRegion** mrs) {
  if (count > core::Endpoint::kIovMax) {
    return Fail(EINVAL, "too many iov entries");
  }
  if (!ResolveDesc(domain, desc, count, mrs)) {
    return Fail(EINVAL, "desc is not a registration of this domain");
  }
  return 0;
}

ssize_t DoSend(sf_ep* pub, const iovec* iov, void** desc, size_t count,
               sf_addr_t dest, uint64_t tag, uint64_t data, void* context,
               uint64_t flags, bool tagged) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr) return Fail(EINVAL, "not an endpoint");
  tp::MemoryRegion* mrs[core::Endpoint::kIovMax];
  if (int rc = CheckPost(ep->domain, desc, count, mrs); rc != 0) return rc;
  core::SendArgs a;
  a.iov = iov;
  a.iov_count = count;
  a.desc = desc ? mrs : nullptr;
  a.dest = dest;
  a.tag = tag;
  a.data = data;
  a.context = context;
  a.flags = flags;
  a.tagged = tagged;
  const Status s = ep->ep->Send(a);
  SyncWaitFds(ep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

ssize_t DoRecv(sf_ep* pub, const iovec* iov, void** desc, size_t count,
               sf_addr_t src, uint64_t tag, uint64_t ignore, void* context,
               uint64_t flags, bool tagged) {
  // An endpoint or a shared receive context.
  Ep* ep = AsEp(pub);
  Srx* srx = AsSrx(pub);
  if (ep == nullptr && srx == nullptr) {
    return Fail(EINVAL, "not an endpoint or a shared receive context");
  }
  tp::MemoryRegion* mrs[core::Endpoint::kIovMax];
  if (int rc = CheckPost(ep ? ep->domain : srx->domain, desc, count, mrs);
      rc != 0) {
    return rc;
  }
  core::RecvArgs a;
  a.iov = iov;
  a.iov_count = count;
  a.desc = desc ? mrs : nullptr;
  a.src = src;
  a.tag = tag;
  a.ignore = ignore;
  a.context = context;
  a.flags = flags;
  a.tagged = tagged;
  const Status s = ep ? ep->ep->Recv(a) : srx->rx->Recv(a);
  SyncWaitFds(ep ? ep->domain->fabric : srx->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

void CopyOut(const core::CqEntry& e, sf_cq_format format, void* buf, size_t i) {
  switch (format) {
    case SF_CQ_FORMAT_CONTEXT:
      static_cast<sf_cq_entry*>(buf)[i] = {e.op_context};
      break;
    case SF_CQ_FORMAT_MSG:
      static_cast<sf_cq_msg_entry*>(buf)[i] = {e.op_context, e.flags, e.len};
      break;
    case SF_CQ_FORMAT_DATA:
      static_cast<sf_cq_data_entry*>(buf)[i] = {e.op_context, e.flags, e.len,
                                                e.buf, e.data};
      break;
    case SF_CQ_FORMAT_TAGGED:
      static_cast<sf_cq_tagged_entry*>(buf)[i] = {e.op_context, e.flags, e.len,
                                                  e.buf,        e.data,  e.tag};
      break;
  }
}

ssize_t ReadCq(sf_cq* pub, void* buf, size_t count, sf_addr_t* src) {
  Cq* cq = AsCq(pub);
  if (cq == nullptr) return Fail(EINVAL, "not a completion queue");
  if (count == 0) {
    cq->cq->Progress();
    SyncWaitFds(cq->domain->fabric);
    return 0;
  }
  if (buf == nullptr) return Fail(EINVAL, "need a buffer for the entries");
  // Entries are read into the CQ's own scratch space (not a fresh local
  // array, whose initialisation would cost more than the read).
  core::CqEntry* entries = cq->scratch.data();
  uint64_t* srcs = cq->scratch_src.data();
  const int n =
      cq->cq->Read(entries, std::min(count, cq->scratch.size()), srcs);
  SyncWaitFds(cq->domain->fabric);
  if (n < 0) {
    last_error = n == -EAGAIN ? "no completion is ready"
                              : "an error completion is next: sf_cq_readerr";
    return n;
  }
  for (int i = 0; i < n; ++i) {
    CopyOut(entries[i], cq->format, buf, i);
    if (src) src[i] = srcs[i];
  }
  return n;
}

// A blocking read: `try_read` until it returns something other than
// -EAGAIN, running the simulated fabric on in between. The timeout is virtual
// time; an idle fabric ends the wait at once (nothing can arrive).
template <typename TryRead>
ssize_t WaitFor(Fabric* fabric, int timeout_ms, TryRead try_read) {
  softfab::sim::SimFabric& sim = *fabric->sim;
  const uint64_t start = sim.clock().NowNs();
  const uint64_t deadline =
      timeout_ms < 0 ? UINT64_MAX
                     : start + static_cast<uint64_t>(timeout_ms) * 1000000;
  while (true) {
    const ssize_t n = try_read();
    if (n != -EAGAIN) return n;
    if (sim.pending_events() == 0) {
      return Fail(ETIMEDOUT, "the fabric is idle: nothing will arrive");
    }
    if (sim.clock().NowNs() >= deadline) return Fail(ETIMEDOUT, "timed out");
    sim.Step();
  }
}

ssize_t ReadEq(Eq* eq, uint32_t* event, void* buf, size_t len, uint64_t flags) {
  auto ev = eq->eq->Read((flags & SF_PEEK) != 0);
  SyncWaitFds(eq->fabric);
  if (!ev.ok()) {
    last_error = ev.status().message();
    return -ev.status().code();
  }
  const core::EqEvent& e = **ev;
  auto* out = static_cast<sf_eq_cm_entry*>(buf);
  out->fid = static_cast<sf_fid*>(e.fid);
  out->info = nullptr;
  if (e.type == core::kEqConnReq && !(flags & SF_PEEK)) {
    auto* info = new sf_info;
    info->magic = kMagic;
    info->request = e.info;
    out->info = info;
  }
  const size_t n = std::min(e.data.size(), len - sizeof(sf_eq_cm_entry));
  if (n > 0) std::memcpy(out->data, e.data.data(), n);
  *event = e.type;
  return static_cast<ssize_t>(sizeof(sf_eq_cm_entry) + n);
}

int CheckEqRead(Eq* eq, uint32_t* event, void* buf, size_t len,
                uint64_t flags) {
  if (eq == nullptr) return Fail(EINVAL, "not an event queue");
  if (event == nullptr || buf == nullptr) {
    return Fail(EINVAL, "event and buf must not be NULL");
  }
  if (len < sizeof(sf_eq_cm_entry)) {
    return Fail(EINVAL, "buf must hold an sf_eq_cm_entry");
  }
  if (flags & ~SF_PEEK) return Fail(EINVAL, "flags: 0 or SF_PEEK");
  return 0;
}

}  // namespace

extern "C" {

const char* sf_strerror(int errnum) {
  if (errnum < 0) errnum = -errnum;
  switch (errnum) {
    case 0:
      return "success";
    case SF_EAGAIN:
      return "resources temporarily unavailable: read CQs, retry";
    case SF_EINVAL:
      return "invalid argument";
    case SF_ENOMEM:
      return "out of memory or queue space";
    case SF_ENOSYS:
      return "not implemented";
    case SF_ENOMSG:
      return "no matching message";
    case SF_ECANCELED:
      return "operation cancelled";
    case SF_ETRUNC:
      return "message truncated";
    case SF_EAVAIL:
      return "error completion available";
    case SF_ETOOSMALL:
      return "buffer too small";
    case SF_EOPBADSTATE:
      return "object in the wrong state";
    case SF_EBUSY:
      return "object in use";
    case SF_ENOENT:
      return "not found";
    case SF_EIO:
      return "I/O error";
    case SF_ETIMEDOUT:
      return "timed out";
    case SF_EHOSTUNREACH:
      return "peer unreachable";
    default:
      return strerror(errnum);
  }
}

const char* sf_last_error(void) { return last_error; }

int sf_fabric_open(const sf_fabric_attr* attr, sf_fabric** out, void* context) {
  if (attr == nullptr || out == nullptr) {
    return Fail(EINVAL, "attr and fabric must not be NULL");
  }
  if (attr->backend == SF_BACKEND_VERBS) {
    return Fail(ENOSYS, "the verbs backend is not built yet (later issue)");
  }
  if (attr->backend != SF_BACKEND_SIM) return Fail(EINVAL, "unknown backend");
  if (attr->sim_nodes <= 0 || attr->sim_nodes > 4096) {
    return Fail(EINVAL, "sim_nodes must be in [1, 4096]");
  }
  softfab::sim::SimConfig config;
  config.nodes = attr->sim_nodes;
  config.master_seed = attr->sim_seed;
  config.default_link.latency_ns = attr->sim_latency_ns;
  config.default_link.bandwidth_bps = attr->sim_bandwidth_bps;
  const struct {
    double p;
    softfab::sim::PacketFaultKind kind;
    uint64_t delay_ns;
  } faults[] = {
      {attr->sim_drop, softfab::sim::PacketFaultKind::kDrop, 0},
      {attr->sim_duplicate, softfab::sim::PacketFaultKind::kDuplicate, 700},
      {attr->sim_reorder, softfab::sim::PacketFaultKind::kReorder, 5000},
  };
  for (const auto& f : faults) {
    if (!(f.p >= 0.0 && f.p <= 1.0)) {
      return Fail(EINVAL, "fault probabilities must be in [0, 1]");
    }
    if (f.p == 0.0) continue;
    softfab::sim::PacketFault pf;
    pf.kind = f.kind;
    pf.probability = f.p;
    pf.delay_ns = f.delay_ns;
    config.faults.packet_faults.push_back(pf);
  }
  auto sim = softfab::sim::CreateSimFabric(config);
  if (!sim) return Fail(EINVAL, "simulator configuration refused");
  auto* f = NewObject<Fabric>(SF_CLASS_FABRIC, context, nullptr);
  f->sim = std::move(sim);
  *out = f;
  return 0;
}

int sf_domain_open(sf_fabric* pub, int node, sf_domain** out, void* context) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || out == nullptr) {
    return Fail(EINVAL, "fabric and domain must be valid");
  }
  tp::Device* dev = f->sim->device(node);
  if (dev == nullptr) return Fail(EINVAL, "no such node");
  auto pd = dev->AllocPd();
  if (!pd.ok()) return Fail(pd.status());
  auto* d = NewObject<Domain>(SF_CLASS_DOMAIN, context, &f->children);
  d->fabric = f;
  d->device = dev;
  d->pd = *pd;
  *out = d;
  return 0;
}

int sf_sim_digest(sf_fabric* pub, uint64_t* digest) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || digest == nullptr) return Fail(EINVAL, "bad argument");
  *digest = f->sim->digest();
  return 0;
}

int sf_sim_now(sf_fabric* pub, uint64_t* now_ns) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || now_ns == nullptr) return Fail(EINVAL, "bad argument");
  *now_ns = f->sim->clock().NowNs();
  return 0;
}

int sf_mr_reg(sf_domain* pub, const void* buf, size_t len, uint64_t access,
              uint64_t offset, uint64_t requested_key, uint64_t flags,
              sf_mr** out, void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and mr must be valid");
  }
  if (buf == nullptr || len == 0) {
    return Fail(EINVAL, "a registration needs a buffer and a length");
  }
  constexpr uint64_t kAccess =
      SF_SEND | SF_RECV | SF_READ | SF_WRITE | SF_REMOTE_READ | SF_REMOTE_WRITE;
  if (access & ~kAccess) return Fail(EINVAL, "unknown access bits");
  if (offset != 0 || requested_key != 0 || flags != 0) {
    return Fail(EINVAL, "offset, requested_key and flags must be 0");
  }
  // Local write lets receives and READs land; remote read serves rendezvous
  // sends; remote write is asked for explicitly.
  uint32_t ibv = tp::kAccessLocalWrite | tp::kAccessRemoteRead;
  if (access & SF_REMOTE_WRITE) ibv |= tp::kAccessRemoteWrite;
  auto mr = d->pd->RegMr(const_cast<void*>(buf), len, ibv);
  if (!mr.ok()) return Fail(mr.status());
  auto* m = NewObject<Mr>(SF_CLASS_MR, context, &d->children);
  m->domain = d;
  m->mr = *mr;
  d->mrs.insert(static_cast<sf_mr*>(m));
  *out = m;
  return 0;
}

void* sf_mr_desc(sf_mr* pub) { return AsMr(pub) ? pub : nullptr; }

int sf_av_open(sf_domain* pub, const sf_av_attr* attr, sf_av** out,
               void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and av must be valid");
  }
  const size_t count = attr && attr->count ? attr->count : 1024;
  if (attr && attr->flags) return Fail(EINVAL, "no AV flags are supported");
  auto* a = NewObject<Av>(SF_CLASS_AV, context, &d->children);
  a->domain = d;
  a->av = std::make_unique<core::AddressVector>(count);
  *out = a;
  return 0;
}

int sf_av_insert(sf_av* pub, const void* addr, size_t count, sf_addr_t* fi_addr,
                 uint64_t flags, void* context) {
  (void)context;
  Av* a = AsAv(pub);
  if (a == nullptr) return Fail(EINVAL, "not an address vector");
  if ((addr == nullptr && count > 0) || flags != 0) {
    return Fail(EINVAL, "need names to insert; flags must be 0");
  }
  int inserted = 0;
  for (size_t i = 0; i < count; ++i) {
    softfab::wire::Name name;
    softfab::wire::DecodeName(
        static_cast<const uint8_t*>(addr) + i * SF_NAME_BYTES, &name);
    auto index = a->av->Insert(name);
    if (fi_addr) fi_addr[i] = index.ok() ? *index : SF_ADDR_NOTAVAIL;
    if (index.ok()) {
      ++inserted;
    } else {
      last_error = index.status().message();
    }
  }
  return inserted;
}

int sf_av_remove(sf_av* pub, sf_addr_t* fi_addr, size_t count, uint64_t flags) {
  Av* a = AsAv(pub);
  if (a == nullptr || (fi_addr == nullptr && count > 0) || flags != 0) {
    return Fail(EINVAL, "bad argument");
  }
  // All or nothing: check every index first.
  for (size_t i = 0; i < count; ++i) {
    if (!a->av->Lookup(fi_addr[i])) {
      return Fail(EINVAL, "an address to remove is not in the vector");
    }
  }
  for (size_t i = 0; i < count; ++i) (void)a->av->Remove(fi_addr[i]);
  return 0;
}

int sf_av_lookup(sf_av* pub, sf_addr_t fi_addr, void* addr, size_t* addrlen) {
  Av* a = AsAv(pub);
  if (a == nullptr || addrlen == nullptr) return Fail(EINVAL, "bad argument");
  auto name = a->av->Lookup(fi_addr);
  if (!name) return Fail(ENOENT, "no address at that index");
  const size_t room = *addrlen;
  *addrlen = SF_NAME_BYTES;
  if (addr == nullptr || room < SF_NAME_BYTES) {
    return Fail(SF_ETOOSMALL, "address buffer too small (size written back)");
  }
  softfab::wire::EncodeName(*name, static_cast<uint8_t*>(addr));
  return 0;
}

int sf_cq_open(sf_domain* pub, const sf_cq_attr* attr, sf_cq** out,
               void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and cq must be valid");
  }
  const size_t size = attr && attr->size ? attr->size : 1024;
  const sf_cq_format format = attr ? attr->format : SF_CQ_FORMAT_CONTEXT;
  if (format < SF_CQ_FORMAT_CONTEXT || format > SF_CQ_FORMAT_TAGGED) {
    return Fail(EINVAL, "unknown CQ format");
  }
  if (size > (1u << 24)) return Fail(EINVAL, "CQ size too large");
  if (attr && attr->flags) return Fail(EINVAL, "no CQ flags are supported");
  const sf_wait_obj wait = attr ? attr->wait_obj : SF_WAIT_NONE;
  if (wait != SF_WAIT_NONE && wait != SF_WAIT_UNSPEC && wait != SF_WAIT_FD) {
    return Fail(wait == SF_WAIT_SET ? ENOSYS : EINVAL,
                "wait_obj: SF_WAIT_NONE, SF_WAIT_UNSPEC or SF_WAIT_FD");
  }
  int fd = -1;
  if (wait != SF_WAIT_NONE) {
    fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return Fail(ENOMEM, "eventfd failed");
  }
  auto* c = NewObject<Cq>(SF_CLASS_CQ, context, &d->children);
  c->wait_fd = fd;
  if (fd >= 0) d->fabric->waitable.push_back(c);
  c->domain = d;
  c->format = format;
  c->cq = std::make_unique<core::CompletionQueue>(size);
  c->cq->set_progress([c] { ProgressCq(c); });
  *out = c;
  return 0;
}

ssize_t sf_cq_read(sf_cq* cq, void* buf, size_t count) {
  return ReadCq(cq, buf, count, nullptr);
}

ssize_t sf_cq_readfrom(sf_cq* cq, void* buf, size_t count,
                       sf_addr_t* src_addr) {
  if (src_addr == nullptr) return Fail(EINVAL, "src_addr must not be NULL");
  return ReadCq(cq, buf, count, src_addr);
}

ssize_t sf_cq_readerr(sf_cq* pub, sf_cq_err_entry* buf, uint64_t flags) {
  Cq* cq = AsCq(pub);
  if (cq == nullptr || buf == nullptr || flags != 0) {
    return Fail(EINVAL, "bad argument");
  }
  core::CqErrEntry e;
  const Status s = cq->cq->ReadError(&e);
  SyncWaitFds(cq->domain->fabric);
  if (!s.ok()) return Fail(s);
  *buf = sf_cq_err_entry{};
  buf->op_context = e.op_context;
  buf->flags = e.flags;
  buf->len = e.len;
  buf->buf = e.buf;
  buf->data = e.data;
  buf->tag = e.tag;
  buf->olen = e.olen;
  buf->err = e.err;
  buf->prov_errno = e.prov_errno;
  return 1;
}

ssize_t sf_cq_sread(sf_cq* pub, void* buf, size_t count, const void* cond,
                    int timeout_ms) {
  Cq* cq = AsCq(pub);
  if (cq == nullptr) return Fail(EINVAL, "not a completion queue");
  if (cond != nullptr) return Fail(EINVAL, "wait conditions are not supported");
  return WaitFor(cq->domain->fabric, timeout_ms,
                 [&] { return ReadCq(pub, buf, count, nullptr); });
}

int sf_endpoint(sf_domain* pub, const sf_ep_attr* attr, sf_ep** out,
                void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr || attr == nullptr) {
    return Fail(EINVAL, "domain, attr and ep must be valid");
  }
  core::EndpointAttr a;
  switch (attr->type) {
    case SF_EP_RDM:
      a.type = core::EndpointType::kRdm;
      break;
    case SF_EP_MSG:
      a.type = core::EndpointType::kMsg;
      break;
    case SF_EP_DGRAM:
      a.type = core::EndpointType::kDgram;
      break;
    default:
      return Fail(EINVAL, "unknown endpoint type");
  }
  if (attr->caps & ~(SF_MSG | SF_TAGGED | SF_DIRECTED_RECV | SF_SEND | SF_RECV |
                     SF_VARIABLE_MSG)) {
    return Fail(EINVAL, "unsupported capability bits");
  }
  if (attr->mode & ~SF_BUFFERED_RECV) {
    return Fail(EINVAL, "unsupported mode bits (SF_BUFFERED_RECV only)");
  }
  if ((attr->mode & SF_BUFFERED_RECV || attr->caps & SF_VARIABLE_MSG) &&
      attr->type == SF_EP_DGRAM) {
    return Fail(EINVAL, "DGRAM endpoints have no buffered receives");
  }
  if (attr->op_flags & ~(core::kCompletionLevels | SF_COMPLETION)) {
    return Fail(EINVAL, "op_flags may only choose a completion level");
  }
  a.caps = attr->caps & (SF_DIRECTED_RECV | SF_VARIABLE_MSG);
  a.buffered =
      (attr->mode & SF_BUFFERED_RECV) || (attr->caps & SF_VARIABLE_MSG);
  a.op_flags = attr->op_flags;
  if (attr->tx_size) a.tx_size = static_cast<uint32_t>(attr->tx_size);
  if (attr->rx_size) a.rx_size = static_cast<uint32_t>(attr->rx_size);
  if (attr->tx_size > (1u << 20) || attr->rx_size > (1u << 20)) {
    return Fail(EINVAL, "tx_size and rx_size must be at most 2^20");
  }
  if (attr->info != nullptr &&
      (attr->type != SF_EP_MSG || !ValidInfo(attr->info))) {
    return Fail(EINVAL,
                "info must be an SF_CONNREQ's, for an SF_EP_MSG endpoint");
  }
  auto ep = core::Endpoint::Create(d->device, d->pd, a);
  if (!ep.ok()) return Fail(ep.status());
  auto* e = NewObject<Ep>(SF_CLASS_EP, context, &d->children);
  if (attr->info != nullptr) e->request = attr->info->request;
  e->domain = d;
  e->ep = std::move(*ep);
  e->ep->rx_context()->set_user_handle(static_cast<sf_ep*>(e));
  e->ep->set_user_handle(&e->fid);
  *out = e;
  return 0;
}

int sf_ep_bind(sf_ep* pub, sf_fid* bfid, uint64_t flags) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || bfid == nullptr) return Fail(EINVAL, "bad argument");
  if (ep->ep->enabled()) return Fail(SF_EOPBADSTATE, "endpoint is enabled");
  if (IsClass(bfid, SF_CLASS_CQ)) {
    Cq* cq = ObjectOf<Cq>(bfid);
    if (cq->domain != ep->domain) {
      return Fail(EINVAL, "CQ belongs to another domain");
    }
    const Status s = ep->ep->BindCq(cq->cq.get(), flags);
    if (!s.ok()) return Fail(s);
    Cq* old[2] = {ep->tx_cq, ep->rx_cq};
    if (flags & SF_SEND) ep->tx_cq = cq;
    if (flags & SF_RECV) ep->rx_cq = cq;
    if (std::find(cq->eps.begin(), cq->eps.end(), ep) == cq->eps.end()) {
      cq->eps.push_back(ep);
    }
    // A CQ this binding replaced in both roles no longer drives this endpoint.
    for (Cq* was : old) {
      if (was == nullptr || was == ep->tx_cq || was == ep->rx_cq) continue;
      auto it = std::find(was->eps.begin(), was->eps.end(), ep);
      if (it != was->eps.end()) was->eps.erase(it);
    }
    return 0;
  }
  if (IsClass(bfid, SF_CLASS_AV)) {
    Av* av = ObjectOf<Av>(bfid);
    if (av->domain != ep->domain) {
      return Fail(EINVAL, "AV belongs to another domain");
    }
    if (flags != 0) return Fail(EINVAL, "AV binding takes no flags");
    const Status s = ep->ep->BindAv(av->av.get());
    if (!s.ok()) return Fail(s);
    if (ep->av) --ep->av->users;
    ep->av = av;
    ++av->users;
    return 0;
  }
  if (IsClass(bfid, SF_CLASS_EQ)) {
    Eq* eq = ObjectOf<Eq>(bfid);
    if (eq->fabric != ep->domain->fabric) {
      return Fail(EINVAL, "EQ belongs to another fabric");
    }
    if (flags != 0) return Fail(EINVAL, "EQ binding takes no flags");
    if (ep->eq) return Fail(EINVAL, "an event queue is bound already");
    const Status s = ep->ep->BindEq(eq->eq.get());
    if (!s.ok()) return Fail(s);
    ep->eq = eq;
    ++eq->users;
    return 0;
  }
  if (IsClass(bfid, SF_CLASS_SRX_CTX)) {
    Srx* srx = ObjectOf<Srx>(bfid);
    if (srx->domain != ep->domain) {
      return Fail(EINVAL, "shared context belongs to another domain");
    }
    if (flags != 0)
      return Fail(EINVAL, "shared context binding takes no flags");
    if (ep->srx)
      return Fail(EINVAL, "a shared receive context is bound already");
    const Status s = ep->ep->BindRx(srx->rx.get());
    if (!s.ok()) return Fail(s);
    ep->srx = srx;
    ++srx->users;
    return 0;
  }
  return Fail(EINVAL,
              "only a CQ, an AV, an EQ or a shared receive context can be "
              "bound");
}

int sf_srx_context(sf_domain* pub, const sf_rx_attr* attr, sf_ep** out,
                   void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and rx_ep must be valid");
  }
  core::RxContext::Attr a;
  if (attr != nullptr) {
    if (attr->caps & ~(SF_DIRECTED_RECV | SF_MSG | SF_TAGGED | SF_RECV)) {
      return Fail(EINVAL, "unsupported capability bits");
    }
    if (attr->mode & ~SF_BUFFERED_RECV) return Fail(EINVAL, "unsupported mode");
    if (attr->op_flags != 0) return Fail(EINVAL, "no op_flags are supported");
    if (attr->size > (1u << 20)) return Fail(EINVAL, "size must be <= 2^20");
    a.caps = attr->caps & SF_DIRECTED_RECV;
    a.buffered = attr->mode & SF_BUFFERED_RECV;
    if (attr->size) a.size = static_cast<uint32_t>(attr->size);
  }
  auto rx = core::RxContext::CreateShared(a);
  if (!rx.ok()) return Fail(rx.status());
  auto* x = NewObject<Srx>(SF_CLASS_SRX_CTX, context, &d->children);
  x->domain = d;
  x->rx = std::move(*rx);
  x->rx->set_user_handle(static_cast<sf_ep*>(x));
  d->srxs.push_back(x);
  *out = x;
  return 0;
}

int sf_enable(sf_ep* pub) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr) return Fail(EINVAL, "not an endpoint");
  const Status s = ep->ep->Enable();
  return s.ok() ? 0 : Fail(s);
}

int sf_ep_query(sf_ep* pub, sf_ep_attr* attr) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || attr == nullptr) return Fail(EINVAL, "bad argument");
  const core::EndpointAttr& a = ep->ep->attr();
  switch (a.type) {
    case core::EndpointType::kRdm:
      attr->type = SF_EP_RDM;
      break;
    case core::EndpointType::kMsg:
      attr->type = SF_EP_MSG;
      break;
    case core::EndpointType::kDgram:
      attr->type = SF_EP_DGRAM;
      break;
  }
  attr->caps = SF_MSG | SF_TAGGED | SF_SEND | SF_RECV | a.caps;
  attr->op_flags = a.op_flags;
  attr->tx_size = a.tx_size;
  attr->rx_size = a.rx_size;
  attr->max_msg_size = ep->ep->max_msg_size();
  attr->inject_size = a.inject_size;
  attr->msg_prefix_size = ep->ep->msg_prefix_size();
  return 0;
}

int sf_getname(sf_fid* fid, void* addr, size_t* addrlen) {
  const bool pep = IsClass(fid, SF_CLASS_PEP);
  if ((!IsClass(fid, SF_CLASS_EP) && !pep) || addrlen == nullptr) {
    return Fail(EINVAL, "bad argument");
  }
  core::Endpoint* ep =
      pep ? ObjectOf<Pep>(fid)->ep.get() : ObjectOf<Ep>(fid)->ep.get();
  const size_t room = *addrlen;
  *addrlen = SF_NAME_BYTES;
  if (addr == nullptr || room < SF_NAME_BYTES) {
    return Fail(SF_ETOOSMALL, "name buffer too small (size written back)");
  }
  softfab::wire::EncodeName(ep->name(), static_cast<uint8_t*>(addr));
  return 0;
}

ssize_t sf_cancel(sf_fid* fid, void* context) {
  Status s;
  if (IsClass(fid, SF_CLASS_EP)) {
    s = ObjectOf<Ep>(fid)->ep->Cancel(context);
  } else if (IsClass(fid, SF_CLASS_SRX_CTX)) {
    s = ObjectOf<Srx>(fid)->rx->Cancel(context);
  } else {
    return Fail(EINVAL, "not an endpoint or a shared receive context");
  }
  SyncWaitFds(IsClass(fid, SF_CLASS_EP) ? ObjectOf<Ep>(fid)->domain->fabric
                                        : ObjectOf<Srx>(fid)->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_setopt(sf_fid* fid, int level, int optname, const void* optval,
              size_t optlen) {
  const bool is_ep = IsClass(fid, SF_CLASS_EP);
  if ((!is_ep && !IsClass(fid, SF_CLASS_SRX_CTX)) || optval == nullptr) {
    return Fail(EINVAL, "bad argument");
  }
  if (level != SF_OPT_ENDPOINT) return Fail(ENOSYS, "unknown option level");
  core::Endpoint* ep = is_ep ? ObjectOf<Ep>(fid)->ep.get() : nullptr;
  core::RxContext* rx = is_ep ? ep->rx_context() : ObjectOf<Srx>(fid)->rx.get();
  if (optname != SF_OPT_MIN_MULTI_RECV && optname != SF_OPT_BUFFERED_MIN &&
      optname != SF_OPT_BUFFERED_LIMIT) {
    return Fail(optname == SF_OPT_CM_DATA_SIZE ? EINVAL : ENOSYS,
                optname == SF_OPT_CM_DATA_SIZE
                    ? "SF_OPT_CM_DATA_SIZE is read-only"
                    : "unknown option");
  }
  if (optlen != sizeof(size_t)) return Fail(EINVAL, "option is a size_t");
  size_t v;
  std::memcpy(&v, optval, sizeof v);
  Status s;
  if (optname == SF_OPT_MIN_MULTI_RECV) {
    s = rx->SetMinMultiRecv(v);
  } else if (optname == SF_OPT_BUFFERED_LIMIT) {
    s = ep ? ep->SetBufferedLimit(v) : rx->SetBufferedLimit(v);
  } else if (ep == nullptr) {
    return Fail(EINVAL, "SF_OPT_BUFFERED_MIN is a sender's (endpoint) option");
  } else {
    s = ep->SetBufferedMin(v);
  }
  return s.ok() ? 0 : Fail(s);
}

int sf_getopt(sf_fid* fid, int level, int optname, void* optval,
              size_t* optlen) {
  const bool is_ep = IsClass(fid, SF_CLASS_EP);
  if ((!is_ep && !IsClass(fid, SF_CLASS_SRX_CTX)) || optval == nullptr ||
      optlen == nullptr) {
    return Fail(EINVAL, "bad argument");
  }
  if (level != SF_OPT_ENDPOINT) return Fail(ENOSYS, "unknown option level");
  core::Endpoint* ep = is_ep ? ObjectOf<Ep>(fid)->ep.get() : nullptr;
  core::RxContext* rx = is_ep ? ep->rx_context() : ObjectOf<Srx>(fid)->rx.get();
  size_t v;
  switch (optname) {
    case SF_OPT_MIN_MULTI_RECV:
      v = rx->min_multi_recv();
      break;
    case SF_OPT_BUFFERED_LIMIT:
      v = rx->attr().buffered_limit;
      break;
    case SF_OPT_BUFFERED_MIN:
      if (ep == nullptr) return Fail(EINVAL, "an endpoint option");
      v = ep->buffered_min();
      break;
    case SF_OPT_CM_DATA_SIZE:
      v = softfab::wire::kCmDataMax;
      break;
    default:
      return Fail(ENOSYS, "unknown option");
  }
  if (*optlen < sizeof(size_t)) {
    *optlen = sizeof(size_t);
    return Fail(SF_ETOOSMALL, "option is a size_t");
  }
  std::memcpy(optval, &v, sizeof v);
  *optlen = sizeof v;
  return 0;
}

int sf_close(sf_fid* fid) {
  if (fid == nullptr || fid->magic != kMagic) {
    return Fail(EINVAL, "not a softfab object");
  }
  switch (fid->fclass) {
    case SF_CLASS_EP: {
      Ep* ep = ObjectOf<Ep>(fid);
      for (Cq* cq : {ep->tx_cq, ep->rx_cq}) {
        if (cq == nullptr) continue;
        auto it = std::find(cq->eps.begin(), cq->eps.end(), ep);
        if (it != cq->eps.end()) cq->eps.erase(it);
      }
      if (ep->av) --ep->av->users;
      if (ep->srx) --ep->srx->users;
      if (ep->eq) --ep->eq->users;
      Fabric* fabric = ep->domain->fabric;
      const int rc = Release(ep, &ep->domain->children);
      SyncWaitFds(fabric);  // Closing may have completed receives (EIO).
      return rc;
    }
    case SF_CLASS_EQ: {
      Eq* eq = ObjectOf<Eq>(fid);
      if (eq->users) return Fail(EBUSY, "endpoints are bound to it");
      return Release(eq, &eq->fabric->children);
    }
    case SF_CLASS_PEP: {
      Pep* pep = ObjectOf<Pep>(fid);
      if (pep->eq) --pep->eq->users;
      return Release(pep, &pep->domain->children);
    }
    case SF_CLASS_SRX_CTX: {
      Srx* srx = ObjectOf<Srx>(fid);
      if (srx->users) return Fail(EBUSY, "endpoints are bound to it");
      auto& all = srx->domain->srxs;
      all.erase(std::find(all.begin(), all.end(), srx));
      return Release(srx, &srx->domain->children);
    }
    case SF_CLASS_CQ: {
      Cq* cq = ObjectOf<Cq>(fid);
      if (!cq->eps.empty()) return Fail(EBUSY, "endpoints are bound to it");
      for (Srx* srx : cq->domain->srxs) {
        if (srx->rx->bound_cq() == cq->cq.get()) {
          return Fail(EBUSY, "a shared receive context reports to it");
        }
      }
      auto& w = cq->domain->fabric->waitable;
      w.erase(std::remove(w.begin(), w.end(), cq), w.end());
      return Release(cq, &cq->domain->children);
    }
    case SF_CLASS_AV: {
      Av* av = ObjectOf<Av>(fid);
      if (av->users) return Fail(EBUSY, "endpoints are bound to it");
      return Release(av, &av->domain->children);
    }
    case SF_CLASS_MR: {
      Mr* mr = ObjectOf<Mr>(fid);
      if (Status s = mr->mr->Destroy(); !s.ok()) return Fail(s);
      mr->domain->mrs.erase(static_cast<sf_mr*>(mr));
      return Release(mr, &mr->domain->children);
    }
    case SF_CLASS_DOMAIN: {
      Domain* d = ObjectOf<Domain>(fid);
      if (d->children) return Fail(EBUSY, "objects of this domain are open");
      if (Status s = d->pd->Destroy(); !s.ok()) return Fail(s);
      return Release(d, &d->fabric->children);
    }
    case SF_CLASS_FABRIC: {
      Fabric* f = ObjectOf<Fabric>(fid);
      if (f->children) return Fail(EBUSY, "domains of this fabric are open");
      f->fid.magic = 0;
      delete f;
      return 0;
    }
    default:
      return Fail(EINVAL, "not a softfab object");
  }
}

// ---- Wait objects ----

int sf_control(sf_fid* fid, int command, void* arg) {
  if (!IsClass(fid, SF_CLASS_CQ)) {
    return Fail(EINVAL, "wait objects belong to completion queues");
  }
  if (command != SF_GETWAIT) return Fail(ENOSYS, "unknown command");
  if (arg == nullptr) return Fail(EINVAL, "arg must point to an int");
  Cq* cq = ObjectOf<Cq>(fid);
  if (cq->wait_fd < 0) {
    return Fail(EINVAL, "the CQ was opened without a wait object");
  }
  SyncWaitFds(cq->domain->fabric);
  *static_cast<int*>(arg) = cq->wait_fd;
  return 0;
}

int sf_trywait(sf_fabric* pub, sf_fid** fids, int count) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || fids == nullptr || count <= 0) {
    return Fail(EINVAL, "fabric, fids and count must be valid");
  }
  for (int i = 0; i < count; ++i) {
    if (!IsClass(fids[i], SF_CLASS_CQ)) return Fail(EINVAL, "not a CQ");
    Cq* cq = ObjectOf<Cq>(fids[i]);
    if (cq->domain->fabric != f) return Fail(EINVAL, "CQ of another fabric");
    if (cq->wait_fd < 0) return Fail(EINVAL, "CQ without a wait object");
  }
  for (int i = 0; i < count; ++i) {
    Cq* cq = ObjectOf<Cq>(fids[i]);
    cq->cq->Progress();
    if (cq->cq->pending() > 0 || cq->cq->has_error()) {
      SyncWaitFds(f);
      return Fail(EAGAIN, "completions are waiting: read the CQ");
    }
  }
  SyncWaitFds(f);
  if (f->sim->pending_events() > 0) {
    return Fail(EAGAIN, "the simulated fabric has work: read the CQs");
  }
  return 0;
}

// ---- Connections and event queues ----

int sf_eq_open(sf_fabric* pub, const sf_eq_attr* attr, sf_eq** out,
               void* context) {
  Fabric* f = AsFabric(pub);
  if (f == nullptr || out == nullptr) {
    return Fail(EINVAL, "fabric and eq must be valid");
  }
  const size_t size = attr && attr->size ? attr->size : 64;
  if (size > (1u << 20)) return Fail(EINVAL, "EQ size too large");
  if (attr && attr->flags) return Fail(EINVAL, "no EQ flags are supported");
  auto* eq = NewObject<Eq>(SF_CLASS_EQ, context, &f->children);
  eq->fabric = f;
  eq->eq = std::make_unique<core::EventQueue>(size);
  *out = eq;
  return 0;
}

ssize_t sf_eq_read(sf_eq* pub, uint32_t* event, void* buf, size_t len,
                   uint64_t flags) {
  Eq* eq = AsEq(pub);
  if (int rc = CheckEqRead(eq, event, buf, len, flags); rc != 0) return rc;
  return ReadEq(eq, event, buf, len, flags);
}

ssize_t sf_eq_sread(sf_eq* pub, uint32_t* event, void* buf, size_t len,
                    int timeout_ms, uint64_t flags) {
  Eq* eq = AsEq(pub);
  if (int rc = CheckEqRead(eq, event, buf, len, flags); rc != 0) return rc;
  return WaitFor(eq->fabric, timeout_ms,
                 [&] { return ReadEq(eq, event, buf, len, flags); });
}

ssize_t sf_eq_readerr(sf_eq* pub, sf_eq_err_entry* buf, uint64_t flags) {
  Eq* eq = AsEq(pub);
  if (eq == nullptr || buf == nullptr || flags != 0) {
    return Fail(EINVAL, "bad argument");
  }
  auto ev = eq->eq->ReadError();
  SyncWaitFds(eq->fabric);
  if (!ev.ok()) return Fail(ev.status());
  eq->err_data = std::move(ev->data);
  *buf = sf_eq_err_entry{};
  buf->fid = static_cast<sf_fid*>(ev->fid);
  buf->context = buf->fid ? buf->fid->context : nullptr;
  buf->err = ev->err;
  buf->err_data = eq->err_data.empty() ? nullptr : eq->err_data.data();
  buf->err_data_size = eq->err_data.size();
  return sizeof *buf;
}

int sf_passive_ep(sf_domain* pub, sf_pep** out, void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and pep must be valid");
  }
  auto ep = core::Endpoint::CreateListener(d->device, d->pd);
  if (!ep.ok()) return Fail(ep.status());
  auto* pep = NewObject<Pep>(SF_CLASS_PEP, context, &d->children);
  pep->domain = d;
  pep->ep = std::move(*ep);
  pep->ep->set_user_handle(&pep->fid);
  *out = pep;
  return 0;
}

int sf_pep_bind(sf_pep* pub, sf_fid* bfid, uint64_t flags) {
  Pep* pep = AsPep(pub);
  if (pep == nullptr) return Fail(EINVAL, "not a passive endpoint");
  if (!IsClass(bfid, SF_CLASS_EQ)) return Fail(EINVAL, "bind an event queue");
  if (flags != 0) return Fail(EINVAL, "EQ binding takes no flags");
  Eq* eq = ObjectOf<Eq>(bfid);
  if (eq->fabric != pep->domain->fabric) {
    return Fail(EINVAL, "EQ belongs to another fabric");
  }
  if (pep->eq) return Fail(EINVAL, "an event queue is bound already");
  const Status s = pep->ep->BindEq(eq->eq.get());
  if (!s.ok()) return Fail(s);
  pep->eq = eq;
  ++eq->users;
  return 0;
}

int sf_listen(sf_pep* pub) {
  Pep* pep = AsPep(pub);
  if (pep == nullptr) return Fail(EINVAL, "not a passive endpoint");
  const Status s = pep->ep->Listen();
  return s.ok() ? 0 : Fail(s);
}

int sf_connect(sf_ep* pub, const void* addr, const void* param,
               size_t paramlen) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || addr == nullptr) {
    return Fail(EINVAL, "ep and addr must be valid");
  }
  softfab::wire::Name name;
  softfab::wire::DecodeName(static_cast<const uint8_t*>(addr), &name);
  const Status s = ep->ep->Connect(name, param, paramlen);
  SyncWaitFds(ep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_accept(sf_ep* pub, const void* param, size_t paramlen) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr) return Fail(EINVAL, "not an endpoint");
  if (ep->request == nullptr) {
    return Fail(EINVAL, "create the endpoint with the SF_CONNREQ's info");
  }
  const Status s = ep->ep->Accept(*ep->request, param, paramlen);
  SyncWaitFds(ep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_reject(sf_pep* pub, sf_info* info, const void* param, size_t paramlen) {
  Pep* pep = AsPep(pub);
  if (pep == nullptr || !ValidInfo(info)) {
    return Fail(EINVAL, "pep and info must be valid");
  }
  const Status s = pep->ep->Reject(*info->request, param, paramlen);
  SyncWaitFds(pep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

int sf_shutdown(sf_ep* pub, uint64_t flags) {
  Ep* ep = AsEp(pub);
  if (ep == nullptr || flags != 0) return Fail(EINVAL, "bad argument");
  const Status s = ep->ep->Shutdown();
  SyncWaitFds(ep->domain->fabric);
  return s.ok() ? 0 : Fail(s);
}

void sf_freeinfo(sf_info* info) {
  if (!ValidInfo(info)) return;
  info->magic = 0;
  delete info;
}

// ---- fi_msg ----

ssize_t sf_recv(sf_ep* ep, void* buf, size_t len, void* desc, sf_addr_t src,
                void* context) {
  iovec iov{buf, len};
  return DoRecv(ep, &iov, desc ? &desc : nullptr, 1, src, 0, 0, context, 0,
                false);
}
ssize_t sf_recvv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                 sf_addr_t src, void* context) {
  return DoRecv(ep, iov, desc, count, src, 0, 0, context, 0, false);
}
ssize_t sf_recvmsg(sf_ep* ep, const sf_msg* msg, uint64_t flags) {
  if (msg == nullptr) return Fail(EINVAL, "msg must not be NULL");
  return DoRecv(ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0, 0,
                msg->context, flags, false);
}
ssize_t sf_send(sf_ep* ep, const void* buf, size_t len, void* desc,
                sf_addr_t dest, void* context) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, desc ? &desc : nullptr, 1, dest, 0, 0, context, 0,
                false);
}
ssize_t sf_sendv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                 sf_addr_t dest, void* context) {
  return DoSend(ep, iov, desc, count, dest, 0, 0, context, 0, false);
}
ssize_t sf_sendmsg(sf_ep* ep, const sf_msg* msg, uint64_t flags) {
  if (msg == nullptr) return Fail(EINVAL, "msg must not be NULL");
  return DoSend(ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr, 0,
                msg->data, msg->context, flags, false);
}
ssize_t sf_inject(sf_ep* ep, const void* buf, size_t len, sf_addr_t dest) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, nullptr, 1, dest, 0, 0, nullptr, SF_INJECT, false);
}
ssize_t sf_senddata(sf_ep* ep, const void* buf, size_t len, void* desc,
                    uint64_t data, sf_addr_t dest, void* context) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, desc ? &desc : nullptr, 1, dest, 0, data, context,
                SF_REMOTE_CQ_DATA, false);
}
ssize_t sf_injectdata(sf_ep* ep, const void* buf, size_t len, uint64_t data,
                      sf_addr_t dest) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, nullptr, 1, dest, 0, data, nullptr,
                SF_INJECT | SF_REMOTE_CQ_DATA, false);
}

// ---- fi_tagged ----

ssize_t sf_trecv(sf_ep* ep, void* buf, size_t len, void* desc, sf_addr_t src,
                 uint64_t tag, uint64_t ignore, void* context) {
  iovec iov{buf, len};
  return DoRecv(ep, &iov, desc ? &desc : nullptr, 1, src, tag, ignore, context,
                0, true);
}
ssize_t sf_trecvv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                  sf_addr_t src, uint64_t tag, uint64_t ignore, void* context) {
  return DoRecv(ep, iov, desc, count, src, tag, ignore, context, 0, true);
}
ssize_t sf_trecvmsg(sf_ep* ep, const sf_msg_tagged* msg, uint64_t flags) {
  if (msg == nullptr) return Fail(EINVAL, "msg must not be NULL");
  return DoRecv(ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
                msg->tag, msg->ignore, msg->context, flags, true);
}
ssize_t sf_tsend(sf_ep* ep, const void* buf, size_t len, void* desc,
                 sf_addr_t dest, uint64_t tag, void* context) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, desc ? &desc : nullptr, 1, dest, tag, 0, context, 0,
                true);
}
ssize_t sf_tsendv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                  sf_addr_t dest, uint64_t tag, void* context) {
  return DoSend(ep, iov, desc, count, dest, tag, 0, context, 0, true);
}
ssize_t sf_tsendmsg(sf_ep* ep, const sf_msg_tagged* msg, uint64_t flags) {
  if (msg == nullptr) return Fail(EINVAL, "msg must not be NULL");
  return DoSend(ep, msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
                msg->tag, msg->data, msg->context, flags, true);
}
ssize_t sf_tinject(sf_ep* ep, const void* buf, size_t len, sf_addr_t dest,
                   uint64_t tag) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, nullptr, 1, dest, tag, 0, nullptr, SF_INJECT, true);
}
ssize_t sf_tsenddata(sf_ep* ep, const void* buf, size_t len, void* desc,
                     uint64_t data, sf_addr_t dest, uint64_t tag,
                     void* context) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, desc ? &desc : nullptr, 1, dest, tag, data, context,
                SF_REMOTE_CQ_DATA, true);
}
ssize_t sf_tinjectdata(sf_ep* ep, const void* buf, size_t len, uint64_t data,
                       sf_addr_t dest, uint64_t tag) {
  iovec iov{const_cast<void*>(buf), len};
  return DoSend(ep, &iov, nullptr, 1, dest, tag, data, nullptr,
                SF_INJECT | SF_REMOTE_CQ_DATA, true);
}

}  // extern "C"
