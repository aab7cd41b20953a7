// Protection domains and what hangs off them except QPs: memory regions
// (ibv_reg_mr, with the locked-memory hint), address handles and shared
// receive queues (posting, the limit, queries).
#include <cerrno>

#include "backends/verbs/internal/errors.h"
#include "backends/verbs/internal/objects.h"
#include "backends/verbs/internal/post_batch.h"
#include "backends/verbs/internal/translate.h"

namespace softfab::verbs::internal {

namespace tp = ::softfab::transport;

namespace {

// ibv_reg_mr's failures, each with what usually causes it.
Status RegMrFailure(int code) {
  switch (code) {
    case ENOMEM:
    case EPERM:
      return Status(code,
                    "ibv_reg_mr could not pin the memory: RLIMIT_MEMLOCK is "
                    "probably too small (`ulimit -l unlimited`, or memlock "
                    "in /etc/security/limits.conf)");
    case EFAULT:
      return Status(code, "ibv_reg_mr: the range is not mapped memory");
    case EINVAL:
      return Status(code, "ibv_reg_mr refused the range or access flags");
  }
  return Status(code, "ibv_reg_mr failed");
}

}  // namespace

StatusOr<tp::MemoryRegion*> Pd::RegMr(void* addr, uint64_t length,
                                      uint32_t access) {
  if (addr == nullptr) return InvalidArgument("addr is null");
  if (length == 0) return InvalidArgument("length is 0");
  if (access & ~tp::kAccessAll) return InvalidArgument("unknown access flags");
  if ((access & (tp::kAccessRemoteWrite | tp::kAccessRemoteAtomic)) &&
      !(access & tp::kAccessLocalWrite)) {
    return InvalidArgument("REMOTE_WRITE/ATOMIC need LOCAL_WRITE");
  }
  if (reinterpret_cast<uint64_t>(addr) + length <
      reinterpret_cast<uint64_t>(addr)) {
    return InvalidArgument("region wraps around");
  }
  ibv_mr* mr = ibv_reg_mr(pd_, addr, length, static_cast<int>(access));
  if (mr == nullptr) return RegMrFailure(ErrnoOrFallback(ENOMEM));
  return static_cast<tp::MemoryRegion*>(
      device()->Adopt(std::make_unique<Mr>(device(), mr, access)));
}

Status Mr::Destroy() {
  return device()->Release(
      this, [this] { return ibv_dereg_mr(mr_); }, "MR still bound",
      "ibv_dereg_mr failed");
}

StatusOr<tp::AddressHandle*> Pd::CreateAh(const tp::AhAttr& attr) {
  ibv_ah_attr a{};
  if (Status s = ToIbvAhAttr(attr, device()->map(), &a); !s.ok()) return s;
  ibv_ah* ah = ibv_create_ah(pd_, &a);
  if (ah == nullptr) {
    return FromErrno("ibv_create_ah failed (no route to that GID?)", EINVAL);
  }
  return static_cast<tp::AddressHandle*>(
      device()->Adopt(std::make_unique<Ah>(device(), ah, this)));
}

Status Ah::Destroy() {
  return device()->Release(
      this, [this] { return ibv_destroy_ah(ah_); }, "AH still in use",
      "ibv_destroy_ah failed");
}

StatusOr<tp::SharedReceiveQueue*> Pd::CreateSrq(const tp::SrqAttr& attr) {
  const ibv_device_attr& dev = device()->attr();
  if (attr.max_wr == 0 || attr.max_wr > static_cast<uint32_t>(dev.max_srq_wr)) {
    return InvalidArgument("max_wr out of range");
  }
  if (attr.max_sge > static_cast<uint32_t>(dev.max_srq_sge) ||
      attr.max_sge > static_cast<uint32_t>(kPostBatchSges)) {
    return InvalidArgument("max_sge too big");
  }
  if (attr.srq_limit > attr.max_wr) {
    return InvalidArgument("srq_limit above max_wr");
  }
  // Created unarmed and then armed with ibv_modify_srq: providers differ on
  // whether the creation's srq_limit arms the limit, the simulator arms it.
  ibv_srq_init_attr init{};
  init.attr.max_wr = attr.max_wr;
  init.attr.max_sge = attr.max_sge;
  ibv_srq* srq = ibv_create_srq(pd_, &init);
  if (srq == nullptr) return FromErrno("ibv_create_srq failed", ENOMEM);
  if (attr.srq_limit != 0) {
    ibv_srq_attr limit{};
    limit.srq_limit = attr.srq_limit;
    if (Status s = FromReturn(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT),
                              "ibv_modify_srq refused the limit");
        !s.ok()) {
      (void)ibv_destroy_srq(srq);
      return s;
    }
  }
  return static_cast<tp::SharedReceiveQueue*>(
      device()->Adopt(std::make_unique<Srq>(device(), srq, init.attr.max_sge)));
}

Status Srq::PostRecv(const tp::RecvWr* wr, const tp::RecvWr** bad_wr) {
  return PostChain<tp::RecvWr, ibv_recv_wr>(
      wr, bad_wr,
      [this](const tp::RecvWr& in, ibv_sge* sges, ibv_recv_wr* out) {
        return ToIbvRecvWr(in, max_sge_, sges, out);
      },
      [this](ibv_recv_wr* first, ibv_recv_wr** bad) {
        return ibv_post_srq_recv(srq_, first, bad);
      },
      {"SRQ full", "ibv_post_srq_recv refused the request"});
}

Status Srq::Modify(const tp::SrqAttr& attr, uint32_t attr_mask) {
  if (attr_mask & ~(tp::kSrqMaxWr | tp::kSrqLimit)) {
    return InvalidArgument("unknown SRQ attribute mask bits");
  }
  if (attr_mask & tp::kSrqMaxWr) {
    return InvalidArgument("SRQ resize is not supported");
  }
  ibv_srq_attr a{};
  a.srq_limit = attr.srq_limit;
  return FromReturn(ibv_modify_srq(srq_, &a, static_cast<int>(attr_mask)),
                    "ibv_modify_srq refused the limit");
}

Status Srq::Query(tp::SrqAttr* attr) const {
  if (attr == nullptr) return InvalidArgument("attr is null");
  ibv_srq_attr a{};
  if (Status s = FromReturn(ibv_query_srq(srq_, &a), "ibv_query_srq failed");
      !s.ok()) {
    return s;
  }
  attr->max_wr = a.max_wr;
  attr->max_sge = a.max_sge;
  attr->srq_limit = a.srq_limit;
  return Status::Ok();
}

Status Srq::Destroy() {
  return device()->Release(
      this, [this] { return ibv_destroy_srq(srq_); }, "SRQ still used by a QP",
      "ibv_destroy_srq failed");
}

Status Pd::Destroy() {
  return device()->Release(
      this, [this] { return ibv_dealloc_pd(pd_); },
      "PD still has MRs, QPs, SRQs or AHs", "ibv_dealloc_pd failed");
}

}  // namespace softfab::verbs::internal
