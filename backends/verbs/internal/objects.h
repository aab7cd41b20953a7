// The verbs backend's objects: each transport interface implemented over the
// libibverbs object it wraps, and the device that owns them all.
//
// Bookkeeping is kept to what the transport's rules need: each object sits in
// its device's list of live objects (so destroying the device releases
// everything, in dependency order), knows its device (so objects from another
// device are refused), and a CQ counts completion events taken and not yet
// acked (ibv_destroy_cq would otherwise wait for them forever). Everything
// else (EBUSY while referenced, state rules) is libibverbs' own answer.
#ifndef SOFTFAB_BACKENDS_VERBS_INTERNAL_OBJECTS_H_
#define SOFTFAB_BACKENDS_VERBS_INTERNAL_OBJECTS_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "backends/verbs/internal/errors.h"
#include "backends/verbs/internal/translate.h"
#include "backends/verbs/verbs_device.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs::internal {

class DeviceImpl;

// The device's list of live objects of one kind; an object knows its place.
template <typename T>
class OwnedList {
 public:
  using Items = std::list<std::unique_ptr<T>>;
  T* Add(std::unique_ptr<T> item) {
    items_.push_front(std::move(item));
    items_.front()->slot_ = items_.begin();
    return items_.front().get();
  }
  void Erase(T* item) { items_.erase(item->slot_); }
  // Newest first, the order teardown releases them in.
  Items& items() { return items_; }

 private:
  Items items_;
};

// What every object holds: its device and its place in the device's list.
template <typename T>
class Owned {
 public:
  explicit Owned(DeviceImpl* device) : device_(device) {}
  DeviceImpl* device() const { return device_; }

 private:
  friend class OwnedList<T>;
  DeviceImpl* const device_;
  typename OwnedList<T>::Items::iterator slot_;
};

class Mr final : public transport::MemoryRegion, public Owned<Mr> {
 public:
  Mr(DeviceImpl* device, ibv_mr* mr, uint32_t access)
      : Owned(device), mr_(mr), access_(access) {}
  ~Mr() override = default;
  uint64_t addr() const override {
    return reinterpret_cast<uint64_t>(mr_->addr);
  }
  uint64_t length() const override { return mr_->length; }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }
  uint32_t access() const override { return access_; }
  Status Destroy() override;
  ibv_mr* ibv() const { return mr_; }

 private:
  ibv_mr* const mr_;
  const uint32_t access_;
};

class Pd;

class Ah final : public transport::AddressHandle, public Owned<Ah> {
 public:
  Ah(DeviceImpl* device, ibv_ah* ah, const Pd* pd)
      : Owned(device), ah_(ah), pd_(pd) {}
  ~Ah() override = default;
  Status Destroy() override;
  ibv_ah* ibv() const { return ah_; }
  const Pd* pd() const { return pd_; }

 private:
  ibv_ah* const ah_;
  const Pd* const pd_;
};

class Channel final : public transport::CompletionChannel,
                      public Owned<Channel> {
 public:
  Channel(DeviceImpl* device, ibv_comp_channel* channel)
      : Owned(device), channel_(channel) {}
  ~Channel() override = default;
  int fd() const override { return channel_->fd; }
  Status GetEvent(transport::CompletionQueue** cq) override;
  Status Destroy() override;
  ibv_comp_channel* ibv() const { return channel_; }

 private:
  ibv_comp_channel* const channel_;
};

class Cq final : public transport::CompletionQueue, public Owned<Cq> {
 public:
  Cq(DeviceImpl* device, Channel* channel) : Owned(device), channel_(channel) {}
  ~Cq() override = default;
  int Poll(int num_entries, transport::WorkCompletion* wc) override;
  int32_t cqe() const override { return cq_->cqe; }
  uint32_t handle() const override { return cq_->handle; }
  Status Destroy() override;
  Status RequestNotify(bool solicited_only) override;
  Status Rearm() override;
  void AckEvents(uint32_t n) override;

