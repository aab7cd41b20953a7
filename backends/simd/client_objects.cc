// The transport objects of a process on the shared simulated fabric: each a
// proxy of the daemon's object on this process's node (by handle), every
// call one request (internal/connection.h). The backend: one device, this
// process's node; waiting parks the process in the daemon.
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/simd/client.h"
#include "backends/simd/internal/connection.h"

namespace softfab::simd {
namespace internal {
namespace {

namespace tp = ::softfab::transport;

class SimdClock final : public tp::Clock {
 public:
  explicit SimdClock(const Connection* c) : c_(c) {}
  uint64_t NowNs() const override { return c_->NowNs(); }

 private:
  const Connection* c_;
};

class RemoteDevice;

// Asks the daemon to destroy object `handle` with `op`; the proxy deletes
// itself only when that succeeded (a refusal, EBUSY say, changes nothing).
Status DestroyRemote(Connection* c, Op op, uint32_t handle) {
  Request req;
  req.handle = handle;
  Reply r;
  return c->Call(op, req, nullptr, &r);
}

template <typename Wr>
const Wr* Nth(const Wr* wr, uint32_t n) {
  while (n-- > 0 && wr != nullptr) wr = wr->next;
  return wr;
}

// Work requests as they travel (protocol.h): each WireWr, its SGEs, and an
// inline one's bytes gathered from the process's memory. At most kWrsMax of
// the list from `wr` on, and no more than one request's tail holds (64 work
// requests each with 4 KiB inline would not fit); *next is where the rest
// begins.
class TailWriter {
 public:
  template <typename T>
  void Append(const T& v) {
    AppendBytes(&v, sizeof v);
  }
  void AppendBytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  std::vector<uint8_t> bytes;
};

template <typename Wr>
std::vector<uint8_t> EncodeWrs(const Wr* wr, uint32_t* count, const Wr** next,
                               uint32_t (*ah_handle)(const tp::SendWr&)) {
  constexpr size_t kTailMax =
      kMessageBytesMax - sizeof(Header) - sizeof(Request);
  constexpr size_t kWrBytesMax =
      sizeof(WireWr) + kSgesMax * sizeof(tp::Sge) + kInlineBytesMax;
  TailWriter tail;
  uint32_t n = 0;
  for (; wr != nullptr && n < kWrsMax &&
         tail.bytes.size() + kWrBytesMax <= kTailMax;
       wr = wr->next, ++n) {
    WireWr w;
    w.wr_id = wr->wr_id;
    const uint32_t sges =
        static_cast<uint32_t>(std::clamp<int32_t>(wr->num_sge, 0, kSgesMax));
    w.num_sge = wr->sg_list != nullptr ? sges : 0;
    if constexpr (std::is_same_v<Wr, tp::SendWr>) {
      w.opcode = static_cast<uint32_t>(wr->opcode);
      w.send_flags = wr->send_flags;
      w.imm_data = wr->imm_data;
      w.remote_addr = wr->rdma.remote_addr;
      w.rkey = wr->rdma.rkey;
      w.ah = ah_handle(*wr);
      w.remote_qpn = wr->ud.remote_qpn;
      w.remote_qkey = wr->ud.remote_qkey;
      if ((wr->send_flags & tp::kSendInline) && wr->sg_list != nullptr) {
        uint64_t total = 0;
        for (uint32_t i = 0; i < w.num_sge; ++i) total += wr->sg_list[i].length;
        w.inline_bytes =
            static_cast<uint32_t>(std::min<uint64_t>(total, kInlineBytesMax));
      }
    }
    tail.Append(w);
    for (uint32_t i = 0; i < w.num_sge; ++i) tail.Append(wr->sg_list[i]);
    uint32_t left = w.inline_bytes;
    for (uint32_t i = 0; i < w.num_sge && left > 0; ++i) {
      const uint32_t take = std::min(left, wr->sg_list[i].length);
      tail.AppendBytes(reinterpret_cast<const void*>(wr->sg_list[i].addr),
                       take);
      left -= take;
    }
  }
  *count = n;
  *next = wr;
  return std::move(tail.bytes);
}

// Posts a list of any length in requests of at most kWrsMax; on a refusal
// *bad_wr is the refused work request (those before it stay posted).
template <typename Wr>
Status PostInChunks(Connection* c, Op op, uint32_t handle, const Wr* wr,
                    const Wr** bad_wr,
                    uint32_t (*ah_handle)(const tp::SendWr&)) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  while (wr != nullptr) {
    Request req;
    req.handle = handle;
    const Wr* next = nullptr;
    const std::vector<uint8_t> tail =
        EncodeWrs(wr, &req.count, &next, ah_handle);
    Reply r;
    const Status s = c->Call(op, req, &tail, &r);
    if (!s.ok()) {
      if (bad_wr != nullptr) *bad_wr = Nth(wr, r.bad_index);
      return s;
    }
    wr = next;
  }
  return Status::Ok();
}

class RemoteMr final : public tp::MemoryRegion {
 public:
  RemoteMr(Connection* c, uint32_t handle, const ShadowMr& m, uint32_t rkey,
           uint32_t access)
      : c_(c), handle_(handle), m_(m), rkey_(rkey), access_(access) {}
  uint64_t addr() const override { return m_.user_addr; }
  uint64_t length() const override { return m_.length; }
  uint32_t lkey() const override { return m_.lkey; }
  uint32_t rkey() const override { return rkey_; }
  uint32_t access() const override { return access_; }
  Status Destroy() override {
    if (Status s = DestroyRemote(c_, Op::kDeregMr, handle_); !s.ok()) return s;
    c_->RemoveMr(m_.lkey);
    c_->FreeShadow(m_.shadow, m_.length);
    delete this;
    return Status::Ok();
  }

