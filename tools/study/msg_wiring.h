// Connected SF_EP_MSG endpoint pairs for a study's flows (fi_cm(3)): every
// node listens on a passive endpoint; each flow's sender connects an
// endpoint to the receiver's listener, carrying the flow's number as private
// data, and the receiver accepts it with an endpoint of its own. Both bind
// their node's CQ and event queue. Private to tools/study.
#ifndef SOFTFAB_TOOLS_STUDY_MSG_WIRING_H_
#define SOFTFAB_TOOLS_STUDY_MSG_WIRING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"

namespace softfab::study {

struct MsgNode {
  sf_domain* domain = nullptr;
  sf_cq* cq = nullptr;
  sf_eq* eq = nullptr;    // opened here
  sf_pep* pep = nullptr;  // opened here
};

struct MsgPair {
  uint32_t flow = 0;
  int32_t src = 0, dst = 0;
  sf_ep* send_ep = nullptr;  // on src, connected to recv_ep (opened here)
  sf_ep* recv_ep = nullptr;  // on dst (opened here)
  bool connected_src = false, connected_dst = false;
};

// Opens the listeners and connects every pair, running the simulated fabric
// instant by instant (as the runner does) until all are connected. Returns
// "" or why it failed (an sf_* call, a rejected or failed connection, the
// fabric idle or past `deadline_ns` first). What was opened is left in
// `nodes` and `pairs` for CloseMsgWiring either way.
std::string ConnectMsgPairs(sf_fabric* fabric, const sf_ep_attr& attr,
                            uint64_t deadline_ns, std::vector<MsgNode>* nodes,
                            std::vector<MsgPair>* pairs);

// Reads every event waiting on the nodes' queues (drives their progress);
// returns how many. Later events (SF_SHUTDOWN when a peer fails) need no
// answer.
int DrainMsgEvents(std::vector<MsgNode>* nodes);

// Closes the endpoints, listeners and event queues (not the CQs).
void CloseMsgWiring(std::vector<MsgNode>* nodes, std::vector<MsgPair>* pairs);

}  // namespace softfab::study

#endif  // SOFTFAB_TOOLS_STUDY_MSG_WIRING_H_
