// Fuzz target: sf_* call sequences on a small simulated fabric. The input is
// a program: a header (seed, fault plan, CQ size, capabilities), then calls
// (sends and receives of every flavour with arbitrary flags, lengths, tags,
// masks, descriptors and addresses; cancel; CQ reads, blocking and not;
// setopt) on two nodes that each have an RDM endpoint knowing both names.
//
// Checked as it goes, not just "no crash":
// - a call that fails changed nothing: its context never shows up in a
//   completion;
// - every accepted operation completes exactly once (success, error or
//   cancel; a multi-recv buffer once with SF_MULTI_RECV) before the endpoints
//   close: at the end every node posts receives that take whatever is still
//   unexpected, cancels the receives left, and drives progress until all is
//   done;
// - no completion carries bytes that were not sent: every message of 8 bytes
//   or more starts with its send's id and continues with a pattern of it, a
//   shorter one is a pattern of its length; tags and CQ data match the send;
//   a receive buffer is not written past the bytes its completion reports;
//   no message is received twice, and every send that completed successfully
//   was received once (unless an FI_DISCARD may have taken it).
// Buffers are heap blocks of exactly the posted size, so ASan sees any access
// outside them; an inject's buffer is freed as soon as the call returns.
#include <sys/uio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "api/softfab/fabric.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/input_reader.h"

namespace {

// SOFTFAB_FUZZ_TRACE=1 prints every call and completion (to triage a
// finding: run the target on the input alone).
void Trace(const char* format, ...) __attribute__((format(printf, 1, 2)));
void Trace(const char* format, ...) {
  static const bool on = std::getenv("SOFTFAB_FUZZ_TRACE") != nullptr;
  if (!on) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}

constexpr int kNodes = 2;
constexpr size_t kOpsMax = 200;  // Calls one input makes at most.
// The end phase's budget, in simulated time: a send whose peer stopped
// answering fails within about two seconds (the connection's attempts, then
// the RC retry limit: 1.9 s in FUZZ_LOG's row 18), and the sends that wait
// behind it (a CQ of 4 may be held by three sends to the node itself and one
// such) end after it. Each round reads with a 1 ms timeout, so the clock
// moves while nothing happens; a round that does not move it returns a
// completion, and there are only so many of those. Draining takes at most
// kDrainNs, cancelling what is left at most kDrainNs more.
constexpr uint64_t kDrainNs = 10'000'000'000;
constexpr size_t kDrainBytes = 70000;
constexpr uint8_t kCanary = 0xEE;
// Message lengths around the protocol's edges (inject 256, eager 8192).
constexpr size_t kLengths[] = {0,   1,    7,    8,    9,    64,   255,   256,
                               257, 1000, 4096, 8191, 8192, 8193, 20000, 65536};

uint8_t Pattern(uint64_t id, size_t i) {
  return static_cast<uint8_t>(id * 131 + i * 7 + 1);
}

struct Message {  // What a send put on the wire.
  size_t len = 0;
  uint64_t tag = 0;
  uint64_t data = 0;
  bool has_data = false;
  bool tagged = false;
  int dest = 0;
  int received = 0;
  bool completed_ok = false;
  bool tracked = false;  // An operation with a completion (not an inject).
  // FI_INJECT_COMPLETE: success only says the buffer was copied; a delivery
  // failing later has nobody to report to.
  bool inject_complete = false;
};

struct Op {
  enum Kind { kSend, kRecv, kMultiRecv, kPeek } kind = kSend;
  int node = 0;
  bool pending = false;
  // FI_INJECT through sendmsg without FI_COMPLETION: success writes no entry,
  // an error still does (errors are always reported).
  bool silent = false;
  bool rejected = false;
  bool tagged = false;
  uint64_t msg_id = 0;  // kSend.
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<iovec> iov;
  sf_mr* mr = nullptr;  // Registration of bufs[0], when a descriptor is used.
};

class Program {
 public:
  explicit Program(softfab::fuzz::InputReader& in) : in_(in) {}
  ~Program() { Close(); }

  bool Open();
  void Step();
  void Finish();

 private:
  struct Node {
    sf_domain* domain = nullptr;
    sf_cq* cq = nullptr;
    sf_av* av = nullptr;
    sf_ep* ep = nullptr;
    sf_addr_t addr[kNodes + 1] = {};
  };