 private:
  Connection* c_;
  uint32_t handle_;
  ShadowMr m_;
  uint32_t rkey_, access_;
};

class RemoteAh final : public tp::AddressHandle {
 public:
  RemoteAh(Connection* c, uint32_t handle) : c_(c), handle_(handle) {}
  uint32_t handle() const { return handle_; }
  Status Destroy() override {
    if (Status s = DestroyRemote(c_, Op::kDestroyAh, handle_); !s.ok())
      return s;
    delete this;
    return Status::Ok();
  }

 private:
  Connection* c_;
  uint32_t handle_;
};

uint32_t AhHandle(const tp::SendWr& wr) {
  return wr.ud.ah ? static_cast<const RemoteAh*>(wr.ud.ah)->handle() : 0;
}

class RemoteCq final : public tp::CompletionQueue {
 public:
  RemoteCq(Connection* c, uint32_t handle, int32_t cqe, uint32_t cq_handle,
           const uint8_t* may_hold)
      : c_(c),
        handle_(handle),
        cqe_(cqe),
        cq_handle_(cq_handle),
        may_hold_(may_hold) {}
  uint32_t remote() const { return handle_; }
  int Poll(int num_entries, tp::WorkCompletion* wc) override {
    if (num_entries < 0 || (num_entries > 0 && wc == nullptr)) return -EINVAL;
    if (num_entries == 0) return 0;
    // The daemon says the CQ is empty: no request (nothing can enter it
    // before this process parks, or the daemon sets the byte first).
    if (may_hold_ != nullptr &&
        __atomic_load_n(may_hold_, __ATOMIC_ACQUIRE) == 0) {
      return 0;
    }
    Request req;
    req.handle = handle_;
    req.count = static_cast<uint32_t>(std::min<int>(num_entries, kWcsMax));
    Reply r;
    std::vector<uint8_t> tail;
    if (Status s = c_->Call(Op::kPollCq, req, nullptr, &r, &tail); !s.ok()) {
      return -s.code();
    }
    const uint32_t n = std::min<uint32_t>(
        r.count, static_cast<uint32_t>(tail.size() / sizeof *wc));
    if (n > 0) std::memcpy(wc, tail.data(), n * sizeof *wc);
    return static_cast<int>(n);
  }
  int32_t cqe() const override { return cqe_; }
  uint32_t handle() const override { return cq_handle_; }
  Status Destroy() override {
    if (Status s = DestroyRemote(c_, Op::kDestroyCq, handle_); !s.ok())
      return s;
    delete this;
    return Status::Ok();
  }
  Status RequestNotify(bool solicited_only) override {
    Request req;
    req.handle = handle_;
    req.flags = solicited_only ? 1 : 0;
    Reply r;
    return c_->Call(Op::kRequestNotify, req, nullptr, &r);
  }
  void AckEvents(uint32_t n) override {
    Request req;
    req.handle = handle_;
    req.a = n;
    Reply r;
    (void)c_->Call(Op::kAckEvents, req, nullptr, &r);
  }

