// The verbs backend's one place for rdma-core's error conventions.
//
// libibverbs reports failure three ways: calls that return an errno value
// (ibv_modify_qp, ibv_post_send, ibv_destroy_*; a few providers return it
// negated or return -1 and set errno), calls that return NULL and set errno
// (ibv_create_*, ibv_alloc_pd, ibv_reg_mr), and calls that return -1 and set
// errno (ibv_get_async_event, ibv_get_cq_event). Each call site in
// backends/verbs turns its result into a softfab::Status with one of these
// helpers and a message literal naming the call; nothing outside this folder
// sees an errno.
#ifndef SOFTFAB_BACKENDS_VERBS_INTERNAL_ERRORS_H_
#define SOFTFAB_BACKENDS_VERBS_INTERNAL_ERRORS_H_

#include <cerrno>

#include "transport/status.h"

namespace softfab::verbs::internal {

// The errno of a call that returns 0 or an error number: positive as
// documented, negative from providers that negate it, -1 with errno set from
// the oldest ones. Never 0 for a failed call (EIO when nothing says more).
inline int ErrnoOfReturn(int ret) {
  if (ret >= 0) return ret;
  if (ret == -1) return errno > 0 ? errno : EIO;
  return -ret;
}

// The errno left by a call that returned NULL or -1; `fallback` when the
// provider failed without setting errno.
inline int ErrnoOrFallback(int fallback) {
  return errno > 0 ? errno : fallback;
}

// Status for a call returning 0 or an error number; `what` must be a literal.
inline Status FromReturn(int ret, const char* what) {
  const int code = ErrnoOfReturn(ret);
  return code == 0 ? Status::Ok() : Status(code, what);
}

// Status for a call that returned NULL (or -1) and set errno.
inline Status FromErrno(const char* what, int fallback = EIO) {
  return Status(ErrnoOrFallback(fallback), what);
}

}  // namespace softfab::verbs::internal

#endif  // SOFTFAB_BACKENDS_VERBS_INTERNAL_ERRORS_H_
