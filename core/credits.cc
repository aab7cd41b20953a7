// Credits (see credits.h): registering the credit words, batching returns and
// writing running totals back to the peers; and the endpoint's two ways in
// (a consumed buffer's credit, the write-backs progress flushes).
#include "core/credits.h"

#include <algorithm>
#include <utility>

#include "core/endpoint.h"
#include "core/internal/endpoint_common.h"

namespace softfab::core {

namespace tp = ::softfab::transport;

Status Credits::Register(tp::ProtectionDomain* pd, uint32_t peers_max,
                         uint32_t per_peer) {
  per_peer_ = per_peer;
  words_.assign(peers_max, 0);
  sources_.assign(peers_max, 0);
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
  const uint64_t batch = std::max<uint64_t>(1, per_peer_ / 4);
  if (!c.write_pending && c.freed - c.freed_written >= batch) {
    c.write_pending = true;
    due_.push_back(peer);
  }
}

template <typename Writable, typename Written>
void Credits::FlushWrites(Writable writable, Written written) {
  size_t kept = 0;
  for (size_t i = 0; i < due_.size(); ++i) {
    const uint32_t peer = due_[i];
    const auto [c, qp] = writable(peer);
    if (qp == nullptr) {
      due_[kept++] = peer;
      continue;
    }
    sources_[peer] = c->freed;
    tp::Sge sge{reinterpret_cast<uint64_t>(&sources_[peer]), 8,
                sources_mr_->lkey()};
    tp::SendWr wr;
    wr.wr_id = WrId(kWrCredit, peer);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = tp::WrOpcode::kRdmaWrite;
    wr.send_flags = tp::kSendSignaled;
    wr.rdma.remote_addr = c->remote_addr;
    wr.rdma.rkey = c->remote_rkey;
    const tp::SendWr* bad = nullptr;
    if (!qp->PostSend(&wr, &bad).ok()) {
      due_[kept++] = peer;
      continue;
    }
    written(peer);
    c->freed_written = c->freed;
    c->write_pending = false;
  }
  due_.resize(kept);
}

// ------------------------------------------------------------------- endpoint

void Endpoint::ReturnCredit(uint32_t peer) {
  credits_.Return(peers_[peer].credits, peer);
}

void Endpoint::FlushCreditWrites() {
  credits_.FlushWrites(
      [&](uint32_t peer) -> std::pair<PeerCredits*, tp::QueuePair*> {
        Peer& p = peers_[peer];
        if (!CanSend(p) || p.sq_outstanding >= attr_.tx_size + 8) {
          return {nullptr, nullptr};
        }
        return {&p.credits, p.qp};
      },
      [&](uint32_t peer) {
        ++stats_.credit_writes;
        ++peers_[peer].sq_outstanding;
      });
}

}  // namespace softfab::core
