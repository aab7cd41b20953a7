// Connecting a study's SF_EP_MSG flows: listeners, connect with the flow's
// number as private data, accept, and the SF_CONNECTED on both sides.
#include "tools/study/msg_wiring.h"

#include <cstring>

#include "api/sim/sim_api.h"

namespace softfab::study {

namespace {

std::string Why(const char* call) {
  return std::string(call) + ": " + sf_last_error();
}

sf_ep* OpenEp(const MsgNode& n, sf_ep_attr attr, sf_info* info) {
  attr.type = SF_EP_MSG;
  attr.info = info;
  sf_ep* ep = nullptr;
  if (sf_endpoint(n.domain, &attr, &ep, nullptr) != 0) return nullptr;
  if (sf_ep_bind(ep, &n.cq->fid, SF_SEND | SF_RECV) != 0 ||
      sf_ep_bind(ep, &n.eq->fid, 0) != 0 || sf_enable(ep) != 0) {
    (void)sf_close(&ep->fid);
    return nullptr;
  }
  return ep;
}

// Handles one event of node `node`; "" or why the wiring failed.
std::string OnEvent(std::vector<MsgNode>& nodes, std::vector<MsgPair>& pairs,
                    const sf_ep_attr& attr, int32_t node, uint32_t event,
                    const sf_eq_cm_entry* e, size_t len) {
  if (event == SF_CONNREQ) {
    uint32_t flow = UINT32_MAX;
    if (len >= sizeof(sf_eq_cm_entry) + sizeof flow) {
      std::memcpy(&flow, e->data, sizeof flow);
    }
    if (flow >= pairs.size() || pairs[flow].dst != node ||
        pairs[flow].recv_ep != nullptr) {
      sf_freeinfo(e->info);
      return "a connection request names no waiting flow";
    }
    MsgPair& p = pairs[flow];
    p.recv_ep = OpenEp(nodes[node], attr, e->info);
    sf_freeinfo(e->info);
    if (p.recv_ep == nullptr) return Why("accepting endpoint");
    if (sf_accept(p.recv_ep, nullptr, 0) != 0) return Why("sf_accept");
    return "";
  }
  if (event == SF_CONNECTED) {
    for (MsgPair& p : pairs) {
      if (p.send_ep && &p.send_ep->fid == e->fid) p.connected_src = true;
      if (p.recv_ep && &p.recv_ep->fid == e->fid) p.connected_dst = true;
    }
    return "";
  }
  return "connection shut down while connecting";
}

}  // namespace

std::string ConnectMsgPairs(sf_fabric* fabric, const sf_ep_attr& attr,
                            uint64_t deadline_ns, std::vector<MsgNode>* nodes,
                            std::vector<MsgPair>* pairs) {
  sim::SimFabric* sim = sf_sim_fabric(fabric);
  std::vector<uint8_t> names(nodes->size() * SF_NAME_BYTES);
  for (size_t i = 0; i < nodes->size(); ++i) {
    MsgNode& n = (*nodes)[i];
    size_t len = SF_NAME_BYTES;
    if (sf_eq_open(fabric, nullptr, &n.eq, nullptr) != 0) {
      return Why("sf_eq_open");
    }
    if (sf_passive_ep(n.domain, &n.pep, nullptr) != 0 ||
        sf_pep_bind(n.pep, &n.eq->fid, 0) != 0 || sf_listen(n.pep) != 0 ||
        sf_getname(&n.pep->fid, &names[i * SF_NAME_BYTES], &len) != 0) {
      return Why("listener");
    }
  }
  for (MsgPair& p : *pairs) {
    p.send_ep = OpenEp((*nodes)[p.src], attr, nullptr);
    if (p.send_ep == nullptr) return Why("connecting endpoint");
    if (sf_connect(p.send_ep, &names[p.dst * SF_NAME_BYTES], &p.flow,
                   sizeof p.flow) != 0) {
      return Why("sf_connect");
    }
  }
  alignas(sf_eq_cm_entry) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  auto* entry = reinterpret_cast<sf_eq_cm_entry*>(buf);
  while (true) {
    // As the runner: nothing later than now runs while events are read.
    sim->SetPollHorizon(sim->clock().NowNs());
    bool progress = false;
    for (int32_t node = 0; node < static_cast<int32_t>(nodes->size()); ++node) {
      MsgNode& n = (*nodes)[node];
      uint32_t event = 0;
      ssize_t got;
      while ((got = sf_eq_read(n.eq, &event, buf, sizeof buf, 0)) > 0) {
        progress = true;
        const std::string why = OnEvent(*nodes, *pairs, attr, node, event,
                                        entry, static_cast<size_t>(got));
        if (!why.empty()) return why;
      }
      if (got == -SF_EAVAIL) {
        sf_eq_err_entry err{};
        (void)sf_eq_readerr(n.eq, &err, 0);
        return std::string("connection failed: ") + sf_strerror(err.err);
      }
      // The endpoints' CQs carry the connection's own messages too.
      (void)sf_cq_read(n.cq, nullptr, 0);
    }
    bool all = true;
    for (const MsgPair& p : *pairs) {
      all = all && p.connected_src && p.connected_dst;
    }
    if (all) break;
    if (progress) continue;
    const uint64_t next = sim->next_event_ns();
    if (next == UINT64_MAX) return "the fabric went idle while connecting";
    if (next > deadline_ns) return "the deadline passed while connecting";
    sim->RunUntil(next);
  }
  sim->SetPollHorizon(UINT64_MAX);
  return "";
}

int DrainMsgEvents(std::vector<MsgNode>* nodes) {
  alignas(sf_eq_cm_entry) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  int n = 0;
  for (MsgNode& node : *nodes) {
    uint32_t event = 0;
    while (true) {
      const ssize_t got = sf_eq_read(node.eq, &event, buf, sizeof buf, 0);
      if (got == -SF_EAVAIL) {
        sf_eq_err_entry err{};
        (void)sf_eq_readerr(node.eq, &err, 0);
      } else if (got <= 0) {
        break;
      }
      ++n;
    }
  }
  return n;
}

void CloseMsgWiring(std::vector<MsgNode>* nodes, std::vector<MsgPair>* pairs) {
  for (MsgPair& p : *pairs) {
    if (p.send_ep) (void)sf_close(&p.send_ep->fid);
    if (p.recv_ep) (void)sf_close(&p.recv_ep->fid);
    p.send_ep = p.recv_ep = nullptr;
  }
  for (MsgNode& n : *nodes) {
    if (n.pep) (void)sf_close(&n.pep->fid);
    if (n.eq) (void)sf_close(&n.eq->fid);
    n.pep = nullptr;
    n.eq = nullptr;
  }
}

}  // namespace softfab::study
