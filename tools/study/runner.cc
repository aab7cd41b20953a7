// Runs one seed of a scenario over the sf_* API on the simulated fabric:
// opens a fabric from the scenario's SimConfig (api/sim/sim_api.h), one
// domain, address vector, CQ and endpoint(s) per node, then drives the
// workload's flows with a bounded window per flow, checking every completion
// as it is read. The histogram and throughput types are in
// seed_statistics.cc; payload patterns in flow_payload.h.
#include "tools/study/runner.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "api/sim/sim_api.h"
#include "api/softfab/fabric.h"
#include "backends/sim/sim_pcap.h"
#include "tools/study/flow_payload.h"
#include "tools/study/msg_wiring.h"

namespace softfab::study {

namespace {

constexpr size_t kReadBatch = 32;
constexpr uint32_t kTraceCapacity = 1u << 20;

// One operation's context (what op_context points at): a send or receive
// slot of a flow. `busy` while posted; a completion for a slot that is not
// busy is a second completion of one operation.
struct Slot {
  uint32_t flow = 0;
  uint32_t index = 0;
  bool is_send = false;
  bool busy = false;
  bool done = false;  // receive: completed, waiting for the window to pass
  uint64_t seq = 0;   // the message (send) or posting index (receive)
  std::vector<uint8_t> buf;
};

struct Flow {
  uint32_t id = 0;
  int32_t src = 0, dst = 0, ep = 0;
  sf_addr_t dest = 0;        // the receiver's endpoint, in the sender's AV
  sf_addr_t source = 0;      // the sender's endpoint, in the receiver's AV
  sf_ep* send_ep = nullptr;  // the sender's endpoint
  sf_ep* recv_ep = nullptr;  // where receives are posted (or the SRX)
  uint64_t sent_posted = 0;  // next seq to send
  uint64_t recv_posted = 0;  // next receive posting index
  uint64_t recv_low = 0;     // lowest receive index not yet completed
  uint64_t delivered = 0;    // receives completed with their message
  bool stopped = false;      // the sender failed: it posts no more
  std::vector<Slot> sends, recvs;
  std::vector<uint64_t> sent_ns;  // per send slot: when it was posted
  std::vector<uint64_t> phase;    // per send slot: the phase it was sent in
};

// A node's endpoints share its CQ (endpoints on one shared receive context
// must bind the same receive CQ).
struct Node {
  sf_domain* domain = nullptr;
  sf_av* av = nullptr;
  sf_cq* cq = nullptr;
  sf_ep* srx = nullptr;
  std::vector<sf_ep*> eps;
};

// The name of an error entry's prov_errno in the counters: a work
// completion's status, or a cause the device's asynchronous events name.
const char* CauseName(int status) {
  switch (status) {
    case SF_PROV_QP_FATAL:
      return "QP_FATAL";
    case SF_PROV_PORT_DOWN:
      return "PORT_DOWN";
    case SF_PROV_CQ_ERROR:
      return "CQ_ERROR";
    case SF_PROV_SRQ_ERROR:
      return "SRQ_ERROR";
    case SF_PROV_DEVICE_FATAL:
      return "DEVICE_FATAL";
    case 5:
      return "WR_FLUSH_ERR";
    case 12:
      return "RETRY_EXC_ERR";
    case 13:
      return "RNR_RETRY_EXC_ERR";
    case 10:
      return "REM_ACCESS_ERR";
    case 11:
      return "REM_OP_ERR";
    case 2:
      return "LOC_QP_OP_ERR";
    case 1:
      return "LOC_LEN_ERR";
    default:
      return nullptr;
  }
}

std::string ErrName(int err, int prov_errno) {
  std::string name;
  switch (err) {
    case SF_EIO:
      name = "EIO";
      break;
    case SF_ECANCELED:
      name = "ECANCELED";
      break;
    case SF_ETRUNC:
      name = "ETRUNC";
      break;
    case SF_EHOSTUNREACH:
      name = "EHOSTUNREACH";
      break;
    case SF_ECONNRESET:
      name = "ECONNRESET";
      break;
    case SF_ETIMEDOUT:
      name = "ETIMEDOUT";
      break;
    default:
      name = "E" + std::to_string(err);
  }
  if (const char* cause = CauseName(prov_errno)) {
    name += std::string("/") + cause;
  }
  return name;
}

// Ranks the outcomes an error can name: the root cause wins over what
// follows from it (a QP that exhausted its retries flushes the rest).
int OutcomeRank(const std::string& outcome) {
  static const char* const kOrder[] = {
      kOutcomeRetryExceeded, kOutcomeRnrRetryExceeded, kOutcomeTruncated,
      kOutcomeFlushed, kOutcomeErrorCompletion};
  for (int i = 0; i < 5; ++i) {
    if (outcome == kOrder[i]) return i;
  }
  return 99;
}

class SeedRun {
 public:
  SeedRun(const Scenario& s, const RunOptions& o) : s_(s), o_(o) {
    r_.seed = o.seed;
    r_.scenario = s.name;
    r_.expected = s.expect;
    r_.throughput.bucket_ns = s.throughput_bucket_ns;
    for (const Phase& p : s.phases) {
      LatencyHistogram h;
      h.phase = p.name;
      r_.latency.push_back(std::move(h));
    }
  }
  ~SeedRun() { Close(); }

