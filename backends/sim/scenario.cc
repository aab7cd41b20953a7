#include "backends/sim/scenario.h"

#include <cstring>
#include <memory>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "transport/transport.h"

namespace softfab::sim {
namespace {

namespace tp = ::softfab::transport;

constexpr int kNodes = 4;
constexpr int kPairs = 6;
constexpr int kMessagesPerPair = 200;
constexpr uint32_t kMsgBytes = 3000;  // three packets at MTU 1024

struct Side {
  tp::ProtectionDomain* pd;
  tp::CompletionQueue* cq;
  tp::MemoryRegion* mr;
  std::vector<uint8_t> buf;
};

template <typename T>
T Get(StatusOr<T> v) {
  return v.ok() ? *v : T{};
}

bool Check(const Status& s) { return s.ok(); }

}  // namespace

ScenarioResult RunFaultyScenario(uint64_t seed) {
  SimConfig c;
  c.nodes = kNodes;
  c.master_seed = seed;
  c.default_link.latency_ns = 1500;
  c.links.push_back(
      SimLinkConfig{0, 1, 800, 25'000'000'000ull, tp::Mtu::k2048});
  auto add = [&](PacketFaultKind k, double p, uint64_t delay) {
    PacketFault f;
    f.kind = k;
    f.probability = p;
    f.delay_ns = delay;
    c.faults.packet_faults.push_back(f);
  };
  add(PacketFaultKind::kDrop, 0.03, 0);
  add(PacketFaultKind::kDuplicate, 0.02, 2500);
  add(PacketFaultKind::kReorder, 0.02, 6000);
  add(PacketFaultKind::kDelayExponential, 0.10, 3000);
  add(PacketFaultKind::kCorrupt, 0.01, 0);
  TimedFault down{TimedFaultKind::kLinkDown, 200'000, 2};
  TimedFault up{TimedFaultKind::kLinkUp, 900'000, 2};
  TimedFault stall{TimedFaultKind::kReceiverStall, 50'000, 3};
  stall.duration_ns = 100'000;
  c.faults.timed_faults = {down, up, stall};
  c.trace_capacity = 0;

  ScenarioResult res;
  auto fabric = CreateSimFabric(c);
  if (!fabric) return res;
  std::vector<Side> sides(kNodes);
  for (int n = 0; n < kNodes; ++n) {
    Side& s = sides[n];
    tp::Device* d = fabric->device(n);
    s.pd = Get(d->AllocPd());
    s.cq = Get(d->CreateCq(1 << 14));
    s.buf.assign(kPairs * kMessagesPerPair * 64 + kMsgBytes * 4, 0);
    s.mr = Get(s.pd->RegMr(s.buf.data(), s.buf.size(), tp::kAccessAll));
    if (!s.pd || !s.cq || !s.mr) return res;
  }
  // Node 3 receives through an SRQ.
  tp::SrqAttr sa;
  sa.max_wr = 4096;
  sa.max_sge = 1;
  tp::SharedReceiveQueue* srq = Get(sides[3].pd->CreateSrq(sa));
  struct Pair {
    int from, to;
    tp::QueuePair* send;
    tp::QueuePair* recv;
    uint32_t next_expected = 0;
  };
  std::vector<Pair> pairs;
  const int ends[kPairs][2] = {{0, 1}, {1, 0}, {0, 2}, {2, 3}, {1, 3}, {0, 3}};
  for (int i = 0; i < kPairs; ++i) {
    Pair p{ends[i][0], ends[i][1], nullptr, nullptr};
    for (int side = 0; side < 2; ++side) {
      const int n = side == 0 ? p.from : p.to;
      tp::QpInitAttr ia;
      ia.send_cq = sides[n].cq;
      ia.recv_cq = sides[n].cq;
      ia.srq = (side == 1 && n == 3) ? srq : nullptr;
      ia.cap.max_send_wr = 256;
      ia.cap.max_recv_wr = ia.srq ? 0 : 1024;
      ia.cap.max_send_sge = 1;
      ia.cap.max_recv_sge = ia.srq ? 0 : 1;
      ia.sq_sig_all = 1;
      (side == 0 ? p.send : p.recv) = Get(sides[n].pd->CreateQp(ia));
    }
    if (!p.send || !p.recv) return res;
    pairs.push_back(p);
  }
  for (Pair& p : pairs) {
    for (int side = 0; side < 2; ++side) {
      tp::QueuePair* qp = side == 0 ? p.send : p.recv;
      tp::QueuePair* peer = side == 0 ? p.recv : p.send;
      const int peer_node = side == 0 ? p.to : p.from;
      tp::QpAttr a;
      a.qp_state = tp::QpState::kInit;
      a.port_num = 1;
      a.qp_access_flags = tp::kAccessAll;
      if (!Check(qp->Modify(a, tp::kQpState | tp::kQpPkeyIndex | tp::kQpPort |
                                   tp::kQpAccessFlags))) {
        return res;
      }
      a.qp_state = tp::QpState::kRtr;
      a.path_mtu = tp::Mtu::k1024;
      a.dest_qp_num = peer->qp_num();
      a.rq_psn = 0xfffff0;  // PSNs wrap around 2^24 during the run
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 3;
      a.ah_attr.dlid = static_cast<uint16_t>(peer_node + 1);
      if (!Check(qp->Modify(a, tp::kQpState | tp::kQpAv | tp::kQpPathMtu |
                                   tp::kQpDestQpn | tp::kQpRqPsn |
                                   tp::kQpMaxDestRdAtomic |
                                   tp::kQpMinRnrTimer))) {
        return res;
      }
      a.qp_state = tp::QpState::kRts;
      a.sq_psn = 0xfffff0;
      a.timeout = 8;
      a.retry_cnt = 7;
      a.rnr_retry = 7;
      a.max_rd_atomic = 1;
      if (!Check(qp->Modify(a, tp::kQpState | tp::kQpSqPsn | tp::kQpTimeout |
                                   tp::kQpRetryCnt | tp::kQpRnrRetry |
                                   tp::kQpMaxQpRdAtomic))) {
        return res;
      }
    }
  }
  // Receives hold the header of each message; the rest lands in a scratch
  // area per node (the payload is checked by its first 4 bytes: the sequence
  // number).
  auto post_recv = [&](tp::QueuePair* qp, int node, uint64_t wr_id) {
    Side& s = sides[node];
    tp::Sge sge{reinterpret_cast<uint64_t>(s.buf.data()) +
                    kPairs * kMessagesPerPair * 64,
                kMsgBytes, s.mr->lkey()};
    tp::RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const tp::RecvWr* bad;
    return qp != nullptr ? qp->PostRecv(&wr, &bad) : srq->PostRecv(&wr, &bad);
  };
  for (int i = 0; i < kPairs; ++i) {
    for (int m = 0; m < kMessagesPerPair; ++m) {
      const uint64_t wr_id = (static_cast<uint64_t>(i) << 32) | m;
      tp::QueuePair* target = pairs[i].to == 3 ? nullptr : pairs[i].recv;
      if (!post_recv(target, pairs[i].to, wr_id).ok()) return res;
    }
  }
  // Sends, in windows, with busy-polling as an application would.
  std::vector<int> sent(kPairs, 0);
  for (int round = 0; round < kMessagesPerPair; round += 20) {
    for (int i = 0; i < kPairs; ++i) {
      Side& s = sides[pairs[i].from];
      for (int m = round; m < round + 20; ++m) {
        uint8_t* msg =
            s.buf.data() + kPairs * kMessagesPerPair * 64 + kMsgBytes * 2;
        tp::Sge sge{reinterpret_cast<uint64_t>(msg), kMsgBytes, s.mr->lkey()};
        tp::SendWr wr;
        wr.wr_id = (static_cast<uint64_t>(i) << 32) | m;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = tp::WrOpcode::kSendWithImm;
        wr.imm_data = static_cast<uint32_t>(m);
        const tp::SendWr* bad;
        if (!pairs[i].send->PostSend(&wr, &bad).ok()) return res;
        ++res.rc_posted;
        ++sent[i];
      }
    }
    // Drain this window.
    tp::WorkCompletion wc[32];
    uint64_t got = 0;
    for (int spins = 0; spins < 1'000'000 && got < 20ull * kPairs * 2;
         ++spins) {
      for (int n = 0; n < kNodes; ++n) {
        const int k = sides[n].cq->Poll(32, wc);
        for (int j = 0; j < k; ++j) {
          ++got;
          if (wc[j].status != tp::WcStatus::kSuccess) continue;
          if (wc[j].opcode == tp::WcOpcode::kSend) {
            ++res.rc_sent_ok;
          } else {
            ++res.rc_delivered;
            // Which pair: the receive's wr_id names the posted slot; the
            // immediate names the message. Per pair (by source QP), immediates
            // must arrive 0, 1, 2, ...
            for (Pair& p : pairs) {
              if (p.send->qp_num() == wc[j].src_qp &&
                  p.recv->qp_num() == wc[j].qp_num) {
                if (wc[j].imm_data < p.next_expected) ++res.duplicates_seen;
                if (wc[j].imm_data > p.next_expected) ++res.out_of_order;
                p.next_expected = wc[j].imm_data + 1;
              }
            }
          }
        }
      }
    }
  }
  fabric->RunUntilIdle(1u << 26);
  res.digest = fabric->digest();
  res.end_time_ns = fabric->clock().NowNs();
  const SimStats st = fabric->stats();
  res.events = st.events;
  res.packets_dropped = st.packets_dropped;
  res.retransmits = st.retransmits;
  res.rnr_naks = st.rnr_naks;
  return res;
}

}  // namespace softfab::sim