 private:
  Connection* c_;
  uint32_t handle_;
  int32_t cqe_;
  uint32_t cq_handle_;
  const uint8_t* may_hold_;  // the CQ's header-page byte (protocol.h)
};

class RemoteChannel final : public tp::CompletionChannel {
 public:
  RemoteChannel(Connection* c, RemoteDevice* dev, uint32_t handle)
      : c_(c),
        dev_(dev),
        handle_(handle),
        fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~RemoteChannel() override {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const override { return fd_; }
  Status GetEvent(tp::CompletionQueue** cq) override;
  Status Destroy() override;
  // A wake said events wait for this channel.
  void Signal() {
    const uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
  }
  uint32_t remote() const { return handle_; }

 private:
  void Quiet() {
    uint64_t v;
    (void)!read(fd_, &v, sizeof v);
  }
  Connection* c_;
  RemoteDevice* dev_;
  uint32_t handle_;
  int fd_;
};

class RemoteSrq final : public tp::SharedReceiveQueue {
 public:
  RemoteSrq(Connection* c, uint32_t handle, uint32_t srq_handle)
      : c_(c), handle_(handle), srq_handle_(srq_handle) {}
  uint32_t remote() const { return handle_; }
  Status PostRecv(const tp::RecvWr* wr, const tp::RecvWr** bad_wr) override {
    return PostInChunks(c_, Op::kPostSrqRecv, handle_, wr, bad_wr, nullptr);
  }
  Status Modify(const tp::SrqAttr& attr, uint32_t mask) override {
    Request req;
    req.handle = handle_;
    req.srq_attr = attr;
    req.mask = mask;
    Reply r;
    return c_->Call(Op::kModifySrq, req, nullptr, &r);
  }
  Status Query(tp::SrqAttr* attr) const override {
    if (attr == nullptr) return InvalidArgument("attr is null");
    Request req;
    req.handle = handle_;
    Reply r;
    const Status s = c_->Call(Op::kQuerySrq, req, nullptr, &r);
    if (s.ok()) *attr = r.srq_attr;
    return s;
  }
  uint32_t handle() const override { return srq_handle_; }
  Status Destroy() override {
    if (Status s = DestroyRemote(c_, Op::kDestroySrq, handle_); !s.ok())
      return s;
    delete this;
    return Status::Ok();
  }