  SeedResult Run();

 private:
  bool Setup();
  void BuildFlows();
  bool ConnectFlows(const sf_ep_attr& attr);  // SF_EP_MSG: one pair per flow
  bool PostWork();
  bool PostSends(Flow& f);
  bool PostRecvs(Flow& f);
  bool ReadCq(sf_cq* cq);
  // Whether node `node`'s application is paused now (Scenario::app_pauses).
  bool Paused(int32_t node) const {
    for (const AppPause& p : s_.app_pauses) {
      if (p.node == node && Now() >= p.start_ns && Now() < p.end_ns) {
        return true;
      }
    }
    return false;
  }
  // The end of the earliest pause in progress (UINT64_MAX: none), an instant
  // the run must stop at even when the fabric has nothing to do.
  uint64_t NextPauseEnd() const {
    uint64_t end = UINT64_MAX;
    for (const AppPause& p : s_.app_pauses) {
      if (Now() >= p.start_ns && Now() < p.end_ns)
        end = std::min(end, p.end_ns);
    }
    return end;
  }
  void OnSendDone(Slot& slot, bool ok);
  void OnRecv(Slot& slot, const sf_cq_tagged_entry& e);
  void OnError(const sf_cq_err_entry& e);
  bool Finished() const;
  bool AnyBusy() const;
  void CancelReceives();
  void Finish();
  void Close();
  // After a post: false when it was accepted; else the slot is free again,
  // the EAGAIN counted or the refusal noted, and the caller stops posting.
  bool Refused(ssize_t rc, Slot& slot, const char* op, const char* outcome);
  void Break(const char* invariant, std::string detail);
  void NoteError(const std::string& name, const std::string& outcome);
  uint64_t Now() const {
    uint64_t now = 0;
    (void)sf_sim_now(fabric_, &now);
    return now;
  }
  size_t PhaseAt(uint64_t t) const {
    size_t p = 0;
    while (p + 1 < s_.phases.size() && s_.phases[p + 1].start_ns <= t) ++p;
    return p;
  }

