// Completion queues of softfab's provider (fi_cq_open and its ops) and
// fi_trywait. sf_cq_* already write libfabric's entry layouts and error
// entries, wait on an fd the same way and number prov_errno the same way, so
// every call forwards to the sf_cq it owns.
#include <rdma/fi_errno.h>

#include <algorithm>
#include <vector>

#include "api/libfabric/internal/provider_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::libfabric {
namespace {

static_assert(sizeof(fi_cq_tagged_entry) == sizeof(sf_cq_tagged_entry) &&
                  sizeof(fi_cq_data_entry) == sizeof(sf_cq_data_entry) &&
                  sizeof(fi_cq_msg_entry) == sizeof(sf_cq_msg_entry) &&
                  sizeof(fi_cq_entry) == sizeof(sf_cq_entry) &&
                  sizeof(fi_cq_err_entry) == sizeof(sf_cq_err_entry) &&
                  offsetof(fi_cq_err_entry, prov_errno) ==
                      offsetof(sf_cq_err_entry, prov_errno) &&
                  offsetof(fi_cq_err_entry, err_data_size) ==
                      offsetof(sf_cq_err_entry, err_data_size),
              "sf_* writes libfabric's completion entries");
static_assert(FI_GETWAIT == SF_GETWAIT && FI_EAVAIL == SF_EAVAIL &&
                  FI_ETRUNC == SF_ETRUNC && FI_ETOOSMALL == SF_ETOOSMALL &&
                  FI_EOPBADSTATE == SF_EOPBADSTATE && FI_ENOMSG == SF_ENOMSG &&
                  FI_ECANCELED == SF_ECANCELED,
              "sf_* error numbers are libfabric's");

sf_cq* Sf(fid_cq* cq) { return reinterpret_cast<Cq*>(cq)->sf; }

int CloseCq(fid* f) {
  auto* cq = reinterpret_cast<Cq*>(f);
  int rc = sf_close(&cq->sf->fid);
  if (rc != 0) return rc;
  auto& all = cq->domain->fabric->cqs;
  all.erase(std::find(all.begin(), all.end(), cq));
  --cq->domain->children;
  delete cq;
  return 0;
}

int ControlCq(fid* f, int command, void* arg) {
  auto* cq = reinterpret_cast<Cq*>(f);
  if (command == FI_GETWAITOBJ) {
    if (arg == nullptr) return -FI_EINVAL;
    int fd = -1;
    *static_cast<fi_wait_obj*>(arg) =
        sf_control(&cq->sf->fid, SF_GETWAIT, &fd) == 0 ? FI_WAIT_FD
                                                       : FI_WAIT_NONE;
    return 0;
  }
  return sf_control(&cq->sf->fid, command, arg);
}

fi_ops cq_fid_ops = {
    .size = sizeof(fi_ops),
    .close = CloseCq,
    .bind = NoBind,
    .control = ControlCq,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

ssize_t Read(fid_cq* cq, void* buf, size_t count) {
  return sf_cq_read(Sf(cq), buf, count);
}
ssize_t ReadFrom(fid_cq* cq, void* buf, size_t count, fi_addr_t* src) {
  return sf_cq_readfrom(Sf(cq), buf, count, src);
}
ssize_t ReadErr(fid_cq* cq, fi_cq_err_entry* buf, uint64_t flags) {
  return sf_cq_readerr(Sf(cq), reinterpret_cast<sf_cq_err_entry*>(buf), flags);
}
// fi_cq(3): a blocking read whose time runs out returns -FI_EAGAIN (sf_*
// says -SF_ETIMEDOUT).
ssize_t SRead(fid_cq* cq, void* buf, size_t count, const void* cond,
              int timeout) {
  const ssize_t rc = sf_cq_sread(Sf(cq), buf, count, cond, timeout);
  return rc == -FI_ETIMEDOUT ? -FI_EAGAIN : rc;
}
// A blocking read that reports sources has no sf_* twin.
ssize_t SReadFrom(fid_cq*, void*, size_t, fi_addr_t*, const void*, int) {
  return -FI_ENOSYS;
}
int Signal(fid_cq*) { return -FI_ENOSYS; }
const char* StrError(fid_cq* cq, int prov_errno, const void* err_data,
                     char* buf, size_t len) {
  return sf_cq_strerror(Sf(cq), prov_errno, err_data, buf, len);
}

fi_ops_cq cq_ops = {
    .size = sizeof(fi_ops_cq),
    .read = Read,
    .readfrom = ReadFrom,
    .readerr = ReadErr,
    .sread = SRead,
    .sreadfrom = SReadFrom,
    .signal = Signal,
    .strerror = StrError,
};

}  // namespace

int OpenCq(fid_domain* df, fi_cq_attr* attr, fid_cq** out, void* context) {
  if (df == nullptr || attr == nullptr || out == nullptr) return -FI_EINVAL;
  if (attr->flags != 0 || attr->wait_cond != FI_CQ_COND_NONE) {
    return -FI_ENOSYS;
  }
  sf_cq_attr a{};
  a.size = attr->size;
  switch (attr->format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT:
      a.format = SF_CQ_FORMAT_CONTEXT;
      break;
    case FI_CQ_FORMAT_MSG:
      a.format = SF_CQ_FORMAT_MSG;
      break;
    case FI_CQ_FORMAT_DATA:
      a.format = SF_CQ_FORMAT_DATA;
      break;
    case FI_CQ_FORMAT_TAGGED:
      a.format = SF_CQ_FORMAT_TAGGED;
      break;
    default:
      return -FI_ENOSYS;
  }
  switch (attr->wait_obj) {
    case FI_WAIT_NONE:
      a.wait_obj = SF_WAIT_NONE;
      break;
    case FI_WAIT_UNSPEC:
    case FI_WAIT_FD:
      a.wait_obj = SF_WAIT_FD;
      break;
    default:  // wait sets, mutex + condition, yield
      return -FI_ENOSYS;
  }
  auto* d = reinterpret_cast<Domain*>(df);
  auto* cq = new Cq;
  const int rc = sf_cq_open(d->sf, &a, &cq->sf, cq);
  if (rc != 0) {
    delete cq;
    return rc;
  }
  InitFid(&cq->fid.fid, FI_CLASS_CQ, context, &cq_fid_ops);
  cq->fid.ops = &cq_ops;
  cq->domain = d;
  ++d->children;
  d->fabric->cqs.push_back(cq);
  *out = &cq->fid;
  return 0;
}

int TryWait(fid_fabric* ff, fid** fids, int count) {
  if (ff == nullptr || count < 0 || (count > 0 && fids == nullptr)) {
    return -FI_EINVAL;
  }
  std::vector<sf_fid*> sf_fids;
  for (int i = 0; i < count; ++i) {
    if (fids[i] == nullptr) return -FI_EINVAL;
    // Only completion queues have wait objects here.
    if (fids[i]->fclass != FI_CLASS_CQ) return -FI_ENOSYS;
    sf_fids.push_back(&reinterpret_cast<Cq*>(fids[i])->sf->fid);
  }
  return sf_trywait(reinterpret_cast<Fabric*>(ff)->sf, sf_fids.data(), count);
}

}  // namespace softfab::libfabric