 private:
  Connection* c_;
  uint32_t handle_, srq_handle_;
};

class RemoteQp final : public tp::QueuePair {
 public:
  RemoteQp(Connection* c, uint32_t handle, uint32_t qpn, tp::QpType type)
      : c_(c), handle_(handle), qpn_(qpn), type_(type) {}
  uint32_t qp_num() const override { return qpn_; }
  tp::QpType qp_type() const override { return type_; }
  tp::QpState state() const override {
    tp::QpAttr a;
    return Query(&a, nullptr).ok() ? a.qp_state : state_;
  }
  Status Modify(const tp::QpAttr& attr, uint32_t mask) override {
    Request req;
    req.handle = handle_;
    req.qp_attr = attr;
    req.mask = mask;
    Reply r;
    const Status s = c_->Call(Op::kModifyQp, req, nullptr, &r);
    state_ = static_cast<tp::QpState>(r.a);
    return s;
  }
  Status Query(tp::QpAttr* attr, tp::QpInitAttr* init) const override {
    if (attr == nullptr) return InvalidArgument("attr is null");
    Request req;
    req.handle = handle_;
    Reply r;
    const Status s = c_->Call(Op::kQueryQp, req, nullptr, &r);
    if (!s.ok()) return s;
    *attr = r.qp_attr;
    if (init != nullptr) {
      *init = init_;
      init->cap = r.qp_cap;
    }
    return s;
  }
  Status PostSend(const tp::SendWr* wr, const tp::SendWr** bad_wr) override {
    // Sources go to the shadow now; the fabric reads them from there.
    for (const tp::SendWr* w = wr; w != nullptr; w = w->next) {
      const bool reads_local = w->opcode != tp::WrOpcode::kRdmaRead &&
                               !(w->send_flags & tp::kSendInline);
      if (reads_local && w->sg_list != nullptr && w->num_sge > 0) {
        c_->CopySgesToShadow(w->sg_list,
                             std::min<int32_t>(w->num_sge, kSgesMax));
      }
    }
    return PostInChunks(c_, Op::kPostSend, handle_, wr, bad_wr, &AhHandle);
  }
  Status PostRecv(const tp::RecvWr* wr, const tp::RecvWr** bad_wr) override {
    return PostInChunks(c_, Op::kPostRecv, handle_, wr, bad_wr, nullptr);
  }
  Status Destroy() override {
    if (Status s = DestroyRemote(c_, Op::kDestroyQp, handle_); !s.ok())
      return s;
    delete this;
    return Status::Ok();
  }
  tp::QpInitAttr init_;

 private:
  Connection* c_;
  uint32_t handle_, qpn_;
  tp::QpType type_;
  tp::QpState state_ = tp::QpState::kReset;
};

class RemotePd final : public tp::ProtectionDomain {
 public:
  RemotePd(Connection* c, uint32_t handle) : c_(c), handle_(handle) {}
  StatusOr<tp::MemoryRegion*> RegMr(void* addr, uint64_t length,
                                    uint32_t access) override {
    if (addr == nullptr || length == 0) {
      return InvalidArgument("RegMr needs an address and a length");
    }
    auto at = c_->AllocShadow(length);
    if (!at.ok()) return at.status();
    Request req;
    req.handle = handle_;
    req.a = reinterpret_cast<uint64_t>(addr);
    req.b = length;
    req.c = *at;
    req.flags = access;
    Reply r;
    if (Status s = c_->Call(Op::kRegMr, req, nullptr, &r); !s.ok()) {
      c_->FreeShadow(*at, length);
      return s;
    }
    ShadowMr m{req.a, length, *at, static_cast<uint32_t>(r.a)};
    c_->AddMr(m);
    return static_cast<tp::MemoryRegion*>(
        new RemoteMr(c_, r.handle, m, static_cast<uint32_t>(r.b), access));
  }
  StatusOr<tp::SharedReceiveQueue*> CreateSrq(
      const tp::SrqAttr& attr) override {
    Request req;
    req.handle = handle_;
    req.srq_attr = attr;
    Reply r;
    if (Status s = c_->Call(Op::kCreateSrq, req, nullptr, &r); !s.ok()) {
      return s;
    }
    return static_cast<tp::SharedReceiveQueue*>(
        new RemoteSrq(c_, r.handle, static_cast<uint32_t>(r.b)));
  }
  StatusOr<tp::QueuePair*> CreateQp(const tp::QpInitAttr& attr) override {
    auto* send_cq = static_cast<RemoteCq*>(attr.send_cq);
    auto* recv_cq = static_cast<RemoteCq*>(attr.recv_cq);
    if (send_cq == nullptr || recv_cq == nullptr) {
      return InvalidArgument("a QP needs its CQs");
    }
    Request req;
    req.handle = handle_;
    req.handle2 = send_cq->remote();
    req.handle3 = recv_cq->remote();
    req.a = attr.srq ? static_cast<RemoteSrq*>(attr.srq)->remote() : 0;
    req.qp_cap = attr.cap;
    req.qp_type = static_cast<uint32_t>(attr.qp_type);
    req.sq_sig_all = attr.sq_sig_all;
    Reply r;
    if (Status s = c_->Call(Op::kCreateQp, req, nullptr, &r); !s.ok()) {
      return s;
    }
    auto* qp =
        new RemoteQp(c_, r.handle, static_cast<uint32_t>(r.a), attr.qp_type);
    qp->init_ = attr;
    qp->init_.cap = r.qp_cap;
    return static_cast<tp::QueuePair*>(qp);
  }
  StatusOr<tp::AddressHandle*> CreateAh(const tp::AhAttr& attr) override {
    Request req;
    req.handle = handle_;
    req.ah_attr = attr;
    Reply r;
    if (Status s = c_->Call(Op::kCreateAh, req, nullptr, &r); !s.ok()) {
      return s;
    }
    return static_cast<tp::AddressHandle*>(new RemoteAh(c_, r.handle));
  }
  Status Destroy() override {
    if (Status s = DestroyRemote(c_, Op::kDeallocPd, handle_); !s.ok())
      return s;
    delete this;
    return Status::Ok();
  }