  Op* NewOp(Op::Kind kind, int node) {
    ops_.push_back(std::make_unique<Op>());
    Op* op = ops_.back().get();
    op->kind = kind;
    op->node = node;
    return op;
  }
  size_t Length() {
    const uint8_t b = in_.U8();
    return b < 240 ? kLengths[b % std::size(kLengths)] : in_.Bits(2);
  }
  sf_addr_t Address(int node) {
    const uint8_t b = in_.U8() % 8;
    if (b < 5) return nodes_[node].addr[b % 2];
    if (b == 5) return SF_ADDR_UNSPEC;
    return b;  // Never inserted.
  }
  void* Desc(Op* op) {
    if (!(in_.U8() & 1) || op->bufs.empty() || op->bufs[0].empty()) {
      return nullptr;
    }
    const uint64_t access = SF_SEND | SF_RECV | SF_READ | SF_WRITE |
                            SF_REMOTE_READ | SF_REMOTE_WRITE;
    if (sf_mr_reg(nodes_[op->node].domain, op->bufs[0].data(),
                  op->bufs[0].size(), access, 0, 0, 0, &op->mr, nullptr) != 0) {
      op->mr = nullptr;
      return nullptr;
    }
    return sf_mr_desc(op->mr);
  }
  void Send(int node);
  void Recv(int node);
  void Cancel(int node);
  void Read(int node, int timeout_ms);
  void OnEntry(int node, void* context, uint64_t flags, size_t len, void* buf,
               uint64_t data, uint64_t tag, int err, size_t olen);
  void CheckPayload(const Op& op, void* buf, size_t len, bool whole,
                    uint64_t tag, uint64_t data, uint64_t flags);
  void Posted(Op* op, ssize_t rc);
  void Done(Op* op);
  // `trace`: name them (SOFTFAB_FUZZ_TRACE), for a failed check.
  bool AnyPending(bool sends_only, bool trace = false) const;
  uint64_t Now() const;  // The simulator's clock.
  void Close();

