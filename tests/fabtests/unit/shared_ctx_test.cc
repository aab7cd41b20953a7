// fabtests functional/shared_ctx on sf_*: four endpoints on each of two
// nodes, sharing one CQ and AV and, where asked, one shared receive context
// (fi_srx_context): receives are posted to the shared context (or to each
// endpoint), the client's endpoints each send to their counterpart, every
// receive completes, and the server's answer the same way. RDM and MSG
// (connected through one listener). Left out: the shared transmit context
// (fi_stx_context, fabtests' default --no-rx-shared run): softfab has none.
#include <gtest/gtest.h>

#include "tests/fabtests/unit/endpoint_set.h"

namespace softfab::fabtests {
namespace {

class FabtestsSharedCtx : public FabtestsCase {
 protected:
  static constexpr int kEps = 4;  // fabtests' ep_cnt.

  void Run(sf_ep_type type, bool srx) {
    ASSERT_TRUE(f.Open(backend(), 2));
    Closer closer;
    const SetOptions o{type, true, true, srx};
    EndpointSet server(f, closer, 0, kEps, o), client(f, closer, 1, kEps, o);
    Listener l;
    ASSERT_TRUE(server.PairWith(client, l));
    client.SendToCounterparts(server, 1024, 1);
    server.SendToCounterparts(client, 1024, 2);
  }
};

TEST_P(FabtestsSharedCtx, RdmSharedRx) { Run(SF_EP_RDM, true); }
TEST_P(FabtestsSharedCtx, RdmNoSharedRx) { Run(SF_EP_RDM, false); }
TEST_P(FabtestsSharedCtx, MsgSharedRx) { Run(SF_EP_MSG, true); }
TEST_P(FabtestsSharedCtx, MsgNoSharedRx) { Run(SF_EP_MSG, false); }

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsSharedCtx);

}  // namespace
}  // namespace softfab::fabtests