 private:
  Connection* c_;
  uint32_t handle_;
};

class RemoteDevice final : public tp::Device {
 public:
  RemoteDevice(Connection* c, int node)
      : c_(c), clock_(c), name_("simd" + std::to_string(node)) {}
  const char* name() const override { return name_.c_str(); }
  Status QueryDevice(tp::DeviceAttr* attr) const override {
    if (attr == nullptr) return InvalidArgument("attr is null");
    Request req;
    Reply r;
    const Status s = c_->Call(Op::kQueryDevice, req, nullptr, &r);
    if (s.ok()) *attr = r.device_attr;
    return s;
  }
  Status QueryPort(uint8_t port, tp::PortAttr* attr) const override {
    if (attr == nullptr) return InvalidArgument("attr is null");
    Request req;
    req.a = port;
    Reply r;
    const Status s = c_->Call(Op::kQueryPort, req, nullptr, &r);
    if (s.ok()) *attr = r.port_attr;
    return s;
  }
  Status QueryGid(uint8_t port, int index, tp::Gid* gid) const override {
    if (gid == nullptr) return InvalidArgument("gid is null");
    Request req;
    req.a = port;
    req.b = static_cast<uint64_t>(index);
    Reply r;
    const Status s = c_->Call(Op::kQueryGid, req, nullptr, &r);
    if (s.ok()) *gid = r.gid;
    return s;
  }
  StatusOr<tp::ProtectionDomain*> AllocPd() override {
    Request req;
    Reply r;
    if (Status s = c_->Call(Op::kAllocPd, req, nullptr, &r); !s.ok()) return s;
    return static_cast<tp::ProtectionDomain*>(new RemotePd(c_, r.handle));
  }
  StatusOr<tp::CompletionQueue*> CreateCq(int32_t cqe) override {
    return CreateCqOnChannel(cqe, nullptr);
  }
  StatusOr<tp::CompletionChannel*> CreateCompChannel() override {
    Request req;
    Reply r;
    if (Status s = c_->Call(Op::kCreateChannel, req, nullptr, &r); !s.ok()) {
      return s;
    }
    auto* ch = new RemoteChannel(c_, this, r.handle);
    channels_[r.handle] = ch;
    return static_cast<tp::CompletionChannel*>(ch);
  }
  StatusOr<tp::CompletionQueue*> CreateCqOnChannel(
      int32_t cqe, tp::CompletionChannel* channel) override {
    Request req;
    req.a = static_cast<uint64_t>(static_cast<uint32_t>(cqe));
    req.handle2 = channel ? static_cast<RemoteChannel*>(channel)->remote() : 0;
    Reply r;
    if (Status s = c_->Call(Op::kCreateCq, req, nullptr, &r); !s.ok()) {
      return s;
    }
    auto* cq = new RemoteCq(c_, r.handle, static_cast<int32_t>(r.a),
                            static_cast<uint32_t>(r.b), c_->CqFlag(r.c));
    cqs_[r.handle] = cq;
    return static_cast<tp::CompletionQueue*>(cq);
  }
  Status GetAsyncEvent(tp::AsyncEvent* event) override {
    if (event == nullptr) return InvalidArgument("event is null");
    Request req;
    Reply r;
    const Status s = c_->Call(Op::kGetAsyncEvent, req, nullptr, &r);
    if (s.ok()) *event = r.event;
    return s;
  }
  // The daemon's byte: nothing can be queued before this process parks, or
  // the daemon sets it first (as the CQs' bytes).
  std::optional<bool> AsyncEventPending() const override {
    return __atomic_load_n(c_->AsyncEventFlag(), __ATOMIC_ACQUIRE) != 0;
  }
  const tp::Clock& clock() const override { return clock_; }
  uint64_t Random() override {
    Request req;
    Reply r;
    // The daemon's stream for this node; with the daemon gone (the next call
    // says so) the kernel's.
    if (c_->Call(Op::kRandom, req, nullptr, &r).ok()) return r.a;
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = 0;
    return v;
  }
  void ScheduleWakeup(uint64_t t_ns) override {
    Request req;
    req.a = t_ns;
    Reply r;
    (void)c_->Call(Op::kScheduleWakeup, req, nullptr, &r);
  }

