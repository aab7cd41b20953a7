// The data path: fi_msg (sf_send, sf_recv, ... sf_injectdata) and fi_tagged
// (sf_tsend, sf_trecv, ...) calls, each a thin shape over DoSend / DoRecv,
// which check the endpoint and descriptors and post to the core. The public
// flag values are the core's (checked here at compile time).
#include <sys/uio.h>

#include <cerrno>
#include <cstdint>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "core/completion_queue.h"
#include "core/endpoint.h"
#include "core/flags.h"
#include "core/wire.h"
#include "transport/status.h"

namespace softfab::fabric_internal {

namespace {

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

// Resolves user descriptors (sf_mr_desc values) into transport regions of
// `domain`; false when one is not a live registration of that domain.
// Without descriptors `out` is not used (the core is given none).
bool ResolveDesc(Domain* domain, void** desc, size_t count,
                 tp::MemoryRegion** out) {
  for (size_t i = 0; i < count; ++i) {
    out[i] = nullptr;
    if (desc[i] == nullptr) continue;
    if (desc[i] != domain->last_mr_found) {
      if (domain->mrs.count(desc[i]) == 0) return false;
      domain->last_mr_found = desc[i];
    }
    out[i] = static_cast<Mr*>(static_cast<sf_mr*>(desc[i]))->mr;
  }
  return true;
}

// What every post checks after finding its object: the iov count and the
// descriptors (resolved into transport registrations).
int CheckPost(Domain* domain, void** desc, size_t count,
              tp::MemoryRegion** mrs) {
  if (count > core::Endpoint::kIovMax) {
    return Fail(EINVAL, "too many iov entries");
  }
  if (desc != nullptr && !ResolveDesc(domain, desc, count, mrs)) {
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

}  // namespace

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

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

}  // namespace softfab::fabric_internal