  void set_ibv(ibv_cq* cq) { cq_ = cq; }
  ibv_cq* ibv() const { return cq_; }
  // A channel event for this CQ was taken (Channel::GetEvent): the CQ is
  // no longer armed.
  void CountEvent() {
    armed_.store(false);
    events_unacked_.fetch_add(1);
  }
  // Acks every event taken and not acked (device teardown).
  void AckAllEvents();

 private:
  ibv_cq* cq_ = nullptr;
  Channel* const channel_;
  std::atomic<uint32_t> events_unacked_{0};
  // Armed for any completion (RequestNotify(false), Rearm) with no event
  // taken since.
  std::atomic<bool> armed_{false};
};

class Srq final : public transport::SharedReceiveQueue, public Owned<Srq> {
 public:
  Srq(DeviceImpl* device, ibv_srq* srq, uint32_t max_sge)
      : Owned(device), srq_(srq), max_sge_(max_sge) {}
  ~Srq() override = default;
  Status PostRecv(const transport::RecvWr* wr,
                  const transport::RecvWr** bad_wr) override;
  Status Modify(const transport::SrqAttr& attr, uint32_t attr_mask) override;
  Status Query(transport::SrqAttr* attr) const override;
  uint32_t handle() const override { return srq_->handle; }
  Status Destroy() override;
  ibv_srq* ibv() const { return srq_; }

 private:
  ibv_srq* const srq_;
  const uint32_t max_sge_;
};

class Qp final : public transport::QueuePair, public Owned<Qp> {
 public:
  Qp(DeviceImpl* device, ibv_qp* qp, const Pd* pd, transport::QpType type,
     const SendQueueLimits& send, uint32_t max_recv_sge, bool has_srq)
      : Owned(device),
        qp_(qp),
        pd_(pd),
        type_(type),
        send_(send),
        max_recv_sge_(max_recv_sge),
        has_srq_(has_srq) {}
  ~Qp() override = default;
  uint32_t qp_num() const override { return qp_->qp_num; }
  transport::QpType qp_type() const override { return type_; }
  // The state libibverbs records at each successful Modify or Query; a QP
  // that the hardware moved to ERROR on its own reads so only after a Query.
  transport::QpState state() const override {
    return static_cast<transport::QpState>(qp_->state);
  }
  Status Modify(const transport::QpAttr& attr, uint32_t attr_mask) override;
  Status Query(transport::QpAttr* attr,
               transport::QpInitAttr* init_attr) const override;
  Status PostSend(const transport::SendWr* wr,
                  const transport::SendWr** bad_wr) override;
  Status PostRecv(const transport::RecvWr* wr,
                  const transport::RecvWr** bad_wr) override;
  Status Destroy() override;
  ibv_qp* ibv() const { return qp_; }

 private:
  ibv_qp* const qp_;
  const Pd* const pd_;
  const transport::QpType type_;
  const SendQueueLimits send_;
  const uint32_t max_recv_sge_;
  const bool has_srq_;
};

class Pd final : public transport::ProtectionDomain, public Owned<Pd> {
 public:
  Pd(DeviceImpl* device, ibv_pd* pd) : Owned(device), pd_(pd) {}
  ~Pd() override = default;
  StatusOr<transport::MemoryRegion*> RegMr(void* addr, uint64_t length,
                                           uint32_t access) override;
  StatusOr<transport::SharedReceiveQueue*> CreateSrq(
      const transport::SrqAttr& attr) override;
  StatusOr<transport::QueuePair*> CreateQp(
      const transport::QpInitAttr& attr) override;
  StatusOr<transport::AddressHandle*> CreateAh(
      const transport::AhAttr& attr) override;
  Status Destroy() override;
  ibv_pd* ibv() const { return pd_; }

 private:
  ibv_pd* const pd_;
};

class MonotonicClock final : public transport::Clock {
 public:
  uint64_t NowNs() const override;
};

// What was learnt about the device when it was opened.
struct DeviceSetup {
  ibv_context* context = nullptr;
  PortMap map;
  uint8_t link_layer = 0;
  ibv_device_attr attr{};
  uint32_t max_inline_data = 0;  // the most a QP was granted when asked
};