  RemoteCq* CqByHandle(uint32_t handle) {
    auto it = cqs_.find(handle);
    return it == cqs_.end() ? nullptr : it->second;
  }
  void ForgetChannel(uint32_t handle) { channels_.erase(handle); }
  void SignalChannel(uint32_t handle) {
    auto it = channels_.find(handle);
    if (it != channels_.end()) it->second->Signal();
  }

 private:
  Connection* c_;
  SimdClock clock_;
  std::string name_;
  // For naming the CQ of a channel event, and signalling channels on wakes.
  // A destroyed CQ's entry stays (its handle is never reused).
  std::map<uint32_t, RemoteCq*> cqs_;
  std::map<uint32_t, RemoteChannel*> channels_;
};

Status RemoteChannel::GetEvent(tp::CompletionQueue** cq) {
  if (cq == nullptr) return InvalidArgument("cq is null");
  Request req;
  req.handle = handle_;
  Reply r;
  const Status s = c_->Call(Op::kGetChannelEvent, req, nullptr, &r);
  if (r.count == 0) Quiet();
  if (!s.ok()) return s;
  *cq = dev_->CqByHandle(r.handle);
  return Status::Ok();
}

Status RemoteChannel::Destroy() {
  if (Status s = DestroyRemote(c_, Op::kDestroyChannel, handle_); !s.ok()) {
    return s;
  }
  dev_->ForgetChannel(handle_);
  delete this;
  return Status::Ok();
}

class SimdBackend final : public tp::Backend {
 public:
  SimdBackend(std::unique_ptr<Connection> c, int node)
      : c_(std::move(c)), node_(node), clock_(c_.get()) {
    c_->SetWakeHandler(
        [](void* self, const Reply& r, const std::vector<uint8_t>& tail) {
          static_cast<SimdBackend*>(self)->Apply(r, tail);
        },
        this);
  }

