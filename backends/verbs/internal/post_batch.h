// Posting a caller's linked list of transport work requests through
// ibv_post_send / ibv_post_recv / ibv_post_srq_recv without allocating.
//
// The list is translated into fixed stack arrays (kPostBatchWrs requests,
// kPostBatchSges SGEs) and handed to libibverbs a batch at a time. The rule of
// every post call is kept across batches: the requests before the first bad
// one are posted, it and everything after it are not, and *bad_wr names the
// caller's request (never the translated copy). A request that fails the
// backend's own checks first gets the requests before it posted, exactly as if
// the provider had stopped at it.
#ifndef SOFTFAB_BACKENDS_VERBS_INTERNAL_POST_BATCH_H_
#define SOFTFAB_BACKENDS_VERBS_INTERNAL_POST_BATCH_H_

#include <infiniband/verbs.h>

#include <cerrno>

#include "backends/verbs/internal/errors.h"
#include "transport/status.h"

namespace softfab::verbs::internal {

inline constexpr int kPostBatchWrs = 16;
// Also the most SGEs one request may have on this backend (QPs and SRQs are
// created with at most this many).
inline constexpr int kPostBatchSges = 64;

// The messages for a failed post: ENOMEM means the queue is full; anything
// else is the provider refusing the request named in *bad_wr.
struct PostErrors {
  const char* full;
  const char* refused;
};

// The Status of a post libibverbs refused with `code` (not 0).
inline Status PostRefused(int code, const PostErrors& errors) {
  return Status(code, code == ENOMEM ? errors.full : errors.refused);
}

// Posts the list starting at `wr`. `translate(const Wr&, ibv_sge* sges,
// IbvWr* out)` checks one request and writes its ibv form (Status);
// `post(IbvWr* first, IbvWr** bad)` hands a linked batch to libibverbs and
// returns its error number. An empty list posts nothing and succeeds.
template <typename Wr, typename IbvWr, typename Translate, typename Post>
Status PostChain(const Wr* wr, const Wr** bad_wr, Translate&& translate,
                 Post&& post, const PostErrors& errors) {
  if (bad_wr != nullptr) *bad_wr = nullptr;
  // One request (the data path's every post): translated and posted
  // without the batch's bookkeeping.
  if (wr != nullptr && wr->next == nullptr && wr->num_sge <= kPostBatchSges) {
    IbvWr one;
    ibv_sge sges[kPostBatchSges];
    Status s = translate(*wr, sges, &one);
    if (s.ok()) {
      one.next = nullptr;
      IbvWr* bad = nullptr;
      const int code = ErrnoOfReturn(post(&one, &bad));
      if (code == 0) return Status::Ok();
      s = PostRefused(code, errors);
    }
    if (bad_wr != nullptr) *bad_wr = wr;
    return s;
  }
  IbvWr batch[kPostBatchWrs];
  ibv_sge sges[kPostBatchSges];
  const Wr* source[kPostBatchWrs];
  int count = 0;
  int sges_used = 0;
  auto flush = [&]() -> Status {
    if (count == 0) return Status::Ok();
    for (int i = 0; i + 1 < count; ++i) batch[i].next = &batch[i + 1];
    batch[count - 1].next = nullptr;
    IbvWr* bad = nullptr;
    const int code = ErrnoOfReturn(post(&batch[0], &bad));
    const int posted = count;
    count = 0;
    sges_used = 0;
    if (code == 0) return Status::Ok();
    // A provider that fails without naming a request (a doorbell error)
    // is taken to have stopped at the first.
    const int at = (bad >= batch && bad < batch + posted)
                       ? static_cast<int>(bad - batch)
                       : 0;
    if (bad_wr != nullptr) *bad_wr = source[at];
    return PostRefused(code, errors);
  };
  for (; wr != nullptr; wr = wr->next) {
    const int need = wr->num_sge > 0 ? wr->num_sge : 0;
    Status s;
    if (need > kPostBatchSges) {
      s = InvalidArgument("num_sge exceeds max_sge");
    } else {
      if (count == kPostBatchWrs || sges_used + need > kPostBatchSges) {
        if (Status f = flush(); !f.ok()) return f;
      }
      s = translate(*wr, &sges[sges_used], &batch[count]);
    }
    if (!s.ok()) {
      if (Status f = flush(); !f.ok()) return f;
      if (bad_wr != nullptr) *bad_wr = wr;
      return s;
    }
    source[count++] = wr;
    sges_used += need;
  }
  return flush();
}

}  // namespace softfab::verbs::internal

#endif  // SOFTFAB_BACKENDS_VERBS_INTERNAL_POST_BATCH_H_
