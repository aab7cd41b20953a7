// The calls every sf_* object answers: sf_close (each class checks what still
// uses it, unlinks from its parent and is released), and the error reporting
// every call shares: sf_strerror and sf_last_error.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::fabric_internal {

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
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
      ForgetEndpoint(ep->domain, ep->ep.get());
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
      ForgetEndpoint(pep->domain, pep->ep.get());
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
      if (mr->domain->mr_cache) {
        mr->domain->mr_cache->Invalidate(
            reinterpret_cast<const void*>(mr->mr->addr()), mr->mr->length());
      }
      if (Status s = mr->mr->Destroy(); !s.ok()) return Fail(s);
      mr->domain->mrs.erase(static_cast<sf_mr*>(mr));
      if (mr->domain->last_mr_found == static_cast<sf_mr*>(mr)) {
        mr->domain->last_mr_found = nullptr;
      }
      return Release(mr, &mr->domain->children);
    }
    case SF_CLASS_DOMAIN: {
      Domain* d = ObjectOf<Domain>(fid);
      if (d->children) return Fail(EBUSY, "objects of this domain are open");
      d->mr_cache.reset();  // its registrations hold the PD
      if (Status s = d->pd->Destroy(); !s.ok()) return Fail(s);
      // Its CQs went with the endpoints; nothing else can hold it.
      (void)d->channel->Destroy();
      auto& all = d->fabric->domains;
      all.erase(std::find(all.begin(), all.end(), d));
      d->fabric->backend->CloseDevice(d->device);
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

}  // extern "C"

}  // namespace softfab::fabric_internal
