// fabtests functional/multi_ep on sf_*: three endpoints on each of two
// nodes, each with its CQ and AV or sharing them (fabtests' -Q, -A), RDM or
// MSG (each connected to its counterpart through one listener). Every
// endpoint sends a message from a registered buffer to its counterpart and
// back, then a zero-byte one each way (sync_all); then every registration is
// closed and made again, and it all runs once more. The RMA writes of
// do_rma are left out: softfab has no RMA (fi_write).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/fabtests/unit/endpoint_set.h"

namespace softfab::fabtests {
namespace {

class FabtestsMultiEp : public FabtestsCase {
 protected:
  static constexpr int kEps = 3;
  static constexpr size_t kSize = 256;  // fabtests' transfer_size here.

  void Run(SetOptions o) {
    ASSERT_TRUE(f.Open(backend(), 2));
    Closer closer;
    EndpointSet server(f, closer, 0, kEps, o), client(f, closer, 1, kEps, o);
    Listener l;
    ASSERT_TRUE(server.PairWith(client, l));
    std::vector<std::vector<uint8_t>> bufs(2 * kEps,
                                           std::vector<uint8_t>(kSize));
    for (int round = 0; round < 2; ++round) {
      // reg_mrs: a registration per endpoint's send buffer.
      std::vector<sf_mr*> mrs;
      std::vector<uint8_t*> sbuf[2];
      std::vector<void*> desc[2];
      for (int side = 0; side < 2; ++side) {
        for (int i = 0; i < kEps; ++i) {
          sf_mr* mr = nullptr;
          uint8_t* b = bufs[side * kEps + i].data();
          ASSERT_EQ(sf_mr_reg(f.peers[side].domain, b, kSize, SF_SEND, 0, 0, 0,
                              &mr, nullptr),
                    0);
          mrs.push_back(mr);
          sbuf[side].push_back(b);
          desc[side].push_back(sf_mr_desc(mr));
        }
      }
      // do_sends, then sync_all.
      client.SendToCounterparts(server, kSize, 10 * round, sbuf[1], desc[1]);
      server.SendToCounterparts(client, kSize, 10 * round + 5, sbuf[0],
                                desc[0]);
      client.SendToCounterparts(server, 0, 0);
      server.SendToCounterparts(client, 0, 0);
      for (sf_mr* mr : mrs) EXPECT_EQ(sf_close(&mr->fid), 0);
    }
  }
};

TEST_P(FabtestsMultiEp, RdmOwnCqAndAv) { Run({SF_EP_RDM, false, false}); }
TEST_P(FabtestsMultiEp, RdmSharedCq) { Run({SF_EP_RDM, true, false}); }
TEST_P(FabtestsMultiEp, RdmSharedAv) { Run({SF_EP_RDM, false, true}); }
TEST_P(FabtestsMultiEp, RdmSharedCqAndAv) { Run({SF_EP_RDM, true, true}); }
TEST_P(FabtestsMultiEp, MsgOwnCq) { Run({SF_EP_MSG, false, false}); }
TEST_P(FabtestsMultiEp, MsgSharedCq) { Run({SF_EP_MSG, true, false}); }

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsMultiEp);

}  // namespace
}  // namespace softfab::fabtests
