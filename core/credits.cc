// Credits (see credits.h): registering the credit words, batching returns and
// writing running totals back to the peers.
#include "core/credits.h"

#include <algorithm>
#include <utility>

#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

Status Credits::Register(tp::ProtectionDomain* pd, uint32_t peers_max) {
  words_.AllocateZeroed(peers_max);
  sources_.AllocateZeroed(peers_max);
  auto words = pd->RegMr(words_.data(), words_.size() * 8,
                         tp::kAccessLocalWrite | tp::kAccessRemoteWrite);
  if (!words.ok()) return words.status();
  words_mr_ = *words;
  auto sources = pd->RegMr(sources_.data(), sources_.size() * 8, 0);
  if (!sources.ok()) return sources.status();
  sources_mr_ = *sources;
  return Status::Ok();
}

void Credits::Deregister() {
  for (tp::MemoryRegion* mr : {words_mr_, sources_mr_}) {
    if (mr) (void)mr->Destroy();
  }
}

void Credits::Return(PeerCredits& c, uint32_t peer) {
  ++c.freed;
  // Only a connected peer's buffers are freed: its grant is decided.
  const uint64_t batch = std::max<uint64_t>(1, c.grant_out / 4);
  if (!c.write_pending && c.freed - c.freed_written >= batch) {
    c.write_pending = true;
    due_.push_back(peer);
  }
}

void Credits::Forget(uint32_t peer) {
  std::atomic_ref<uint64_t>(words_[peer]).store(0, std::memory_order_release);
  size_t kept = 0;
  for (size_t i = 0; i < due_.size(); ++i) {
    if (due_[i] != peer) due_[kept++] = due_[i];
  }
  due_.resize(kept);
}

bool Credits::PostWrite(uint32_t peer, const WriteTarget& t) {
  PeerCredits* c = t.credits;
  // An unsignaled WRITE may still be reading its source when the next one
  // rewrites it: the total only grows, and the newer one is as true.
  sources_[peer] = c->freed;
  tp::Sge sge{reinterpret_cast<uint64_t>(&sources_[peer]), 8,
              sources_mr_->lkey()};
  tp::SendWr wr;
  wr.wr_id = t.wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = tp::WrOpcode::kRdmaWrite;
  wr.send_flags = t.signaled ? tp::kSendSignaled : 0;
  wr.rdma.remote_addr = c->remote_addr;
  wr.rdma.rkey = c->remote_rkey;
  const tp::SendWr* bad = nullptr;
  if (!t.qp->PostSend(&wr, &bad).ok()) return false;
  c->freed_written = c->freed;
  c->write_pending = false;
  return true;
}

}  // namespace softfab::core
