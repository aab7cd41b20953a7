// The fabric daemon's transport calls (see internal/session.h): each request
// of a process runs on its node's HCA in the simulated fabric, with handles
// for the objects it creates and its addresses and keys translated into the
// shadow memory the simulator works on.
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "backends/simd/internal/session.h"

namespace softfab::simd::internal {
namespace {

// Replies come in one shape; a failure carries its errno and reason.
Message MakeReply(Op op, const Reply& r) { return Message(op, &r, sizeof r); }

Reply FromStatus(const Status& s) {
  Reply r;
  r.status = s.code();
  if (!s.ok()) {
    std::strncpy(r.message, s.message(), sizeof r.message - 1);
  }
  return r;
}

template <typename T>
T Lookup(const std::map<uint32_t, T>& m, uint32_t handle) {
  auto it = m.find(handle);
  return it == m.end() ? T{} : it->second;
}

uint32_t Adopt(Session* s) { return s->next_handle++; }

// How much of the window the process's memfd backs now (it only grows: it
// is sealed against shrinking); the whole window without a file.
uint64_t WindowFileBytes(const Session* s) {
  struct stat st {};
  if (s->memfd < 0) return kWindowBytes;
  if (fstat(s->memfd, &st) != 0) return 0;
  return std::min<uint64_t>(static_cast<uint64_t>(st.st_size), kWindowBytes);
}

// A created object under a new handle of `s` (in r.handle), or the error.
template <typename T>
Reply Adopted(Session* s, std::map<uint32_t, T*>& objects, StatusOr<T*> made) {
  Reply r = FromStatus(made.status());
  if (made.ok()) objects[r.handle = Adopt(s)] = *made;
  return r;
}

// Destroys the object under `handle`; its handle goes only if that worked
// (a refusal, EBUSY say, leaves everything as it was).
template <typename T>
Reply Destroyed(std::map<uint32_t, T*>& objects, uint32_t handle,
                const char* unknown) {
  auto it = objects.find(handle);
  Reply r = FromStatus(it == objects.end() ? InvalidArgument(unknown)
                                           : it->second->Destroy());
  if (r.status == 0) objects.erase(it);
  return r;
}

// An address of the process inside registration `key` of `s` (by lkey or
// rkey) as the shadow address the simulator uses. Outside the registration
// the result stays outside its shadow (unsigned wrap-around), so the
// simulator's own bounds check refuses it; an unknown key leaves the address
// as it is (the simulator knows no such key either).
uint64_t ToShadow(const Session* s, const std::map<uint32_t, uint32_t>& keys,
                  uint32_t key, uint64_t addr) {
  if (s == nullptr) return addr;
  auto k = keys.find(key);
  if (k == keys.end()) return addr;
  auto m = s->mrs.find(k->second);
  if (m == s->mrs.end()) return addr;
  return reinterpret_cast<uint64_t>(m->second.shadow) +
         (addr - m->second.user_addr);
}

// Reads and translates the work requests of a post. False: malformed.
bool ReadSendWrs(Sessions& daemon, Session* s, const SessionQp& qp,
                 const Request& req, const uint8_t* tail, size_t tail_bytes,
                 std::vector<tp::SendWr>* wrs, std::vector<tp::Sge>* sges,
                 std::string* why) {
  if (!CheckWorkRequests(req, tail, tail_bytes, /*send=*/true, why)) {
    return false;
  }
  TailReader in(tail, tail_bytes);
  wrs->resize(req.count);
  sges->clear();
  sges->reserve(static_cast<size_t>(req.count) * kSgesMax);
  const Session* target = daemon.SessionOfNode(qp.remote_node);
  for (uint32_t i = 0; i < req.count; ++i) {
    WireWr w;
    (void)in.Take(&w);
    tp::SendWr& wr = (*wrs)[i];
    wr.wr_id = w.wr_id;
    wr.opcode = static_cast<tp::WrOpcode>(w.opcode);
    wr.send_flags = w.send_flags;
    wr.imm_data = w.imm_data;
    wr.rdma.rkey = w.rkey;
    wr.rdma.remote_addr =
        ToShadow(target, target ? target->mr_by_rkey : s->mr_by_rkey, w.rkey,
                 w.remote_addr);
    wr.ud.ah = Lookup(s->ahs, w.ah);
    wr.ud.remote_qpn = w.remote_qpn;
    wr.ud.remote_qkey = w.remote_qkey;
    wr.num_sge = static_cast<int32_t>(w.num_sge);
    const size_t first = sges->size();
    for (uint32_t j = 0; j < w.num_sge; ++j) {
      tp::Sge sge;
      (void)in.Take(&sge);
      sge.addr = ToShadow(s, s->mr_by_lkey, sge.lkey, sge.addr);
      sges->push_back(sge);
    }
    if (w.inline_bytes > 0) {
      // Inline data travels in the request: one SGE over it, as the
      // simulator copies inline data at post.
      const uint8_t* bytes = nullptr;
      (void)in.TakeBytes(w.inline_bytes, &bytes);
      sges->resize(first);
      sges->push_back({reinterpret_cast<uint64_t>(bytes), w.inline_bytes, 0});
      wr.num_sge = 1;
    }
    wr.sg_list =
        w.num_sge > 0 || w.inline_bytes > 0 ? &(*sges)[first] : nullptr;
  }
  for (uint32_t i = 0; i + 1 < req.count; ++i) (*wrs)[i].next = &(*wrs)[i + 1];
  return true;
}

bool ReadRecvWrs(Session* s, const Request& req, const uint8_t* tail,
                 size_t tail_bytes, std::vector<tp::RecvWr>* wrs,
                 std::vector<tp::Sge>* sges, std::string* why) {
  if (!CheckWorkRequests(req, tail, tail_bytes, /*send=*/false, why)) {
    return false;
  }
  TailReader in(tail, tail_bytes);
  wrs->resize(req.count);
  sges->clear();
  sges->reserve(static_cast<size_t>(req.count) * kSgesMax);
  for (uint32_t i = 0; i < req.count; ++i) {
    WireWr w;
    (void)in.Take(&w);
    tp::RecvWr& wr = (*wrs)[i];
    wr.wr_id = w.wr_id;
    wr.num_sge = static_cast<int32_t>(w.num_sge);
    const size_t first = sges->size();
    for (uint32_t j = 0; j < w.num_sge; ++j) {
      tp::Sge sge;
      (void)in.Take(&sge);
      sge.addr = ToShadow(s, s->mr_by_lkey, sge.lkey, sge.addr);
      sges->push_back(sge);
    }
    wr.sg_list = w.num_sge > 0 ? &(*sges)[first] : nullptr;
  }
  for (uint32_t i = 0; i + 1 < req.count; ++i) (*wrs)[i].next = &(*wrs)[i + 1];
  return true;
}

// The node a GID names (the simulator's GIDs encode it), or -1.
int32_t NodeOfGid(sim::SimFabric& fabric, const tp::Gid& gid) {
  for (int32_t n = 0; n < fabric.num_devices(); ++n) {
    tp::Gid g{};
    if (fabric.device(n)->QueryGid(1, 0, &g).ok() &&
        std::memcmp(g.raw, gid.raw, sizeof g.raw) == 0) {
      return n;
    }
  }
  return -1;
}

}  // namespace

uint32_t TakeCqSlot(Session* s, const tp::CompletionQueue* cq) {
  if (s->cq_slot_taken.empty()) s->cq_slot_taken.assign(kCqSlots, false);
  const auto free_slot =
      std::find(s->cq_slot_taken.begin(), s->cq_slot_taken.end(), false);
  if (free_slot == s->cq_slot_taken.end()) return 0;
  const auto slot = static_cast<uint32_t>(free_slot - s->cq_slot_taken.begin());
  *free_slot = true;
  s->cq_slots[cq] = slot;
  SetCqFlag(s, cq, true);
  return slot + 1;
}

void GiveBackCqSlot(Session* s, const tp::CompletionQueue* cq) {
  auto it = s->cq_slots.find(cq);
  if (it == s->cq_slots.end()) return;
  SetCqFlag(s, cq, false);
  s->cq_slot_taken[it->second] = false;
  s->cq_slots.erase(it);
}

std::vector<uint32_t> ChannelsWithEvents(const Session* s) {
  std::vector<uint32_t> out;
  for (const auto& [handle, ch] : s->channels) {
    pollfd p{ch->fd(), POLLIN, 0};
    if (poll(&p, 1, 0) == 1) out.push_back(handle);
  }
  return out;
}

bool ServeRequest(Sessions& daemon, Session* s, Op op, const Request& req,
                  const uint8_t* tail, size_t tail_bytes, Message* out,
                  std::string* why) {
  tp::Device* dev = s->device;
  Reply r;
  switch (op) {
    case Op::kQueryDevice: {
      tp::DeviceAttr a;
      r = FromStatus(dev->QueryDevice(&a));
      r.device_attr = a;
      break;
    }
    case Op::kQueryPort: {
      tp::PortAttr a;
      r = FromStatus(dev->QueryPort(static_cast<uint8_t>(req.a), &a));
      r.port_attr = a;
      break;
    }
    case Op::kQueryGid: {
      tp::Gid g{};
      r = FromStatus(dev->QueryGid(static_cast<uint8_t>(req.a),
                                   static_cast<int>(req.b), &g));
      r.gid = g;
      break;
    }
    case Op::kRandom:
      r.a = dev->Random();
      break;
    case Op::kAllocPd:
      r = Adopted(s, s->pds, dev->AllocPd());
      break;
    case Op::kDeallocPd:
      r = Destroyed(s->pds, req.handle, "no such PD");
      break;
    case Op::kRegMr: {
      tp::ProtectionDomain* pd = Lookup(s->pds, req.handle);
      // a: the process's address, b: length, c: shadow offset.
      const uint64_t file = WindowFileBytes(s);
      if (pd == nullptr || req.b == 0 || req.c < kShadowStart || req.c > file ||
          req.b > file - req.c) {
        r = FromStatus(InvalidArgument("no such PD, or a bad shadow range"));
        break;
      }
      uint8_t* shadow = s->window + req.c;
      auto mr = pd->RegMr(shadow, req.b, req.flags);
      r = FromStatus(mr.status());
      if (!mr.ok()) break;
      const uint32_t h = Adopt(s);
      s->mrs[h] = {req.a, req.b, shadow, *mr};
      s->mr_by_lkey[(*mr)->lkey()] = h;
      s->mr_by_rkey[(*mr)->rkey()] = h;
      r.handle = h;
      r.a = (*mr)->lkey();
      r.b = (*mr)->rkey();
      break;
    }
    case Op::kDeregMr: {
      auto it = s->mrs.find(req.handle);
      if (it == s->mrs.end()) {
        r = FromStatus(InvalidArgument("no such MR"));
        break;
      }
      const uint32_t lkey = it->second.mr->lkey(), rkey = it->second.mr->rkey();
      r = FromStatus(it->second.mr->Destroy());
      if (r.status != 0) break;
      s->mr_by_lkey.erase(lkey);
      s->mr_by_rkey.erase(rkey);
      s->mrs.erase(it);
      break;
    }
    case Op::kCreateCq: {
      tp::CompletionChannel* ch = nullptr;
      if (req.handle2 != 0 &&
          (ch = Lookup(s->channels, req.handle2)) == nullptr) {
        r = FromStatus(InvalidArgument("no such channel"));
        break;
      }
      auto cq = dev->CreateCqOnChannel(static_cast<int32_t>(req.a), ch);
      r = FromStatus(cq.status());
      if (!cq.ok()) break;
      s->cqs[r.handle = Adopt(s)] = *cq;
      r.a = static_cast<uint64_t>((*cq)->cqe());
      r.b = (*cq)->handle();
      r.c = TakeCqSlot(s, *cq);
      break;
    }
    case Op::kDestroyCq: {
      tp::CompletionQueue* cq = Lookup(s->cqs, req.handle);
      r = Destroyed(s->cqs, req.handle, "no such CQ");
      if (r.status == 0) GiveBackCqSlot(s, cq);
      break;
    }
    case Op::kPollCq: {
      tp::CompletionQueue* cq = Lookup(s->cqs, req.handle);
      if (cq == nullptr || req.count > kWcsMax) {
        r = FromStatus(InvalidArgument("no such CQ, or too many entries"));
        break;
      }
      tp::WorkCompletion wcs[kWcsMax];
      const int n = cq->Poll(static_cast<int>(req.count), wcs);
      r.count = n > 0 ? static_cast<uint32_t>(n) : 0;
      if (n < 0) r.status = -n;
      // Fewer than asked for: the CQ is empty until the next completion.
      if (n >= 0 && static_cast<uint32_t>(n) < req.count) {
        SetCqFlag(s, cq, false);
      }
      if (n > 0) daemon.TookCompletions(*s, req.handle, wcs, n);
      *out = MakeReply(op, r);
      for (uint32_t i = 0; i < r.count; ++i) out->Append(wcs[i]);
      return true;
    }
    case Op::kRequestNotify: {
      tp::CompletionQueue* cq = Lookup(s->cqs, req.handle);
      r = FromStatus(cq ? cq->RequestNotify(req.flags != 0)
                        : InvalidArgument("no such CQ"));
      break;
    }
    case Op::kAckEvents: {
      if (tp::CompletionQueue* cq = Lookup(s->cqs, req.handle)) {
        cq->AckEvents(static_cast<uint32_t>(req.a));
      }
      break;
    }
    case Op::kCreateChannel:
      r = Adopted(s, s->channels, dev->CreateCompChannel());
      break;
    case Op::kDestroyChannel:
      r = Destroyed(s->channels, req.handle, "no such channel");
      break;
    case Op::kGetChannelEvent: {
      tp::CompletionChannel* ch = Lookup(s->channels, req.handle);
      if (ch == nullptr) {
        r = FromStatus(InvalidArgument("no such channel"));
        break;
      }
      tp::CompletionQueue* cq = nullptr;
      r = FromStatus(ch->GetEvent(&cq));
      for (const auto& [h, c] : s->cqs) {
        if (c == cq) r.handle = h;
      }
      pollfd p{ch->fd(), POLLIN, 0};
      r.count = poll(&p, 1, 0) == 1 ? 1 : 0;  // more events waiting
      break;
    }
    case Op::kCreateSrq: {
      tp::ProtectionDomain* pd = Lookup(s->pds, req.handle);
      if (pd == nullptr) {
        r = FromStatus(InvalidArgument("no such PD"));
        break;
      }
      auto srq = pd->CreateSrq(req.srq_attr);
      r = FromStatus(srq.status());
      if (!srq.ok()) break;
      s->srqs[r.handle = Adopt(s)] = *srq;
      r.b = (*srq)->handle();
      break;
    }
    case Op::kModifySrq: {
      tp::SharedReceiveQueue* srq = Lookup(s->srqs, req.handle);
      r = FromStatus(srq ? srq->Modify(req.srq_attr, req.mask)
                         : InvalidArgument("no such SRQ"));
      break;
    }
    case Op::kQuerySrq: {
      tp::SharedReceiveQueue* srq = Lookup(s->srqs, req.handle);
      tp::SrqAttr a;
      r = FromStatus(srq ? srq->Query(&a) : InvalidArgument("no such SRQ"));
      r.srq_attr = a;
      break;
    }
    case Op::kDestroySrq:
      r = Destroyed(s->srqs, req.handle, "no such SRQ");
      break;
    case Op::kPostSrqRecv:
    case Op::kPostRecv: {
      std::vector<tp::RecvWr> wrs;
      std::vector<tp::Sge> sges;
      if (!ReadRecvWrs(s, req, tail, tail_bytes, &wrs, &sges, why)) {
        return false;
      }
      const tp::RecvWr* bad = nullptr;
      Status st;
      if (op == Op::kPostSrqRecv) {
        tp::SharedReceiveQueue* srq = Lookup(s->srqs, req.handle);
        st = srq ? srq->PostRecv(wrs.empty() ? nullptr : wrs.data(), &bad)
                 : InvalidArgument("no such SRQ");
      } else {
        const SessionQp qp = Lookup(s->qps, req.handle);
        st = qp.qp ? qp.qp->PostRecv(wrs.empty() ? nullptr : wrs.data(), &bad)
                   : InvalidArgument("no such QP");
      }
      r = FromStatus(st);
      r.bad_index = bad ? static_cast<uint32_t>(bad - wrs.data()) : 0;
      break;
    }
    case Op::kCreateQp: {
      tp::ProtectionDomain* pd = Lookup(s->pds, req.handle);
      tp::QpInitAttr init;
      init.send_cq = Lookup(s->cqs, req.handle2);
      init.recv_cq = Lookup(s->cqs, req.handle3);
      init.srq =
          req.a != 0 ? Lookup(s->srqs, static_cast<uint32_t>(req.a)) : nullptr;
      init.cap = req.qp_cap;
      init.qp_type = static_cast<tp::QpType>(req.qp_type);
      init.sq_sig_all = req.sq_sig_all;
      if (pd == nullptr || init.send_cq == nullptr || init.recv_cq == nullptr ||
          (req.a != 0 && init.srq == nullptr)) {
        r = FromStatus(InvalidArgument("no such PD, CQ or SRQ"));
        break;
      }
      auto qp = pd->CreateQp(init);
      r = FromStatus(qp.status());
      if (!qp.ok()) break;
      s->qps[r.handle = Adopt(s)] = {*qp, -1};
      r.a = (*qp)->qp_num();
      tp::QpAttr attr;
      tp::QpInitAttr got;
      if ((*qp)->Query(&attr, &got).ok()) r.qp_cap = got.cap;
      break;
    }
    case Op::kModifyQp: {
      auto it = s->qps.find(req.handle);
      if (it == s->qps.end()) {
        r = FromStatus(InvalidArgument("no such QP"));
        break;
      }
      r = FromStatus(it->second.qp->Modify(req.qp_attr, req.mask));
      if (r.status == 0 && (req.mask & tp::kQpAv)) {
        it->second.remote_node =
            NodeOfGid(daemon.fabric(), req.qp_attr.ah_attr.grh.dgid);
      }
      r.a = static_cast<uint64_t>(it->second.qp->state());
      break;
    }
    case Op::kQueryQp: {
      const SessionQp qp = Lookup(s->qps, req.handle);
      tp::QpAttr a;
      tp::QpInitAttr init;
      r = FromStatus(qp.qp ? qp.qp->Query(&a, &init)
                           : InvalidArgument("no such QP"));
      r.qp_attr = a;
      r.qp_cap = init.cap;
      break;
    }
    case Op::kDestroyQp: {
      const SessionQp qp = Lookup(s->qps, req.handle);
      r = FromStatus(qp.qp ? qp.qp->Destroy() : InvalidArgument("no such QP"));
      if (r.status == 0) s->qps.erase(req.handle);
      break;
    }
    case Op::kPostSend: {
      const SessionQp qp = Lookup(s->qps, req.handle);
      std::vector<tp::SendWr> wrs;
      std::vector<tp::Sge> sges;
      if (!ReadSendWrs(daemon, s, qp, req, tail, tail_bytes, &wrs, &sges,
                       why)) {
        return false;
      }
      const tp::SendWr* bad = nullptr;
      r = FromStatus(
          qp.qp ? qp.qp->PostSend(wrs.empty() ? nullptr : wrs.data(), &bad)
                : InvalidArgument("no such QP"));
      r.bad_index = bad ? static_cast<uint32_t>(bad - wrs.data()) : 0;
      r.a = qp.qp ? static_cast<uint64_t>(qp.qp->state()) : 0;
      break;
    }
    case Op::kCreateAh: {
      tp::ProtectionDomain* pd = Lookup(s->pds, req.handle);
      if (pd == nullptr) {
        r = FromStatus(InvalidArgument("no such PD"));
        break;
      }
      r = Adopted(s, s->ahs, pd->CreateAh(req.ah_attr));
      break;
    }
    case Op::kDestroyAh:
      r = Destroyed(s->ahs, req.handle, "no such AH");
      break;
    case Op::kGetAsyncEvent: {
      tp::AsyncEvent e;
      r = FromStatus(dev->GetAsyncEvent(&e));
      r.event = e;
      SetAsyncEventFlag(s, dev->AsyncEventPending().value_or(true));
      break;
    }
    case Op::kScheduleWakeup:
      dev->ScheduleWakeup(req.a);
      break;
    default:
      *why = "sent an unknown operation " +
             std::to_string(static_cast<uint32_t>(op));
      return false;
  }
  r.now_ns = daemon.fabric().clock().NowNs();
  *out = MakeReply(op, r);
  return true;
}

}  // namespace softfab::simd::internal
