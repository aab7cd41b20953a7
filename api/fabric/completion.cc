// Completion queues (read, readfrom, readerr and the blocking sread) and event
// queues (connection-management events, sread alike). Waiting and the wait
// objects are in api/fabric/wait.cc.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "api/fabric/internal/backends.h"
#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "core/completion_queue.h"
#include "core/event_queue.h"

namespace softfab::fabric_internal {

namespace {

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

// `idle`: a non-blocking read that finds nothing tells a backend that parks
// idle reads (Backend::NothingToRead) and, when it parked the read until
// something came, reads once more; a blocking read's attempts do not, as its
// wait does the same. Other backends are not asked (Fabric::parks_idle_reads).
ssize_t ReadCq(sf_cq* pub, void* buf, size_t count, sf_addr_t* src, bool idle) {
  Cq* cq = AsCq(pub);
  if (cq == nullptr) return Fail(EINVAL, "not a completion queue");
  if (count == 0) {
    cq->cq->Progress();
    SyncWaitFds(cq->domain->fabric);
    return 0;
  }
  if (buf == nullptr) return Fail(EINVAL, "need a buffer for the entries");
  // Entries go from the CQ's ring straight into the application's buffer,
  // in its format.
  const sf_cq_format format = cq->format;
  auto take = [format, buf, src](size_t i, const core::CqEntry& e) {
    CopyOut(e, format, buf, i);
    if (src) src[i] = e.src_addr;
  };
  Fabric* fabric = cq->domain->fabric;
  int n = cq->cq->ReadWith(count, take);
  SyncWaitFds(fabric);
  const bool parks = n == -EAGAIN && fabric->parks_idle_reads;
  if (parks && idle) {
    cq->cq->BeforeSleep();
    if (fabric->backend->NothingToRead()) {
      n = cq->cq->ReadWith(count, take);  // what woke the parked read
      SyncWaitFds(fabric);
    }
  }
  if (n < 0) {
    last_error = n == -EAGAIN ? "no completion is ready"
                              : "an error completion is next: sf_cq_readerr";
    if (parks && n == -EAGAIN) {
      if (Status h = fabric->backend->health(); !h.ok()) return Fail(h);
    }
    return n;
  }
  return n;
}

ssize_t ReadEq(Eq* eq, uint32_t* event, void* buf, size_t len, uint64_t flags,
               bool idle) {
  auto ev = eq->eq->Read((flags & SF_PEEK) != 0);
  SyncWaitFds(eq->fabric);
  const bool parks =
      !ev.ok() && ev.status().code() == EAGAIN && eq->fabric->parks_idle_reads;
  if (parks && idle) {
    eq->eq->BeforeSleep();
    if (eq->fabric->backend->NothingToRead()) {
      ev = eq->eq->Read((flags & SF_PEEK) != 0);  // what woke the parked read
      SyncWaitFds(eq->fabric);
    }
  }
  if (!ev.ok()) {
    last_error = ev.status().message();
    if (parks && ev.status().code() == EAGAIN) {
      if (Status h = eq->fabric->backend->health(); !h.ok()) return Fail(h);
    }
    return -ev.status().code();
  }
  const core::EqEvent& e = **ev;
  auto* out = static_cast<sf_eq_cm_entry*>(buf);
  out->fid = static_cast<sf_fid*>(e.fid);
  out->info = nullptr;
  // A connection request comes with its info on every read. A consuming
  // read's is the caller's (sf_freeinfo). Peeks of one event share one that
  // the event queue owns until it is closed, so peeking leaks nothing;
  // sf_freeinfo on it is accepted and releases it early. Either creates the
  // accepting endpoint or rejects the request.
  if (e.type == core::kEqConnReq && (flags & SF_PEEK)) {
    out->info = static_cast<sf_info*>(const_cast<void*>(
        eq->eq->PeekHandle(e.info, [&e]() -> std::shared_ptr<void> {
          auto info = std::make_shared<sf_info>();
          info->magic = kMagic;
          info->request = e.info;
          return info;
        })));
  } else if (e.type == core::kEqConnReq) {
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

// The sf_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/fabric.h declares.
extern "C" {

int sf_cq_open(sf_domain* pub, const sf_cq_attr* attr, sf_cq** out,
               void* context) {
  Domain* d = AsDomain(pub);
  if (d == nullptr || out == nullptr) {
    return Fail(EINVAL, "domain and cq must be valid");
  }
  const size_t size = attr && attr->size ? attr->size : 1024;
  const int raw_format = attr ? Raw(attr->format) : SF_CQ_FORMAT_CONTEXT;
  if (raw_format < SF_CQ_FORMAT_CONTEXT || raw_format > SF_CQ_FORMAT_TAGGED) {
    return Fail(EINVAL, "unknown CQ format");
  }
  const auto format = static_cast<sf_cq_format>(raw_format);
  if (size > (1u << 24)) return Fail(EINVAL, "CQ size too large");
  if (attr && attr->flags) return Fail(EINVAL, "no CQ flags are supported");
  const int raw_wait = attr ? Raw(attr->wait_obj) : SF_WAIT_NONE;
  if (raw_wait != SF_WAIT_NONE && raw_wait != SF_WAIT_UNSPEC &&
      raw_wait != SF_WAIT_FD) {
    return Fail(raw_wait == SF_WAIT_SET ? ENOSYS : EINVAL,
                "wait_obj: SF_WAIT_NONE, SF_WAIT_UNSPEC or SF_WAIT_FD");
  }
  const auto wait = static_cast<sf_wait_obj>(raw_wait);
  auto* c = NewObject<Cq>(SF_CLASS_CQ, context, &d->children);
  c->domain = d;
  c->format = format;
  c->cq = std::make_unique<core::CompletionQueue>(size);
  if (wait != SF_WAIT_NONE) {
    if (const int rc = OpenWaitFd(c); rc != 0) {
      Release(c, &d->children);
      return rc;
    }
  }
  *out = c;
  return 0;
}

ssize_t sf_cq_read(sf_cq* cq, void* buf, size_t count) {
  return ReadCq(cq, buf, count, nullptr, /*idle=*/true);
}

ssize_t sf_cq_readfrom(sf_cq* cq, void* buf, size_t count,
                       sf_addr_t* src_addr) {
  if (src_addr == nullptr) return Fail(EINVAL, "src_addr must not be NULL");
  return ReadCq(cq, buf, count, src_addr, /*idle=*/true);
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
  return WaitFor(cq->domain->fabric, {cq->domain}, timeout_ms,
                 [&]() -> ssize_t {
                   return ReadCq(pub, buf, count, nullptr, /*idle=*/false);
                 });
}

// ---- Event queues ----

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
  return ReadEq(eq, event, buf, len, flags, /*idle=*/true);
}

ssize_t sf_eq_sread(sf_eq* pub, uint32_t* event, void* buf, size_t len,
                    int timeout_ms, uint64_t flags) {
  Eq* eq = AsEq(pub);
  if (int rc = CheckEqRead(eq, event, buf, len, flags); rc != 0) return rc;
  return WaitFor(eq->fabric, eq->fabric->domains, timeout_ms, [&]() -> ssize_t {
    return ReadEq(eq, event, buf, len, flags, /*idle=*/false);
  });
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
  buf->prov_errno = ev->prov_errno;
  buf->err_data = eq->err_data.empty() ? nullptr : eq->err_data.data();
  buf->err_data_size = eq->err_data.size();
  return sizeof *buf;
}

}  // extern "C"

}  // namespace softfab::fabric_internal