  // Every node number opens this process's node (the process is one node;
  // the number only labels a domain, as on verbs).
  int32_t node_count() const override { return 64; }
  StatusOr<tp::Device*> OpenDevice(int32_t node, std::string* why) override {
    if (node < 0 || node >= 64) {
      if (why != nullptr) *why = "node must be in [0, 64)";
      return InvalidArgument("node out of range");
    }
    if (!device_) device_ = std::make_unique<RemoteDevice>(c_.get(), node_);
    ++opened_;
    return static_cast<tp::Device*>(device_.get());
  }
  void CloseDevice(tp::Device*) override { --opened_; }
  const tp::Clock& clock() const override { return clock_; }
  tp::BackendTuning tuning() const override {
    tp::BackendTuning t;
    t.inline_sends = true;  // small injects skip the tx table
    return t;
  }

  tp::WaitResult Wait(const tp::WaitSet&, uint64_t deadline_ns,
                      tp::Sleeper*) override {
    return Park(deadline_ns, /*polling=*/false) ? tp::WaitResult::kWoken
           : deadline_ns == UINT64_MAX          ? tp::WaitResult::kIdle
                                                : tp::WaitResult::kWoken;
  }
  bool NothingToRead() override { return Park(UINT64_MAX, /*polling=*/true); }
  bool ParksIdleReads() const override { return true; }
  Status health() const override {
    return c_->broken() ? Status(EIO, "the fabric daemon is gone")
                        : Status::Ok();
  }
  uint64_t SetPollHorizon(uint64_t) override { return UINT64_MAX; }
  // A wait fd must never put the process to sleep outside the fabric (time
  // would wait for it for ever): it always says "read".
  bool HasPendingWork() const override { return true; }
  tp::Simulation* simulation() override { return nullptr; }

 private:
  // Parks until time has moved and something concerns this node, then
  // brings what the fabric wrote into this process's memory. False when the
  // daemon says nothing can happen any more (or is gone). `polling`: an
  // empty poll, not a wait (the program may be watching something else too;
  // the daemon may then let the poll return with nothing, at once).
  bool Park(uint64_t deadline_ns, bool polling) {
    Request req;
    req.c = deadline_ns;
    req.b = static_cast<uint64_t>(gettid());
    req.flags = polling ? kParkPolling : 0;
    Reply r;
    std::vector<uint8_t> tail;
    if (!c_->Call(Op::kPark, req, nullptr, &r, &tail).ok()) return false;
    Apply(r, tail);
    return r.a == 0;
  }

  // A wake's ranges go into this process's memory; its channels are
  // signalled.
  void Apply(const Reply& r, const std::vector<uint8_t>& tail) {
    TailReader in(tail.data(), tail.size());
    for (uint32_t i = 0; i < r.count; ++i) {
      Range range;
      if (!in.Take(&range)) break;
      c_->CopyFromShadow(range.offset, range.length);
    }
    for (uint32_t i = 0; i < r.handle; ++i) {
      uint32_t ch = 0;
      if (!in.Take(&ch)) break;
      if (device_) device_->SignalChannel(ch);
    }
  }

  std::unique_ptr<Connection> c_;
  int node_;
  SimdClock clock_;
  std::unique_ptr<RemoteDevice> device_;
  int opened_ = 0;
};

}  // namespace
}  // namespace internal

StatusOr<std::unique_ptr<transport::Backend>> ConnectSimdBackend(
    const std::string& socket_path, int node, std::string* why) {
  auto c = std::make_unique<internal::Connection>();
  if (Status s = c->Open(socket_path, node, why); !s.ok()) return s;
  return std::unique_ptr<transport::Backend>(
      std::make_unique<internal::SimdBackend>(std::move(c), node));
}

}  // namespace softfab::simd
