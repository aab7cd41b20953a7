// The sf_*-over-fi_* shim's queues and data path: CQ and EQ reads (an EQ
// event's fid and connection request mapped back to sf_* objects; a blocking
// read whose time runs out is -SF_ETIMEDOUT, as sf_* says, where libfabric
// says -FI_EAGAIN) and fi_msg / fi_tagged calls, whose arguments are sf_*'s
// already.
#include <algorithm>

#include "tests/libfabric/sf_over_fi/internal/shim_objects.h"

namespace softfab::sf_over_fi {
namespace {

fid_cq* CqOf(sf_cq* pub) {
  Cq* cq = As<Cq>(pub, SF_CLASS_CQ);
  return cq ? cq->fi : nullptr;
}
fid_ep* EpOf(sf_ep* pub) {
  Ep* ep = As<Ep>(pub, SF_CLASS_EP);
  return ep ? ep->fi : nullptr;
}
ssize_t TimedOut(ssize_t rc) { return rc == -FI_EAGAIN ? -SF_ETIMEDOUT : rc; }

}  // namespace

void NameShimEndpoints(Cq* cq, void* entries, ssize_t count) {
  size_t stride = 0;
  switch (cq->format) {
    case FI_CQ_FORMAT_MSG:
      stride = sizeof(fi_cq_msg_entry);
      break;
    case FI_CQ_FORMAT_DATA:
      stride = sizeof(fi_cq_data_entry);
      break;
    case FI_CQ_FORMAT_TAGGED:
      stride = sizeof(fi_cq_tagged_entry);
      break;
    default:
      return;  // no flags: nothing tells a buffered receive apart
  }
  if (cq->buffered.empty()) return;
  auto* p = static_cast<uint8_t*>(entries);
  for (ssize_t i = 0; i < count; ++i, p += stride) {
    const auto* e = reinterpret_cast<const fi_cq_msg_entry*>(p);
    // On a buffered endpoint every untagged receive entry is a report (an
    // untagged receive cannot be posted there); a tagged one names no ep.
    if ((e->flags & (FI_RECV | FI_MSG | FI_TAGGED)) != (FI_RECV | FI_MSG) ||
        e->op_context == nullptr) {
      continue;
    }
    // A claim's completion carries the application's context, not an
    // fi_recv_context.
    bool claim = false;
    for (Ep* ep : cq->buffered) {
      auto it = std::find(ep->claims.begin(), ep->claims.end(), e->op_context);
      if (it != ep->claims.end()) {
        ep->claims.erase(it);
        claim = true;
        break;
      }
    }
    if (claim) continue;
    auto* rc = static_cast<fi_recv_context*>(e->op_context);
    for (Ep* ep : cq->buffered) {
      if (rc->ep == ep->fi) {
        rc->ep = reinterpret_cast<fid_ep*>(static_cast<sf_ep*>(ep));
      }
    }
  }
}

namespace {

// The sf_* object an fi fid was opened for (its context).
sf_fid* SfFid(fid* f) {
  return f == nullptr ? nullptr : static_cast<sf_fid*>(f->context);
}

ssize_t Translate(Eq* eq, uint32_t event, void* buf, ssize_t rc,
                  uint64_t flags) {
  if (rc < static_cast<ssize_t>(sizeof(fi_eq_cm_entry))) return rc;
  auto* entry = static_cast<fi_eq_cm_entry*>(buf);
  fi_info* info = entry->info;
  auto* out = static_cast<sf_eq_cm_entry*>(buf);
  out->fid = SfFid(entry->fid);
  out->info = nullptr;
  if (event == FI_CONNREQ && info != nullptr) {
    out->info = new sf_info{info};
    if (flags & FI_PEEK) {
      out->info->owner = eq;
      eq->peeked.push_back(out->info);
    }
  }
  return rc;
}

}  // namespace

extern "C" {

ssize_t sf_cq_read(sf_cq* cq, void* buf, size_t count) {
  fid_cq* fi = CqOf(cq);
  if (fi == nullptr) return Fail(FI_EINVAL, "not a CQ");
  const ssize_t n = fi_cq_read(fi, buf, count);
  NameShimEndpoints(static_cast<Cq*>(cq), buf, n);
  return n;
}
ssize_t sf_cq_readfrom(sf_cq* cq, void* buf, size_t count, sf_addr_t* src) {
  fid_cq* fi = CqOf(cq);
  if (fi == nullptr) return Fail(FI_EINVAL, "not a CQ");
  const ssize_t n = fi_cq_readfrom(fi, buf, count, src);
  NameShimEndpoints(static_cast<Cq*>(cq), buf, n);
  return n;
}
ssize_t sf_cq_readerr(sf_cq* cq, sf_cq_err_entry* buf, uint64_t flags) {
  fid_cq* fi = CqOf(cq);
  if (fi == nullptr || buf == nullptr) return Fail(FI_EINVAL, "arguments");
  return fi_cq_readerr(fi, reinterpret_cast<fi_cq_err_entry*>(buf), flags);
}
ssize_t sf_cq_sread(sf_cq* cq, void* buf, size_t count, const void* cond,
                    int timeout_ms) {
  fid_cq* fi = CqOf(cq);
  if (fi == nullptr) return Fail(FI_EINVAL, "not a CQ");
  const ssize_t n = TimedOut(fi_cq_sread(fi, buf, count, cond, timeout_ms));
  NameShimEndpoints(static_cast<Cq*>(cq), buf, n);
  return n;
}
const char* sf_cq_strerror(sf_cq* cq, int prov_errno, const void* err_data,
                           char* buf, size_t len) {
  fid_cq* fi = CqOf(cq);
  if (fi == nullptr) {
    return "invalid argument: sf_cq_strerror's cq is not an open completion "
           "queue";
  }
  return fi_cq_strerror(fi, prov_errno, err_data, buf, len);
}

ssize_t sf_eq_read(sf_eq* pub, uint32_t* event, void* buf, size_t len,
                   uint64_t flags) {
  Eq* eq = As<Eq>(pub, SF_CLASS_EQ);
  if (eq == nullptr || event == nullptr) return Fail(FI_EINVAL, "arguments");
  const ssize_t rc = fi_eq_read(eq->fi, event, buf, len, flags);
  return Translate(eq, *event, buf, rc, flags);
}
ssize_t sf_eq_sread(sf_eq* pub, uint32_t* event, void* buf, size_t len,
                    int timeout_ms, uint64_t flags) {
  Eq* eq = As<Eq>(pub, SF_CLASS_EQ);
  if (eq == nullptr || event == nullptr) return Fail(FI_EINVAL, "arguments");
  const ssize_t rc = fi_eq_sread(eq->fi, event, buf, len, timeout_ms, flags);
  return Translate(eq, *event, buf, TimedOut(rc), flags);
}
ssize_t sf_eq_readerr(sf_eq* pub, sf_eq_err_entry* buf, uint64_t flags) {
  Eq* eq = As<Eq>(pub, SF_CLASS_EQ);
  if (eq == nullptr || buf == nullptr) return Fail(FI_EINVAL, "arguments");
  auto* fi_buf = reinterpret_cast<fi_eq_err_entry*>(buf);
  const ssize_t rc = fi_eq_readerr(eq->fi, fi_buf, flags);
  if (rc > 0) {
    buf->fid = SfFid(fi_buf->fid);
    buf->context = buf->fid ? buf->fid->context : nullptr;
  }
  return rc;
}

// ---- fi_msg ----

ssize_t sf_recv(sf_ep* ep, void* buf, size_t len, void* desc, sf_addr_t src,
                void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_recv(fi, buf, len, desc, src, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_recvv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                 sf_addr_t src, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_recvv(fi, iov, desc, count, src, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_recvmsg(sf_ep* ep, const sf_msg* msg, uint64_t flags) {
  fid_ep* fi = EpOf(ep);
  if (fi == nullptr || msg == nullptr) return Fail(FI_EINVAL, "arguments");
  const ssize_t rc =
      fi_recvmsg(fi, reinterpret_cast<const fi_msg*>(msg), flags);
  // A claim completes with the context the application left in the
  // fi_recv_context: an entry to pass through as it is.
  if (rc == 0 && (flags & FI_CLAIM) && msg->context != nullptr) {
    static_cast<Ep*>(ep)->claims.push_back(
        static_cast<const fi_recv_context*>(msg->context)->context);
  }
  return rc;
}
ssize_t sf_send(sf_ep* ep, const void* buf, size_t len, void* desc,
                sf_addr_t dest, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_send(fi, buf, len, desc, dest, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_sendv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                 sf_addr_t dest, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_sendv(fi, iov, desc, count, dest, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_sendmsg(sf_ep* ep, const sf_msg* msg, uint64_t flags) {
  fid_ep* fi = EpOf(ep);
  if (fi == nullptr || msg == nullptr) return Fail(FI_EINVAL, "arguments");
  return fi_sendmsg(fi, reinterpret_cast<const fi_msg*>(msg), flags);
}
ssize_t sf_inject(sf_ep* ep, const void* buf, size_t len, sf_addr_t dest) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_inject(fi, buf, len, dest)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_senddata(sf_ep* ep, const void* buf, size_t len, void* desc,
                    uint64_t data, sf_addr_t dest, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_senddata(fi, buf, len, desc, data, dest, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_injectdata(sf_ep* ep, const void* buf, size_t len, uint64_t data,
                      sf_addr_t dest) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_injectdata(fi, buf, len, data, dest)
            : Fail(FI_EINVAL, "not an endpoint");
}

// ---- fi_tagged ----

ssize_t sf_trecv(sf_ep* ep, void* buf, size_t len, void* desc, sf_addr_t src,
                 uint64_t tag, uint64_t ignore, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_trecv(fi, buf, len, desc, src, tag, ignore, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_trecvv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                  sf_addr_t src, uint64_t tag, uint64_t ignore, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_trecvv(fi, iov, desc, count, src, tag, ignore, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_trecvmsg(sf_ep* ep, const sf_msg_tagged* msg, uint64_t flags) {
  fid_ep* fi = EpOf(ep);
  if (fi == nullptr || msg == nullptr) return Fail(FI_EINVAL, "arguments");
  return fi_trecvmsg(fi, reinterpret_cast<const fi_msg_tagged*>(msg), flags);
}
ssize_t sf_tsend(sf_ep* ep, const void* buf, size_t len, void* desc,
                 sf_addr_t dest, uint64_t tag, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_tsend(fi, buf, len, desc, dest, tag, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_tsendv(sf_ep* ep, const iovec* iov, void** desc, size_t count,
                  sf_addr_t dest, uint64_t tag, void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_tsendv(fi, iov, desc, count, dest, tag, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_tsendmsg(sf_ep* ep, const sf_msg_tagged* msg, uint64_t flags) {
  fid_ep* fi = EpOf(ep);
  if (fi == nullptr || msg == nullptr) return Fail(FI_EINVAL, "arguments");
  return fi_tsendmsg(fi, reinterpret_cast<const fi_msg_tagged*>(msg), flags);
}
ssize_t sf_tinject(sf_ep* ep, const void* buf, size_t len, sf_addr_t dest,
                   uint64_t tag) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_tinject(fi, buf, len, dest, tag)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_tsenddata(sf_ep* ep, const void* buf, size_t len, void* desc,
                     uint64_t data, sf_addr_t dest, uint64_t tag,
                     void* context) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_tsenddata(fi, buf, len, desc, data, dest, tag, context)
            : Fail(FI_EINVAL, "not an endpoint");
}
ssize_t sf_tinjectdata(sf_ep* ep, const void* buf, size_t len, uint64_t data,
                       sf_addr_t dest, uint64_t tag) {
  fid_ep* fi = EpOf(ep);
  return fi ? fi_tinjectdata(fi, buf, len, data, dest, tag)
            : Fail(FI_EINVAL, "not an endpoint");
}

}  // extern "C"
}  // namespace softfab::sf_over_fi