  softfab::fuzz::InputReader& in_;
  sf_fabric* fabric_ = nullptr;
  Node nodes_[kNodes];
  std::vector<std::unique_ptr<Op>> ops_;
  std::map<uint64_t, Message> sent_;
  uint64_t next_id_ = 1;
  uint64_t entries_ = 0;  // Completions seen (to tell quiet rounds).
  uint64_t entries_at_round_ = 0;
  uint64_t injects_ = 0;       // Accepted injects (each may report an error).
  bool discarded_ = false;     // An FI_DISCARD may have taken a message.
  bool unidentified_ = false;  // A message was received cut below its id.
};

bool Program::Open() {
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_SIM;
  fa.sim_nodes = kNodes;
  fa.sim_seed = in_.U8();
  const uint8_t faults = in_.U8();
  if (faults & 1) fa.sim_drop = 0.01;
  if (faults & 2) fa.sim_duplicate = 0.01;
  if (faults & 4) fa.sim_reorder = 0.02;
  const size_t cq_size = 4 + in_.U8() % 64;
  const uint8_t caps = in_.U8();
  if (sf_fabric_open(&fa, &fabric_, nullptr) != 0) return false;
  uint8_t names[kNodes * SF_NAME_BYTES];
  for (int i = 0; i < kNodes; ++i) {
    Node& n = nodes_[i];
    sf_cq_attr ca{};
    ca.size = cq_size;
    ca.format = SF_CQ_FORMAT_TAGGED;
    sf_ep_attr ea{};
    ea.type = SF_EP_RDM;
    ea.caps = SF_MSG | SF_TAGGED | ((caps & 1) ? SF_DIRECTED_RECV : 0);
    ea.tx_size = (caps & 2) ? 8 : 0;
    ea.rx_size = (caps & 4) ? 8 : 0;
    size_t len = SF_NAME_BYTES;
    FUZZ_CHECK(sf_domain_open(fabric_, i, &n.domain, nullptr) == 0);
    FUZZ_CHECK(sf_cq_open(n.domain, &ca, &n.cq, nullptr) == 0);
    FUZZ_CHECK(sf_av_open(n.domain, nullptr, &n.av, nullptr) == 0);
    FUZZ_CHECK(sf_endpoint(n.domain, &ea, &n.ep, nullptr) == 0);
    FUZZ_CHECK(sf_ep_bind(n.ep, &n.cq->fid, SF_TRANSMIT | SF_RECV) == 0);
    FUZZ_CHECK(sf_ep_bind(n.ep, &n.av->fid, 0) == 0);
    FUZZ_CHECK(sf_enable(n.ep) == 0);
    FUZZ_CHECK(sf_getname(&n.ep->fid, names + i * SF_NAME_BYTES, &len) == 0);
  }
  for (Node& n : nodes_) {
    FUZZ_CHECK(sf_av_insert(n.av, names, kNodes, n.addr, 0, nullptr) == kNodes);
  }
  return true;
}

void Program::Posted(Op* op, ssize_t rc) {
  if (rc == 0) {
    op->pending = true;
  } else {
    FUZZ_CHECK(rc < 0);
    op->rejected = true;
    if (op->kind == Op::kSend) sent_.erase(op->msg_id);
  }
}

void Program::Send(int node) {
  const uint8_t kind = in_.U8() % 12;
  const bool tagged = kind >= 6;
  const size_t len = Length();
  const sf_addr_t dest = Address(node);
  const uint64_t tag = in_.U8() % 4 == 0 ? in_.Bits(8) : in_.U8() % 4;
  const uint64_t id = next_id_++;
  Message& m = sent_[id];
  m.len = len;
  m.tag = tag;
  m.tagged = tagged;
  m.dest = dest == nodes_[node].addr[0] ? 0 : 1;
  m.data = id * 1000003;
  Op* op = NewOp(Op::kSend, node);
  op->msg_id = id;
  op->tagged = tagged;
  // Up to 5 iovecs (one more than allowed): the bytes split among them.
  const size_t iovs = (kind % 6 == 1) ? 1 + in_.U8() % 5 : 1;
  size_t left = len;
  for (size_t i = 0; i < iovs; ++i) {
    const size_t n = i + 1 == iovs ? left : std::min(left, Length());
    op->bufs.emplace_back(n);
    left -= n;
  }
  size_t at = 0;
  for (auto& b : op->bufs) {
    for (uint8_t& byte : b) {
      byte = len >= 8 ? (at < 8 ? static_cast<uint8_t>(id >> (8 * at))
                                : Pattern(id, at))
                      : Pattern(0, at);
      ++at;
    }
    op->iov.push_back({b.data(), b.size()});
  }
  void* desc = Desc(op);
  void* descs[5] = {desc, nullptr, nullptr, nullptr, nullptr};
  sf_ep* ep = nodes_[node].ep;
  const iovec* iov = op->iov.data();
  uint64_t flags = 0;
  static constexpr uint64_t kFlagChoices[] = {SF_COMPLETION,
                                              SF_INJECT,
                                              SF_INJECT_COMPLETE,
                                              SF_TRANSMIT_COMPLETE,
                                              SF_DELIVERY_COMPLETE,
                                              SF_MATCH_COMPLETE,
                                              SF_FENCE,
                                              SF_REMOTE_CQ_DATA,
                                              SF_MORE};
  const uint8_t fbits = in_.U8();
  for (size_t b = 0; b < std::size(kFlagChoices); ++b) {
    if (fbits & (1u << b) && (b < 7 || in_.U8() & 1)) flags |= kFlagChoices[b];
  }
  if (fbits == 0xFF) flags |= uint64_t{1} << (in_.U8() % 64);  // Anything.
  ssize_t rc = 0;
  const bool inject = kind % 6 == 3 || kind % 6 == 5;
  switch (kind % 6) {
    case 0:
      rc = tagged ? sf_tsend(ep, iov[0].iov_base, len, desc, dest, tag, op)
                  : sf_send(ep, iov[0].iov_base, len, desc, dest, op);
      break;
    case 1:
      rc = tagged ? sf_tsendv(ep, iov, descs, iovs, dest, tag, op)
                  : sf_sendv(ep, iov, descs, iovs, dest, op);
      break;
    case 2: {
      if (flags & SF_REMOTE_CQ_DATA) m.has_data = true;
      if (tagged) {
        sf_msg_tagged msg{iov, descs, 1, dest, tag, 0, op, m.data};
        rc = sf_tsendmsg(ep, &msg, flags);
      } else {
        sf_msg msg{iov, descs, 1, dest, op, m.data};
        rc = sf_sendmsg(ep, &msg, flags);
      }
      break;
    }
    case 3:
      rc = tagged ? sf_tinject(ep, iov[0].iov_base, len, dest, tag)
                  : sf_inject(ep, iov[0].iov_base, len, dest);
      break;
    case 4:
      m.has_data = true;
      rc = tagged
               ? sf_tsenddata(ep, iov[0].iov_base, len, desc, m.data, dest, tag,
                              op)
               : sf_senddata(ep, iov[0].iov_base, len, desc, m.data, dest, op);
      break;
    case 5:
      m.has_data = true;
      rc = tagged ? sf_tinjectdata(ep, iov[0].iov_base, len, m.data, dest, tag)
                  : sf_injectdata(ep, iov[0].iov_base, len, m.data, dest);
      break;
  }
  if (inject) {
    Trace("node %d inject%d id %llu len %zu dest %llu: %zd\n", node, kind,
          static_cast<unsigned long long>(id), len,
          static_cast<unsigned long long>(dest), rc);
    // No completion (only an error entry, with no context): the buffer is
    // the caller's again at once.
    if (rc == 0) {
      ++injects_;
      m.tracked = false;
      op->bufs.clear();
      op->iov.clear();
    } else {
      sent_.erase(id);
    }
    op->rejected = true;  // Its context (op) must never be reported.
    return;
  }
  op->silent = kind % 6 == 2 && (flags & SF_INJECT) &&
               !(flags & (SF_COMPLETION | SF_INJECT_COMPLETE));
  m.tracked = !op->silent;
  m.inject_complete = kind % 6 == 2 && (flags & SF_INJECT_COMPLETE);
  Trace("node %d send%d id %llu len %zu dest %llu tag %llu flags %llx: %zd\n",
        node, kind, static_cast<unsigned long long>(id), len,
        static_cast<unsigned long long>(dest),
        static_cast<unsigned long long>(tag),
        static_cast<unsigned long long>(flags), rc);
  Posted(op, rc);
}

void Program::Recv(int node) {
  const uint8_t kind = in_.U8() % 8;
  const bool tagged = kind >= 4;
  const sf_addr_t src = Address(node);
  const uint64_t tag = in_.U8() % 4 == 0 ? in_.Bits(8) : in_.U8() % 4;
  const uint64_t ignore = in_.U8() % 4 == 0 ? in_.Bits(8) : 0;
  uint64_t flags = 0;
  const uint8_t fbits = in_.U8();
  if (fbits & 1) flags |= SF_MULTI_RECV;
  if (fbits & 2) flags |= SF_PEEK;
  if (fbits & 4) flags |= SF_DISCARD;
  if (fbits & 8) flags |= SF_COMPLETION;
  if (fbits == 0xFF) flags |= uint64_t{1} << (in_.U8() % 64);
  const bool msg_call = kind % 4 == 2;
  Op* op = NewOp(!msg_call                 ? Op::kRecv
                 : (flags & SF_PEEK)       ? Op::kPeek
                 : (flags & SF_MULTI_RECV) ? Op::kMultiRecv
                                           : Op::kRecv,
                 node);
  op->tagged = tagged;
  const size_t iovs = kind % 4 == 1 ? 1 + in_.U8() % 5 : 1;
  for (size_t i = 0; i < iovs; ++i) {
    op->bufs.emplace_back(Length(), kCanary);
    op->iov.push_back({op->bufs.back().data(), op->bufs.back().size()});
  }
  void* desc = Desc(op);
  void* descs[5] = {desc, nullptr, nullptr, nullptr, nullptr};
  sf_ep* ep = nodes_[node].ep;
  const iovec* iov = op->iov.data();
  ssize_t rc = 0;
  switch (kind % 4) {
    case 0:
    case 3:
      rc = tagged ? sf_trecv(ep, iov[0].iov_base, iov[0].iov_len, desc, src,
                             tag, ignore, op)
                  : sf_recv(ep, iov[0].iov_base, iov[0].iov_len, desc, src, op);
      break;
    case 1:
      rc = tagged ? sf_trecvv(ep, iov, descs, iovs, src, tag, ignore, op)
                  : sf_recvv(ep, iov, descs, iovs, src, op);
      break;
    case 2:
      if (tagged) {
        sf_msg_tagged msg{iov, descs, 1, src, tag, ignore, op, 0};
        rc = sf_trecvmsg(ep, &msg, flags);
      } else {
        sf_msg msg{iov, descs, 1, src, op, 0};
        rc = sf_recvmsg(ep, &msg, flags);
      }
      break;
  }
  Trace("node %d recv%d op %p len %zu src %llu tag %llu/%llx flags %llx: %zd\n",
        node, kind, static_cast<void*>(op), iovs > 0 ? op->bufs[0].size() : 0,
        static_cast<unsigned long long>(src),
        static_cast<unsigned long long>(tag),
        static_cast<unsigned long long>(ignore),
        static_cast<unsigned long long>(flags), rc);
  Posted(op, rc);
  if (rc == 0 && (flags & SF_DISCARD)) discarded_ = true;
}

void Program::Cancel(int node) {
  std::vector<Op*> pending;
  for (auto& op : ops_) {
    if (op->pending && op->node == node) pending.push_back(op.get());
  }
  void* context =
      pending.empty() ? nullptr : pending[in_.U8() % pending.size()];
  const ssize_t rc = sf_cancel(&nodes_[node].ep->fid, context);
  Trace("node %d cancel %p: %zd\n", node, context, rc);
  FUZZ_CHECK(rc == 0 || rc == -SF_ENOENT || rc == -SF_EINVAL);
}

void Program::CheckPayload(const Op& op, void* buf, size_t len, bool whole,
                           uint64_t tag, uint64_t data, uint64_t flags) {
  // The bytes delivered, gathered from where they landed.
  std::vector<uint8_t> got;
  if (op.kind == Op::kMultiRecv) {
    const uint8_t* b = static_cast<const uint8_t*>(buf);
    const uint8_t* start = op.bufs[0].data();
    FUZZ_CHECK(len == 0 ||
               (b >= start && b + len <= start + op.bufs[0].size()));
    if (len) got.assign(b, b + len);
  } else {
    size_t left = len;
    for (const auto& b : op.bufs) {
      const size_t n = std::min(left, b.size());
      got.insert(got.end(), b.begin(), b.begin() + n);
      // Nothing written past what the completion reports.
      for (size_t i = n; i < b.size(); ++i) FUZZ_CHECK(b[i] == kCanary);
      left -= n;
    }
    FUZZ_CHECK(left == 0);
  }
  if (len < 8) {
    if (whole) {
      for (size_t i = 0; i < len; ++i) FUZZ_CHECK(got[i] == Pattern(0, i));
    }
    return;
  }
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id |= uint64_t{got[i]} << (8 * i);
  auto it = sent_.find(id);
  FUZZ_CHECK(it != sent_.end());  // Bytes no send carried.
  Message& m = it->second;
  FUZZ_CHECK(m.dest == op.node);
  FUZZ_CHECK(whole ? len == m.len : len <= m.len);
  for (size_t i = 8; i < len; ++i) FUZZ_CHECK(got[i] == Pattern(id, i));
  FUZZ_CHECK(m.tagged == op.tagged);
  if (m.tagged) FUZZ_CHECK(tag == m.tag);
  if (flags & SF_REMOTE_CQ_DATA) FUZZ_CHECK(m.has_data && data == m.data);
  FUZZ_CHECK(++m.received == 1);  // Exactly once.
}

void Program::Done(Op* op) {
  op->pending = false;
  if (op->mr) FUZZ_CHECK(sf_close(&op->mr->fid) == 0);
  op->mr = nullptr;
  op->bufs.clear();
  op->iov.clear();
}

void Program::OnEntry(int node, void* context, uint64_t flags, size_t len,
                      void* buf, uint64_t data, uint64_t tag, int err,
                      size_t olen) {
  Op* op = static_cast<Op*>(context);
  ++entries_;
  Trace("%llu ns: node %d entry %p flags %llx len %zu err %d olen %zu\n",
        static_cast<unsigned long long>(Now()), node, context,
        static_cast<unsigned long long>(flags), len, err, olen);
  if (op == nullptr) {  // A failed inject.
    FUZZ_CHECK(err != 0 && (flags & SF_SEND) && injects_ > 0);
    --injects_;
    return;
  }
  bool known = false;
  for (auto& o : ops_) known |= o.get() == op;
  FUZZ_CHECK(known);          // A context no call gave.
  FUZZ_CHECK(!op->rejected);  // A failed call's operation completed.
  FUZZ_CHECK(op->pending);    // Completed twice.
  FUZZ_CHECK(op->node == node);
  if (op->kind == Op::kSend) {
    FUZZ_CHECK(flags & SF_SEND);
    FUZZ_CHECK(!op->silent || err != 0);
    if (err == 0) sent_[op->msg_id].completed_ok = true;
    Done(op);
    return;
  }
  FUZZ_CHECK(flags & SF_RECV);
  if (op->kind == Op::kPeek) {
    FUZZ_CHECK(err == 0 || err == SF_ENOMSG || err == SF_ECANCELED);
    Done(op);
    return;
  }
  if (err == 0 || err == SF_ETRUNC) {
    // A message cut below its 8-byte id cannot be told apart.
    if (err == SF_ETRUNC && len < 8 && len + olen >= 8) unidentified_ = true;
    CheckPayload(*op, buf, len, err == 0, tag, data, flags);
    if (err == SF_ETRUNC) FUZZ_CHECK(olen > 0);
  } else {
    FUZZ_CHECK(err == SF_ECANCELED || err == SF_EIO);
  }
  // A multi-recv buffer ends with the entry that carries SF_MULTI_RECV (a
  // cancel's too); a message truncated into it is an entry of its own.
  if (op->kind != Op::kMultiRecv || (flags & SF_MULTI_RECV)) {
    Done(op);
  }
}

void Program::Read(int node, int timeout_ms) {
  sf_cq_tagged_entry e[4];
  const size_t count = 1 + in_.U8() % 4;
  for (int guard = 0; guard < 64; ++guard) {
    const ssize_t n = timeout_ms < 0 ? sf_cq_read(nodes_[node].cq, e, count)
                                     : sf_cq_sread(nodes_[node].cq, e, count,
                                                   nullptr, timeout_ms);
    if (n == -SF_EAVAIL) {
      sf_cq_err_entry err{};
      FUZZ_CHECK(sf_cq_readerr(nodes_[node].cq, &err, 0) > 0);
      Trace("node %d error entry: prov_errno %d\n", node, err.prov_errno);
      OnEntry(node, err.op_context, err.flags, err.len, err.buf, err.data,
              err.tag, err.err, err.olen);
      continue;
    }
    if (n <= 0) {
      FUZZ_CHECK(n == -SF_EAGAIN || n == -SF_ETIMEDOUT);
      return;
    }
    FUZZ_CHECK(static_cast<size_t>(n) <= count);
    for (ssize_t i = 0; i < n; ++i) {
      OnEntry(node, e[i].op_context, e[i].flags, e[i].len, e[i].buf, e[i].data,
              e[i].tag, 0, 0);
    }
    if (timeout_ms >= 0) return;
  }
}

void Program::Step() {
  const uint8_t b = in_.U8();
  const int node = b & 1;
  switch ((b >> 1) % 8) {
    case 0:
    case 1:
      Send(node);
      break;
    case 2:
    case 3:
      Recv(node);
      break;
    case 4:
      Cancel(node);
      break;
    case 5:
      Read(node, -1);
      break;
    case 6:
      Read(node, in_.U8() % 3);
      break;
    case 7: {
      const size_t v = in_.U8() % 2 ? in_.Bits(3) : in_.U8();
      const int rc = sf_setopt(&nodes_[node].ep->fid, SF_OPT_ENDPOINT,
                               SF_OPT_MIN_MULTI_RECV, &v, sizeof v);
      FUZZ_CHECK(rc == 0 || rc == -SF_EINVAL);
      break;
    }
  }
}

bool Program::AnyPending(bool sends_only, bool trace) const {
  bool any = false;
  for (const auto& op : ops_) {
    if (op->pending && !op->silent && (!sends_only || op->kind == Op::kSend)) {
      any = true;
      if (!trace) break;
      Trace("pending: node %d %p kind %d id %llu\n", op->node,
            static_cast<void*>(op.get()), static_cast<int>(op->kind),
            static_cast<unsigned long long>(op->msg_id));
    }
  }
  return any;
}

uint64_t Program::Now() const {
  uint64_t now = 0;
  FUZZ_CHECK(sf_sim_now(fabric_, &now) == 0);
  return now;
}

void Program::Finish() {
  // Receives that take anything still unexpected, until every send is done
  // and a few rounds more (messages whose sends completed may still wait in
  // the receiver's queues).
  Op* drain[kNodes][2] = {};
  int first[kNodes] = {};  // Which catch-all a node posts first in a round.
  int after = 0;
  const uint64_t deadline = Now() + kDrainNs;
  while (after < 8 && Now() < deadline) {
    // Eight quiet rounds in a row (no send pending, nothing completed, the
    // catch-all receives posted) end it: one drain receive takes one
    // message per round, and cannot be posted while the CQ is held (also by
    // FI_INJECT sends that report nothing).
    bool drains_posted = true;
    for (auto& node_drains : drain) {
      for (Op* d : node_drains) drains_posted &= d != nullptr && d->pending;
    }
    after = !AnyPending(true) && drains_posted && entries_ == entries_at_round_
                ? after + 1
                : 0;
    entries_at_round_ = entries_;
    for (int node = 0; node < kNodes; ++node) {
      for (int k = 0; k < 2; ++k) {
        const int t = first[node] ^ k;
        if (drain[node][t] && drain[node][t]->pending) continue;
        Op* op = drain[node][t] = NewOp(Op::kRecv, node);
        op->tagged = t;
        op->bufs.emplace_back(kDrainBytes, kCanary);
        void* buf = op->bufs[0].data();
        const ssize_t rc =
            t ? sf_trecv(nodes_[node].ep, buf, kDrainBytes, nullptr,
                         SF_ADDR_UNSPEC, 0, ~uint64_t{0}, op)
              : sf_recv(nodes_[node].ep, buf, kDrainBytes, nullptr,
                        SF_ADDR_UNSPEC, op);
        Trace("node %d drain recv%d %p: %zd\n", node, t, static_cast<void*>(op),
              rc);
        Posted(op, rc);
        // A refused catch-all is tried anew next round: its buffer goes now,
        // or thousands of rounds of a held CQ would keep one each.
        if (rc != 0) std::vector<std::vector<uint8_t>>().swap(op->bufs);
        if (rc == -SF_EAGAIN) {
          // The program's own receives hold the CQ (or every receive slot):
          // cancel the oldest, as an application would, to make room.
          bool cancelled = false;
          for (auto& other : ops_) {
            if (other->pending && other->node == node &&
                other->kind != Op::kSend && other.get() != drain[node][0] &&
                other.get() != drain[node][1]) {
              (void)sf_cancel(&nodes_[node].ep->fid, other.get());
              cancelled = true;
              break;
            }
          }
          // None left: the other catch-all holds the last slot while what
          // waits needs this one (sends to itself, tagged, hold the rest of
          // the CQ until a tagged receive takes them). It steps aside, and
          // this one is posted first next round.
          Op* other = drain[node][1 - t];
          if (!cancelled && other != nullptr && other->pending) {
            (void)sf_cancel(&nodes_[node].ep->fid, other);
            first[node] = t;
          }
        }
      }
      Read(node, 1);
    }
  }
  // An accepted send never completed.
  FUZZ_CHECK(!AnyPending(true, /*trace=*/true));
  while (AnyPending(false) && Now() < deadline + kDrainNs) {
    for (int node = 0; node < kNodes; ++node) {
      for (auto& op : ops_) {
        if (op->pending && op->node == node) {
          (void)sf_cancel(&nodes_[node].ep->fid, op.get());
        }
      }
      Read(node, 1);
    }
  }
  // An accepted receive never completed.
  FUZZ_CHECK(!AnyPending(false, /*trace=*/true));
  for (const auto& [id, m] : sent_) {
    if (m.tracked && m.completed_ok && !m.inject_complete && m.len >= 8 &&
        !discarded_ && !unidentified_) {
      FUZZ_CHECK(m.received == 1);
    }
  }
}

void Program::Close() {
  for (Node& n : nodes_) {
    if (n.ep) FUZZ_CHECK(sf_close(&n.ep->fid) == 0);
  }
  for (auto& op : ops_) {
    if (op->mr) FUZZ_CHECK(sf_close(&op->mr->fid) == 0);
  }
  for (Node& n : nodes_) {
    if (n.av) FUZZ_CHECK(sf_close(&n.av->fid) == 0);
    if (n.cq) FUZZ_CHECK(sf_close(&n.cq->fid) == 0);
    if (n.domain) FUZZ_CHECK(sf_close(&n.domain->fid) == 0);
  }
  if (fabric_) FUZZ_CHECK(sf_close(&fabric_->fid) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  softfab::fuzz::InputReader in(data, size);
  Program program(in);
  if (!program.Open()) return 0;
  for (size_t i = 0; i < kOpsMax && !in.empty(); ++i) program.Step();
  program.Finish();
  return 0;
}