class DeviceImpl final : public VerbsDevice {
 public:
  explicit DeviceImpl(const DeviceSetup& setup);
  ~DeviceImpl() override;
  DeviceImpl(const DeviceImpl&) = delete;
  DeviceImpl& operator=(const DeviceImpl&) = delete;

  // transport::Device
  const char* name() const override;
  Status QueryDevice(transport::DeviceAttr* attr) const override;
  Status QueryPort(uint8_t port_num, transport::PortAttr* attr) const override;
  Status QueryGid(uint8_t port_num, int index,
                  transport::Gid* gid) const override;
  StatusOr<transport::ProtectionDomain*> AllocPd() override;
  StatusOr<transport::CompletionQueue*> CreateCq(int32_t cqe) override;
  StatusOr<transport::CompletionChannel*> CreateCompChannel() override;
  StatusOr<transport::CompletionQueue*> CreateCqOnChannel(
      int32_t cqe, transport::CompletionChannel* channel) override;
  Status GetAsyncEvent(transport::AsyncEvent* event) override;
  const transport::Clock& clock() const override { return clock_; }
  bool PollsOnlyRead() const override { return true; }  // ibv_poll_cq
  void ScheduleWakeup(uint64_t) override {}  // the hardware's clock runs.
  uint64_t Random() override;

  // VerbsDevice
  uint8_t physical_port() const override { return setup_.map.physical_port; }
  int gid_index() const override { return setup_.map.gid_index; }
  uint8_t link_layer() const override { return setup_.link_layer; }

  const PortMap& map() const { return setup_.map; }
  const ibv_device_attr& attr() const { return setup_.attr; }
  uint32_t max_inline_data() const { return setup_.max_inline_data; }

  // Adds a created object to its list (under the device's lock).
  template <typename T>
  T* Adopt(std::unique_ptr<T> object) {
    std::lock_guard<std::mutex> lock(mu_);
    return List<T>().Add(std::move(object));
  }
  // Destroys `object`'s libibverbs resource with `destroy()` (returns an
  // error number) and, when that succeeds, the object. `busy` is the message
  // for EBUSY, `failed` for anything else.
  template <typename T, typename Destroy>
  Status Release(T* object, Destroy&& destroy, const char* busy,
                 const char* failed) {
    std::lock_guard<std::mutex> lock(mu_);
    const int code = ErrnoOfReturn(destroy());
    if (code != 0) return Status(code, code == EBUSY ? busy : failed);
    List<T>().Erase(object);
    return Status::Ok();
  }

 private:
  template <typename T>
  OwnedList<T>& List();

  const DeviceSetup setup_;
  MonotonicClock clock_;
  std::mutex mu_;
  OwnedList<Qp> qps_;
  OwnedList<Srq> srqs_;
  OwnedList<Cq> cqs_;
  OwnedList<Channel> channels_;
  OwnedList<Ah> ahs_;
  OwnedList<Mr> mrs_;
  OwnedList<Pd> pds_;
};

template <>
inline OwnedList<Qp>& DeviceImpl::List<Qp>() {
  return qps_;
}
template <>
inline OwnedList<Srq>& DeviceImpl::List<Srq>() {
  return srqs_;
}
template <>
inline OwnedList<Cq>& DeviceImpl::List<Cq>() {
  return cqs_;
}
template <>
inline OwnedList<Channel>& DeviceImpl::List<Channel>() {
  return channels_;
}
template <>
inline OwnedList<Ah>& DeviceImpl::List<Ah>() {
  return ahs_;
}
template <>
inline OwnedList<Mr>& DeviceImpl::List<Mr>() {
  return mrs_;
}
template <>
inline OwnedList<Pd>& DeviceImpl::List<Pd>() {
  return pds_;
}

}  // namespace softfab::verbs::internal

#endif  // SOFTFAB_BACKENDS_VERBS_INTERNAL_OBJECTS_H_
