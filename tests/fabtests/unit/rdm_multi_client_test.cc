// fabtests functional/rdm_multi_client on sf_*: a persistent RDM server
// ping-pongs with clients that come and leave in sequence. Each client opens
// all its resources (domain, CQ, AV, endpoint) on node 1, learns the
// server's name, ping-pongs, and closes everything; the server keeps its
// endpoint and inserts each new client into its AV (ft_init_av). Left out:
// -R, reusing the first client's address for the next ones (softfab has no
// way to choose an endpoint's source address).
#include <gtest/gtest.h>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsRdmMultiClient : public FabtestsCase {};

TEST_P(FabtestsRdmMultiClient, ClientsComeAndGo) {
  ASSERT_TRUE(f.Open(backend(), 2));
  // The fixture's endpoint on node 1 stays idle: the clients are new ones.
  sf_ep* server = f.peers[0].ep;
  sf_cq* server_cq = f.peers[0].cq;
  uint8_t server_name[SF_NAME_BYTES];
  size_t len = sizeof server_name;
  ASSERT_EQ(sf_getname(&server->fid, server_name, &len), 0);
  constexpr int kClients = 5;      // fabtests' num_connections
  constexpr int kIterations = 10;  // ping-pongs per client
  for (int c = 0; c < kClients; ++c) {
    SCOPED_TRACE(c);
    Closer closer;
    sf_domain* d = nullptr;
    ASSERT_EQ(sf_domain_open(f.fabric, 1, &d, nullptr), 0) << sf_last_error();
    closer.Add(&d->fid);
    sf_cq_attr ca{};
    ca.format = SF_CQ_FORMAT_TAGGED;
    sf_cq* cq = nullptr;
    sf_av* av = nullptr;
    sf_ep* ep = nullptr;
    sf_ep_attr ea{};
    ea.type = SF_EP_RDM;
    ea.caps = SF_MSG;
    ASSERT_EQ(sf_cq_open(d, &ca, &cq, nullptr), 0);
    closer.Add(&cq->fid);
    ASSERT_EQ(sf_av_open(d, nullptr, &av, nullptr), 0);
    closer.Add(&av->fid);
    ASSERT_EQ(sf_endpoint(d, &ea, &ep, nullptr), 0);
    closer.Add(&ep->fid);
    ASSERT_EQ(sf_ep_bind(ep, &cq->fid, SF_TRANSMIT | SF_RECV), 0);
    ASSERT_EQ(sf_ep_bind(ep, &av->fid, 0), 0);
    ASSERT_EQ(sf_enable(ep), 0) << sf_last_error();
    // ft_init_av on both sides.
    sf_addr_t to_server = SF_ADDR_NOTAVAIL, to_client = SF_ADDR_NOTAVAIL;
    ASSERT_EQ(sf_av_insert(av, server_name, 1, &to_server, 0, nullptr), 1);
    uint8_t name[SF_NAME_BYTES];
    len = sizeof name;
    ASSERT_EQ(sf_getname(&ep->fid, name, &len), 0);
    ASSERT_EQ(sf_av_insert(f.peers[0].av, name, 1, &to_client, 0, nullptr), 1);
    // run_pingpong: the client sends first.
    for (int i = 0; i < kIterations; ++i) {
      ExpectMessage(f, ep, cq, to_server, server, server_cq, 64, 100 * c + i,
                    {cq});
      ExpectMessage(f, server, server_cq, to_client, ep, cq, 64,
                    100 * c + i + 50, {cq});
    }
    // The client leaves: everything it opened closes (Closer, last first).
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmMultiClient);

}  // namespace
}  // namespace softfab::fabtests
