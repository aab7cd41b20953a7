// Event queues of softfab's provider (fi_eq_open and its ops): the sf_eq's
// events in libfabric's layout, with two translations. An event's fid is
// the application's (the provider object the sf_* object was opened for),
// and an FI_CONNREQ's info is an fi_info (a copy of the listener's) whose
// handle is the connection request, for fi_endpoint + fi_accept or
// fi_reject.
#include <rdma/fi_errno.h>

#include <memory>

#include "api/libfabric/internal/provider_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::libfabric {
namespace {

static_assert(sizeof(fi_eq_cm_entry) == sizeof(sf_eq_cm_entry) &&
                  sizeof(fi_eq_err_entry) == sizeof(sf_eq_err_entry) &&
                  offsetof(fi_eq_err_entry, err_data_size) ==
                      offsetof(sf_eq_err_entry, err_data_size),
              "sf_* writes libfabric's event entries");
static_assert(int{FI_CONNREQ} == int{SF_CONNREQ} &&
                  int{FI_CONNECTED} == int{SF_CONNECTED} &&
                  int{FI_SHUTDOWN} == int{SF_SHUTDOWN},
              "sf_* numbers events as libfabric does");

// The application's fid for an sf_* object: every provider object starts
// with its fid and is the sf_* object's context.
fid* AppFid(sf_fid* f) {
  return f == nullptr ? nullptr : static_cast<fid*>(f->context);
}

// Turns what sf_eq_read wrote into `buf` into libfabric's entry.
// `peek`: the request stays the sf_eq's (sf_eq_read with SF_PEEK), which
// releases it when it closes.
ssize_t Translate(Eq* eq, uint32_t event, void* buf, ssize_t rc, bool peek) {
  if (rc < static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) return rc;
  auto* entry = static_cast<fi_eq_cm_entry*>(buf);
  auto* sf_entry = static_cast<sf_eq_cm_entry*>(buf);
  sf_info* request = sf_entry->info;
  entry->fid = AppFid(sf_entry->fid);
  entry->info = nullptr;
  if (event != FI_CONNREQ || request == nullptr || entry->fid == nullptr) {
    return rc;
  }
  auto* pep = reinterpret_cast<Pep*>(entry->fid);
  fi_info* info = fi_dupinfo(pep->info);
  if (info == nullptr) {
    sf_freeinfo(request);
    return -FI_ENOMEM;
  }
  auto cr = std::make_unique<ConnReq>();
  InitFid(&cr->fid, FI_CLASS_CONNREQ, nullptr, nullptr);
  cr->sf = request;
  cr->owned = !peek;
  cr->node = pep->node;
  info->handle = &cr->fid;
  eq->fabric->connreqs.push_back(std::move(cr));
  entry->info = info;
  return rc;
}

Eq* Of(fid_eq* f) { return reinterpret_cast<Eq*>(f); }

ssize_t Read(fid_eq* f, uint32_t* event, void* buf, size_t len,
             uint64_t flags) {
  uint32_t ev = 0;
  ssize_t rc = sf_eq_read(Of(f)->sf, &ev, buf, len, flags);
  if (rc >= 0 && event) *event = ev;
  return Translate(Of(f), ev, buf, rc, flags & FI_PEEK);
}

ssize_t SRead(fid_eq* f, uint32_t* event, void* buf, size_t len, int timeout,
              uint64_t flags) {
  uint32_t ev = 0;
  ssize_t rc = sf_eq_sread(Of(f)->sf, &ev, buf, len, timeout, flags);
  // fi_eq(3): time running out is -FI_EAGAIN (sf_*: -SF_ETIMEDOUT).
  if (rc == -FI_ETIMEDOUT) return -FI_EAGAIN;
  if (rc >= 0 && event) *event = ev;
  return Translate(Of(f), ev, buf, rc, flags & FI_PEEK);
}

ssize_t ReadErr(fid_eq* f, fi_eq_err_entry* buf, uint64_t flags) {
  ssize_t rc =
      sf_eq_readerr(Of(f)->sf, reinterpret_cast<sf_eq_err_entry*>(buf), flags);
  if (rc > 0) {
    buf->fid = AppFid(reinterpret_cast<sf_fid*>(buf->fid));
    buf->context = buf->fid ? buf->fid->context : nullptr;
  }
  return rc;
}

ssize_t Write(fid_eq*, uint32_t, const void*, size_t, uint64_t) {
  return -FI_ENOSYS;
}

// prov_errno is numbered as in completions: any open CQ of the fabric names
// it (sf_cq_strerror reads nothing of the queue but its validity).
const char* StrError(fid_eq* f, int prov_errno, const void* err_data, char* buf,
                     size_t len) {
  const auto& cqs = Of(f)->fabric->cqs;
  if (!cqs.empty()) {
    return sf_cq_strerror(cqs.front()->sf, prov_errno, err_data, buf, len);
  }
  return fi_strerror(prov_errno);
}

int CloseEq(fid* f) {
  auto* eq = reinterpret_cast<Eq*>(f);
  int rc = sf_close(&eq->sf->fid);
  if (rc != 0) return rc;
  --eq->fabric->children;
  delete eq;
  return 0;
}

fi_ops eq_fid_ops = {
    .size = sizeof(fi_ops),
    .close = CloseEq,
    .bind = NoBind,
    .control = NoControl,
    .ops_open = NoOpsOpen,
    .tostr = NoToStr,
    .ops_set = NoOpsSet,
};

fi_ops_eq eq_ops = {
    .size = sizeof(fi_ops_eq),
    .read = Read,
    .readerr = ReadErr,
    .write = Write,
    .sread = SRead,
    .strerror = StrError,
};

}  // namespace

int OpenEq(fid_fabric* ff, fi_eq_attr* attr, fid_eq** out, void* context) {
  if (ff == nullptr || attr == nullptr || out == nullptr) return -FI_EINVAL;
  // No user-written events, and no wait object beyond fi_eq_sread.
  if (attr->flags != 0) return -FI_ENOSYS;
  if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC) {
    return -FI_ENOSYS;
  }
  auto* fab = reinterpret_cast<Fabric*>(ff);
  sf_eq_attr a{};
  a.size = attr->size;
  auto* eq = new Eq;
  const int rc = sf_eq_open(fab->sf, &a, &eq->sf, eq);
  if (rc != 0) {
    delete eq;
    return rc;
  }
  InitFid(&eq->fid.fid, FI_CLASS_EQ, context, &eq_fid_ops);
  eq->fid.ops = &eq_ops;
  eq->fabric = fab;
  ++fab->children;
  *out = &eq->fid;
  return 0;
}

}  // namespace softfab::libfabric
