// sfv_* completion queues: create (on a completion channel or none), destroy
// and poll (work completions converted from the transport's), and the names of
// completion statuses.
#include <algorithm>
#include <cerrno>
#include <memory>
#include <mutex>

#include "api/softfab/verbs.h"
#include "api/verbs/internal/verbs_objects.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::verbs_internal {

// The sfv_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/verbs.h declares.
extern "C" {

sfv_cq* sfv_create_cq(sfv_context* context, int cqe, void* cq_context,
                      sfv_comp_channel* channel, int comp_vector) {
  if (context == nullptr || !Ctx(context)->open) {
    return Fail<sfv_cq>(EINVAL, "context is NULL or closed");
  }
  SfvContext* c = Ctx(context);
  if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    return Fail<sfv_cq>(EINVAL, "comp_vector out of range");
  }
  ChannelImpl* ch = nullptr;
  if (channel != nullptr) {
    auto it = c->channel_objs.find(channel);
    if (it == c->channel_objs.end()) {
      return Fail<sfv_cq>(EINVAL, "channel of another context");
    }
    ch = it->second.get();
  }
  auto r = ch != nullptr ? c->dev->CreateCqOnChannel(cqe, ch->channel)
                         : c->dev->CreateCq(cqe);
  if (!r.ok()) return Fail<sfv_cq>(r.status());
  auto cq = std::make_unique<CqImpl>();
  cq->context = context;
  cq->channel = channel;
  cq->cq_context = cq_context;
  cq->handle = (*r)->handle();
  cq->cqe = (*r)->cqe();
  cq->cq = *r;
  CqImpl* raw = cq.get();
  if (ch != nullptr) {
    std::lock_guard<std::mutex> lock(ch->mu);
    ch->cqs[raw->cq] = raw;
    ++ch->refcnt;
  }
  c->cq_by_handle[cq->handle] = raw;
  c->cq_objs[raw] = std::move(cq);
  ++c->cqs;
  return raw;
}

int sfv_destroy_cq(sfv_cq* cq) {
  if (cq == nullptr) return EINVAL;
  SfvContext* c = Ctx(cq->context);
  auto it = c->cq_objs.find(cq);
  if (it == c->cq_objs.end()) return EINVAL;
  const softfab::Status s = it->second->cq->Destroy();
  if (!s.ok()) return Err(s);
  if (cq->channel != nullptr) {
    auto* ch = static_cast<ChannelImpl*>(cq->channel);
    std::lock_guard<std::mutex> lock(ch->mu);
    ch->cqs.erase(it->second->cq);
    --ch->refcnt;
  }
  c->cq_by_handle.erase(cq->handle);
  c->cq_objs.erase(it);
  --c->cqs;
  return 0;
}

int sfv_poll_cq(sfv_cq* cq, int num_entries, sfv_wc* wc) {
  if (cq == nullptr || num_entries < 0 || (num_entries > 0 && wc == nullptr))
    return -EINVAL;
  tp::WorkCompletion buf[32];
  int total = 0;
  tp::CompletionQueue* q = static_cast<CqImpl*>(cq)->cq;
  while (total < num_entries) {
    const int want = std::min(num_entries - total, 32);
    const int n = q->Poll(want, buf);
    if (n < 0) return total > 0 ? total : n;
    for (int i = 0; i < n; ++i) {
      sfv_wc& o = wc[total + i];
      const tp::WorkCompletion& w = buf[i];
      o.wr_id = w.wr_id;
      o.status = static_cast<sfv_wc_status>(w.status);
      o.opcode = static_cast<sfv_wc_opcode>(w.opcode);
      o.vendor_err = w.vendor_err;
      o.byte_len = w.byte_len;
      o.imm_data = w.imm_data;
      o.qp_num = w.qp_num;
      o.src_qp = w.src_qp;
      o.wc_flags = w.wc_flags;
      o.pkey_index = w.pkey_index;
      o.slid = w.slid;
      o.sl = w.sl;
      o.dlid_path_bits = w.dlid_path_bits;
    }
    total += n;
    if (n < want) break;
  }
  // As in libibverbs, sfv_qp::state is refreshed by modify/query (and here by
  // posts and async events), not by polling.
  return total;
}

const char* sfv_wc_status_str(sfv_wc_status status) {
  static const char* const kNames[] = {"success",
                                       "local length error",
                                       "local QP operation error",
                                       "local EE context operation error",
                                       "local protection error",
                                       "Work Request Flushed Error",
                                       "memory management operation error",
                                       "bad response error",
                                       "local access error",
                                       "remote invalid request error",
                                       "remote access error",
                                       "remote operation error",
                                       "transport retry counter exceeded",
                                       "RNR retry counter exceeded",
                                       "local RDD violation error",
                                       "remote invalid RD request",
                                       "aborted error",
                                       "invalid EE context number",
                                       "invalid EE context state",
                                       "fatal error",
                                       "response timeout error",
                                       "general error"};
  const int i = static_cast<int>(status);
  return i >= 0 && i <= SFV_WC_GENERAL_ERR ? kNames[i] : "unknown";
}

}  // extern "C"

}  // namespace softfab::verbs_internal