  const Scenario& s_;
  const RunOptions& o_;
  SeedResult r_;
  sf_fabric* fabric_ = nullptr;
  sim::SimFabric* sim_ = nullptr;
  std::vector<Node> nodes_;
  std::vector<MsgNode> msg_nodes_;  // SF_EP_MSG only
  std::vector<MsgPair> msg_pairs_;
  std::vector<Flow> flows_;
  std::unique_ptr<sim::PcapCapture> capture_;  // RunOptions::pcap_path
  std::string cause_;  // the outcome the errors so far name
  bool cancelling_ = false;
  bool idle_at_end_ = false;  // the run ended with nothing pending
  std::string setup_error_;   // why Setup failed, when not an sf_* call
};

bool SeedRun::Setup() {
  sim::SimConfig config = SimConfigFor(s_, o_.seed);
  if (!o_.trace_path.empty()) config.trace_capacity = kTraceCapacity;
  if (sf_sim_fabric_open(config, &fabric_, nullptr) != 0) return false;
  sim_ = sf_sim_fabric(fabric_);
  if (!o_.pcap_path.empty()) {
    std::string why;
    auto capture = sim::PcapCapture::Open(sim_, o_.pcap_path, &why);
    if (!capture.ok()) {
      setup_error_ = why;
      return false;
    }
    capture_ = std::move(*capture);
  }
  const Workload& w = s_.workload;
  const int32_t eps = w.endpoints_per_node;
  const size_t flows_per_ep = static_cast<size_t>(s_.topology.nodes);
  const size_t queue = std::max<size_t>(256, w.window * flows_per_ep * 2 + 16);
  uint64_t op_flags = 0;
  switch (w.completion) {
    case CompletionLevel::kTransmit:
      break;
    case CompletionLevel::kInject:
      op_flags = SF_INJECT_COMPLETE;
      break;
    case CompletionLevel::kDelivery:
      op_flags = SF_DELIVERY_COMPLETE;
      break;
    case CompletionLevel::kMatch:
      op_flags = SF_MATCH_COMPLETE;
      break;
  }
  sf_ep_attr attr{};
  attr.type = SF_EP_RDM;
  attr.caps = SF_MSG | SF_TAGGED | SF_DIRECTED_RECV;
  attr.op_flags = op_flags;
  attr.tx_size = queue;
  attr.rx_size = queue;
  nodes_.resize(s_.topology.nodes);
  std::vector<uint8_t> names;
  for (int32_t i = 0; i < s_.topology.nodes; ++i) {
    Node& n = nodes_[i];
    if (sf_domain_open(fabric_, i, &n.domain, nullptr) != 0) return false;
    sf_sim_ep_tuning tuning{w.rc_timeout, w.credits, /*rc_retry_count=*/0};
    if (sf_sim_domain_tune(n.domain, tuning) != 0) return false;
    sf_av_attr av_attr{};
    av_attr.count = static_cast<size_t>(s_.topology.nodes) * eps;
    if (sf_av_open(n.domain, &av_attr, &n.av, nullptr) != 0) return false;
    if (w.srq_depth > 0) {
      sf_rx_attr rx{};
      rx.caps = SF_DIRECTED_RECV;
      rx.size = w.srq_depth;
      if (sf_srx_context(n.domain, &rx, &n.srx, nullptr) != 0) return false;
    }
    sf_cq_attr cq_attr{};
    cq_attr.size = queue * 4 * eps;
    cq_attr.format = SF_CQ_FORMAT_TAGGED;
    if (sf_cq_open(n.domain, &cq_attr, &n.cq, nullptr) != 0) return false;
    if (w.ep == EndpointKind::kMsg) continue;  // connected per flow, below
    for (int32_t e = 0; e < eps; ++e) {
      sf_ep* ep = nullptr;
      if (sf_endpoint(n.domain, &attr, &ep, nullptr) != 0) return false;
      n.eps.push_back(ep);
      if (sf_ep_bind(ep, &n.cq->fid, SF_SEND | SF_RECV) != 0 ||
          sf_ep_bind(ep, &n.av->fid, 0) != 0 ||
          (n.srx && sf_ep_bind(ep, &n.srx->fid, 0) != 0) ||
          sf_enable(ep) != 0) {
        return false;
      }
      uint8_t name[SF_NAME_BYTES];
      size_t len = sizeof name;
      if (sf_getname(&ep->fid, name, &len) != 0) return false;
      names.insert(names.end(), name, name + SF_NAME_BYTES);
    }
  }
  // Every AV holds every endpoint, node-major: address = node * eps + e.
  const size_t count = names.size() / SF_NAME_BYTES;
  std::vector<sf_addr_t> addrs(count);
  for (Node& n : nodes_) {
    if (sf_av_insert(n.av, names.data(), count, addrs.data(), 0, nullptr) !=
        static_cast<int>(count)) {
      return false;
    }
  }
  BuildFlows();
  if (w.ep == EndpointKind::kMsg) return ConnectFlows(attr);
  for (Flow& f : flows_) {
    f.send_ep = nodes_[f.src].eps[f.ep];
    const Node& n = nodes_[f.dst];
    f.recv_ep = n.srx ? n.srx : n.eps[f.ep];
  }
  return true;
}

bool SeedRun::ConnectFlows(const sf_ep_attr& attr) {
  msg_nodes_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    msg_nodes_[i].domain = nodes_[i].domain;
    msg_nodes_[i].cq = nodes_[i].cq;
  }
  for (const Flow& f : flows_) {
    MsgPair p;
    p.flow = f.id;
    p.src = f.src;
    p.dst = f.dst;
    msg_pairs_.push_back(p);
  }
  setup_error_ = ConnectMsgPairs(fabric_, attr, s_.workload.deadline_ns,
                                 &msg_nodes_, &msg_pairs_);
  if (!setup_error_.empty()) return false;
  for (Flow& f : flows_) {
    f.send_ep = msg_pairs_[f.id].send_ep;
    f.recv_ep = msg_pairs_[f.id].recv_ep;
    f.dest = 0;  // a connected endpoint has one peer
    f.source = SF_ADDR_UNSPEC;
  }
  return true;
}

void SeedRun::BuildFlows() {
  const Workload& w = s_.workload;
  const int32_t nodes = s_.topology.nodes;
  const int32_t eps = w.endpoints_per_node;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  switch (w.kind) {
    case WorkloadKind::kPingPong:
      pairs = {{0, 1}, {1, 0}};
      break;
    case WorkloadKind::kStream:
      pairs = {{0, 1}};
      break;
    case WorkloadKind::kAllToAll:
      for (int32_t a = 0; a < nodes; ++a) {
        for (int32_t b = 0; b < nodes; ++b) {
          if (a != b) pairs.push_back({a, b});
        }
      }
      break;
    case WorkloadKind::kIncast:
      for (int32_t a = 0; a < nodes; ++a) {
        if (a != w.target) pairs.push_back({a, w.target});
      }
      break;
  }
  const uint32_t window = w.kind == WorkloadKind::kPingPong ? 1 : w.window;
  const uint64_t max_bytes = MaxMessageBytes(w.sizes);
  for (int32_t e = 0; e < eps; ++e) {
    for (const auto& [a, b] : pairs) {
      Flow f;
      f.id = static_cast<uint32_t>(flows_.size());
      f.src = a;
      f.dst = b;
      f.ep = e;
      f.dest = static_cast<sf_addr_t>(b) * eps + e;
      f.source = static_cast<sf_addr_t>(a) * eps + e;
      f.sends.resize(window);
      f.recvs.resize(window);
      f.sent_ns.assign(window, 0);
      f.phase.assign(window, 0);
      for (uint32_t i = 0; i < window; ++i) {
        f.sends[i] = {f.id, i, true, false, false, 0, {}};
        f.sends[i].buf.resize(max_bytes);
        f.recvs[i] = {f.id, i, false, false, false, 0, {}};
        f.recvs[i].buf.resize(max_bytes);
      }
      flows_.push_back(std::move(f));
    }
  }
}

bool SeedRun::PostRecvs(Flow& f) {
  bool posted = false;
  const uint32_t window = static_cast<uint32_t>(f.recvs.size());
  while (f.recv_posted < s_.workload.messages &&
         f.recv_posted < f.recv_low + window) {
    Slot& slot = f.recvs[f.recv_posted % window];
    if (slot.busy || slot.done) break;
    slot.seq = f.recv_posted;
    slot.busy = true;
    ssize_t rc;
    if (s_.workload.api == ApiKind::kTagged) {
      rc = sf_trecv(f.recv_ep, slot.buf.data(), slot.buf.size(), nullptr,
                    f.source, f.id, 0, &slot);
    } else {
      rc = sf_recv(f.recv_ep, slot.buf.data(), slot.buf.size(), nullptr,
                   f.source, &slot);
    }
    if (Refused(rc, slot, "post_recv", kOutcomeErrorCompletion)) break;
    ++f.recv_posted;
    posted = true;
  }
  return posted;
}

bool SeedRun::PostSends(Flow& f) {
  const Workload& w = s_.workload;
  bool posted = false;
  const uint32_t window = static_cast<uint32_t>(f.sends.size());
  while (!f.stopped && f.sent_posted < w.messages &&
         f.sent_posted < f.recv_low + window) {
    // Ping-pong: node 1 answers message k once it has it; node 0 sends
    // message k once the answer to k - 1 is back.
    if (w.kind == WorkloadKind::kPingPong) {
      const Flow& other = flows_[f.id ^ 1];
      const uint64_t need = f.src == 0 ? f.sent_posted : f.sent_posted + 1;
      if (other.delivered < need) break;
    }
    const uint64_t seq = f.sent_posted;
    Slot& slot = f.sends[seq % window];
    if (slot.busy) break;
    const uint64_t len = MessageBytes(w.sizes, o_.seed, f.id, seq);
    FillPayload(o_.seed, f.id, seq, slot.buf.data(), len);
    slot.seq = seq;
    slot.busy = true;
    const uint64_t data = CqData(f.id, seq);
    ssize_t rc;
    if (w.api == ApiKind::kTagged) {
      rc = sf_tsenddata(f.send_ep, slot.buf.data(), len, nullptr, data, f.dest,
                        f.id, &slot);
    } else {
      rc = sf_senddata(f.send_ep, slot.buf.data(), len, nullptr, data, f.dest,
                       &slot);
    }
    if (Refused(rc, slot, "post_send", kOutcomeFlushed)) {
      // Other than EAGAIN: the connection failed before (a post to a failed
      // peer), and the flow stops.
      if (rc != -SF_EAGAIN) f.stopped = true;
      break;
    }
    const uint64_t now = Now();
    f.sent_ns[seq % window] = now;
    f.phase[seq % window] = PhaseAt(now);
    ++f.sent_posted;
    ++r_.counts.messages_posted;
    posted = true;
  }
  return posted;
}

bool SeedRun::PostWork() {
  bool any = false;
  if (cancelling_) return false;  // the run is ending: nothing new
  for (Flow& f : flows_) {
    if (!Paused(f.dst)) any |= PostRecvs(f);
  }
  for (Flow& f : flows_) {
    if (!Paused(f.src)) any |= PostSends(f);
  }
  return any;
}

bool SeedRun::Refused(ssize_t rc, Slot& slot, const char* op,
                      const char* outcome) {
  if (rc == 0) return false;
  slot.busy = false;
  if (rc == -SF_EAGAIN) {
    ++r_.counts.eagain;
  } else {
    NoteError(std::string(op) + ":" + ErrName(static_cast<int>(-rc), 0),
              outcome);
  }
  return true;
}

void SeedRun::Break(const char* invariant, std::string detail) {
  if (!r_.invariant.empty()) return;  // the first one explains the rest
  r_.invariant = invariant;
  r_.invariant_detail = std::move(detail);
}

void SeedRun::NoteError(const std::string& name, const std::string& outcome) {
  ++r_.counts.errors[name];
  if (cause_.empty() || OutcomeRank(outcome) < OutcomeRank(cause_)) {
    cause_ = outcome;
  }
}

void SeedRun::OnSendDone(Slot& slot, bool ok) {
  Flow& f = flows_[slot.flow];
  slot.busy = false;
  if (ok) {
    ++r_.counts.messages_sent;
  } else {
    f.stopped = true;
  }
}

void SeedRun::OnRecv(Slot& slot, const sf_cq_tagged_entry& e) {
  Flow& f = flows_[slot.flow];
  const uint32_t window = static_cast<uint32_t>(f.recvs.size());
  slot.busy = false;
  slot.done = true;
  const uint32_t flow = CqDataFlow(e.data);
  const uint64_t seq = CqDataSeq(e.data);
  char where[160];
  std::snprintf(where, sizeof where,
                "flow %u (node %d -> node %d), receive #%llu", f.id, f.src,
                f.dst, static_cast<unsigned long long>(slot.seq));
  if (!(e.flags & SF_REMOTE_CQ_DATA) || flow != f.id) {
    Break("exactly_once", std::string(where) +
                              " got a message of another flow or without "
                              "its CQ data");
  } else if (seq < slot.seq) {
    Break("exactly_once", std::string(where) + " got message " +
                              std::to_string(seq) + " a second time");
  } else if (seq > slot.seq) {
    Break("order", std::string(where) + " got message " + std::to_string(seq) +
                       " before message " + std::to_string(slot.seq));
  } else if (e.len != MessageBytes(s_.workload.sizes, o_.seed, f.id, seq) ||
             !CheckPayload(o_.seed, f.id, seq, slot.buf.data(), e.len)) {
    Break("bytes", std::string(where) + " (message " + std::to_string(seq) +
                       ", " + std::to_string(e.len) +
                       " bytes) has wrong length or bytes");
  } else if (s_.workload.api == ApiKind::kTagged && e.tag != f.id) {
    Break("bytes", std::string(where) + " reports the wrong tag");
  }
  ++f.delivered;
  ++r_.counts.messages_delivered;
  r_.counts.bytes_delivered += e.len;
  const uint64_t now = Now();
  r_.throughput.Add(now, e.len);
  const uint32_t at = static_cast<uint32_t>(seq % window);
  if (seq < f.sent_posted) {
    r_.latency[f.phase[at]].Add(now - f.sent_ns[at]);
  }
  while (f.recv_low < f.recv_posted && f.recvs[f.recv_low % window].done) {
    f.recvs[f.recv_low % window].done = false;
    ++f.recv_low;
  }
}

void SeedRun::OnError(const sf_cq_err_entry& e) {
  Slot* slot = static_cast<Slot*>(e.op_context);
  const std::string name = ErrName(e.err, e.prov_errno);
  if (slot == nullptr || !slot->busy) {
    Break("completion_once", "an error completion (" + name +
                                 ") for an operation that was not outstanding");
    ++r_.counts.errors[name];
    return;
  }
  const bool cancel = e.err == SF_ECANCELED;
  // A QP the device failed (QP_FATAL) flushes everything on it; the entries
  // name the failure rather than the flush (WR_FLUSH_ERR, 5).
  const bool qp_fatal = e.prov_errno == SF_PROV_QP_FATAL;
  if (cancel || e.prov_errno == 5 || qp_fatal) ++r_.counts.flushes;
  if (!cancel || !cancelling_) {
    std::string outcome = kOutcomeErrorCompletion;
    // A port down names itself where the retries ran out because of it.
    if (e.prov_errno == 12 || e.prov_errno == SF_PROV_PORT_DOWN) {
      outcome = kOutcomeRetryExceeded;
    }
    if (e.prov_errno == 13) outcome = kOutcomeRnrRetryExceeded;
    if (e.err == SF_ETRUNC) outcome = kOutcomeTruncated;
    if (e.prov_errno == 5 || qp_fatal ||
        (e.err == SF_EIO && e.prov_errno == 0) || e.err == SF_EHOSTUNREACH ||
        e.err == SF_ECONNRESET) {
      outcome = kOutcomeFlushed;
    }
    NoteError(name, outcome);
  } else {
    ++r_.counts.errors[name];
  }
  if (slot->is_send) {
    OnSendDone(*slot, false);
    return;
  }
  Flow& f = flows_[slot->flow];
  const uint32_t window = static_cast<uint32_t>(f.recvs.size());
  slot->busy = false;
  slot->done = true;
  while (f.recv_low < f.recv_posted && f.recvs[f.recv_low % window].done) {
    f.recvs[f.recv_low % window].done = false;
    ++f.recv_low;
  }
}

bool SeedRun::ReadCq(sf_cq* cq) {
  sf_cq_tagged_entry entries[kReadBatch];
  bool any = false;
  while (true) {
    const ssize_t n = sf_cq_read(cq, entries, kReadBatch);
    if (n == -SF_EAVAIL) {
      sf_cq_err_entry e{};
      if (sf_cq_readerr(cq, &e, 0) == 1) OnError(e);
      any = true;
      continue;
    }
    if (n <= 0) return any;
    any = true;
    for (ssize_t i = 0; i < n; ++i) {
      Slot* slot = static_cast<Slot*>(entries[i].op_context);
      if (slot == nullptr || !slot->busy) {
        Break("completion_once",
              "a completion for an operation that was not outstanding "
              "(completed twice, or never posted)");
        continue;
      }
      if (slot->is_send) {
        OnSendDone(*slot, true);
      } else {
        OnRecv(*slot, entries[i]);
      }
    }
  }
}

bool SeedRun::AnyBusy() const {
  for (const Flow& f : flows_) {
    for (const auto* slots : {&f.sends, &f.recvs}) {
      for (const Slot& slot : *slots) {
        if (slot.busy) return true;
      }
    }
  }
  return false;
}

bool SeedRun::Finished() const {
  for (const Flow& f : flows_) {
    for (const Slot& s : f.sends) {
      if (s.busy) return false;
    }
    if (!f.stopped && f.sent_posted < s_.workload.messages) return false;
    if (!f.stopped && f.recv_low < s_.workload.messages) return false;
  }
  return true;
}

void SeedRun::CancelReceives() {
  cancelling_ = true;
  for (Flow& f : flows_) {
    for (Slot& slot : f.recvs) {
      if (slot.busy) (void)sf_cancel(&f.recv_ep->fid, &slot);
    }
  }
}

void SeedRun::Finish() {
  r_.duration_ns = Now();
  (void)sf_sim_digest(fabric_, &r_.digest);
  const sim::SimStats st = sim_->stats();
  r_.counts.packets_sent = st.packets_sent;
  r_.counts.packets_dropped = st.packets_dropped;
  r_.counts.retransmissions = st.retransmits;
  r_.counts.rnr_naks = st.rnr_naks;
  r_.counts.events = st.events;
  for (const Flow& f : flows_) {
    for (const auto* slots : {&f.sends, &f.recvs}) {
      for (const Slot& slot : *slots) {
        if (!slot.busy) continue;
        // At the deadline an operation may still be under way (an RNR
        // storm retries forever): that is a stall, not a lost completion.
        if (!idle_at_end_) continue;
        Break("completion_lost",
              std::string(slot.is_send ? "send of message " : "receive #") +
                  std::to_string(slot.seq) + " of flow " +
                  std::to_string(f.id) + " (node " + std::to_string(f.src) +
                  " -> node " + std::to_string(f.dst) +
                  ") never completed, though the fabric went idle");
      }
    }
  }
  uint64_t all = 0;
  for (const Flow& f : flows_) all += f.delivered;
  if (!cause_.empty()) {
    r_.outcome = cause_;
  } else if (all < flows_.size() * s_.workload.messages) {
    r_.outcome = kOutcomeStalled;
  } else {
    r_.outcome = kOutcomeOk;
  }
  if (capture_ && !capture_->Close().ok()) ++r_.counts.errors["pcap_write"];
  if (!o_.trace_path.empty()) {
    if (std::FILE* out = std::fopen(o_.trace_path.c_str(), "w")) {
      std::fprintf(out, "# time_ns seq kind node qp psn opcode\n");
      for (const sim::TraceRecord& t : sim_->Trace()) {
        std::fprintf(out, "%llu %llu %d %d %u %u %u\n",
                     static_cast<unsigned long long>(t.time_ns),
                     static_cast<unsigned long long>(t.seq),
                     static_cast<int>(t.kind), t.node, t.qp_num, t.psn,
                     t.opcode);
      }
      std::fclose(out);
    }
  }
}

void SeedRun::Close() {
  capture_.reset();  // detaches from the fabric, which must still exist
  if (fabric_ == nullptr) return;
  // Children before parents; a failed close leaks only this run's objects.
  CloseMsgWiring(&msg_nodes_, &msg_pairs_);
  for (Node& n : nodes_) {
    for (sf_ep* e : n.eps) (void)sf_close(&e->fid);
    if (n.srx) (void)sf_close(&n.srx->fid);
    if (n.cq) (void)sf_close(&n.cq->fid);
    if (n.av) (void)sf_close(&n.av->fid);
    if (n.domain) (void)sf_close(&n.domain->fid);
  }
  (void)sf_close(&fabric_->fid);
  fabric_ = nullptr;
}

SeedResult SeedRun::Run() {
  if (!Setup()) {
    r_.outcome = kOutcomeSetupFailed;
    r_.invariant_detail = setup_error_.empty() ? sf_last_error() : setup_error_;
    return r_;
  }
  // The run owns time: polls never run an event later than now (the poll
  // horizon), so at each instant every node reads what it has before the
  // clock moves; when a whole round finds nothing to do, the fabric runs
  // every event of the next instant. Waiting on polls to move time instead
  // lets one node's empty polls carry the clock past completions another
  // node has not read yet (to the next timer, often an ack timeout).
  const uint64_t deadline = s_.workload.deadline_ns;
  bool cancelled = false;
  while (true) {
    sim_->SetPollHorizon(Now());
    bool progress = PostWork();
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!Paused(static_cast<int32_t>(i))) progress |= ReadCq(nodes_[i].cq);
    }
    if (!msg_nodes_.empty()) progress |= DrainMsgEvents(&msg_nodes_) > 0;
    if (!cancelled && Finished()) {
      // Every flow is done or stopped: receives still posted (for messages
      // that will never come) are cancelled, and must complete as such.
      CancelReceives();
      cancelled = true;
      continue;
    }
    if (cancelled && !AnyBusy()) break;
    if (progress) continue;
    const uint64_t next = std::min(sim_->next_event_ns(), NextPauseEnd());
    if (next == UINT64_MAX || next > deadline) {
      idle_at_end_ = next == UINT64_MAX;
      if (cancelled) break;
      CancelReceives();
      cancelled = true;
      continue;
    }
    sim_->RunUntil(next);
  }
  sim_->SetPollHorizon(UINT64_MAX);
  Finish();
  r_.passed = r_.invariant.empty() && r_.outcome == s_.expect;
  return r_;
}

}  // namespace

SeedResult RunSeed(const Scenario& scenario, const RunOptions& options) {
  SeedRun run(scenario, options);
  return run.Run();
}

}  // namespace softfab::study
