// fabtests' functional/rdm_multi_client on sf_*: one RDM server endpoint
// serves clients one after another. Each client opens its endpoint, the two
// learn each other's address, they ping-pong (client first), and the client
// closes; the server's endpoint goes on to the next client unchanged.
// Left out: the program's -R (a later client reusing the first one's
// address: an endpoint cannot choose its address here).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

class FabtestsRdmMultiClient : public ::softfab::testing::PerBackendTest {};

// One message of `size` from peer `from` to peer `to` (`dest` in from's AV).
void Transfer(Fixture& f, int from, int to, sf_addr_t dest, size_t size,
              uint32_t seed) {
  const std::vector<uint8_t> out = Pattern(size, seed);
  std::vector<uint8_t> in(size, 0);
  int rctx = 0, sctx = 0;
  ASSERT_EQ(
      sf_recv(f.peers[to].ep, in.data(), size, nullptr, SF_ADDR_UNSPEC, &rctx),
      0);
  ASSERT_EQ(sf_send(f.peers[from].ep, out.data(), size, nullptr, dest, &sctx),
            0)
      << sf_last_error();
  sf_cq_tagged_entry e{};
  ASSERT_TRUE(Completes(f, to, &rctx, &e));
  EXPECT_EQ(e.len, size);
  ASSERT_TRUE(SameBytes(in.data(), out));
  ASSERT_TRUE(Completes(f, from, &sctx));
}

TEST_P(FabtestsRdmMultiClient, ClientsOneAfterAnother) {
  Fixture f;
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_RDM));
  const int server = 0;
  uint8_t server_name[SF_NAME_BYTES];
  size_t len = sizeof server_name;
  ASSERT_EQ(sf_getname(&f.peers[server].ep->fid, server_name, &len), 0);
  const int clients = Count(backend(), 5, 2);
  const int iterations = Count(backend(), 10, 3);
  uint32_t seed = 0;
  for (int c = 0; c < clients; ++c) {
    SCOPED_TRACE("client " + std::to_string(c));
    std::vector<uint8_t> name;
    ASSERT_TRUE(AddPeer(f, 1, SF_EP_RDM, SF_MSG, SF_CQ_FORMAT_TAGGED, &name));
    const int client = 2;
    sf_addr_t to_server = SF_ADDR_NOTAVAIL, to_client = SF_ADDR_NOTAVAIL;
    ASSERT_EQ(sf_av_insert(f.peers[client].av, server_name, 1, &to_server, 0,
                           nullptr),
              1);
    ASSERT_EQ(sf_av_insert(f.peers[server].av, name.data(), 1, &to_client, 0,
                           nullptr),
              1);
    for (int i = 0; i < iterations; ++i) {
      Transfer(f, client, server, to_server, 1024, ++seed);
      if (HasFatalFailure()) return;
      Transfer(f, server, client, to_client, 1024, ++seed);
      if (HasFatalFailure()) return;
    }
    ASSERT_TRUE(DropPeer(f));
  }
  // The fixture's own pair still works after all that.
  Transfer(f, 1, 0, f.peers[1].addr[0], 64, ++seed);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmMultiClient);

}  // namespace
}  // namespace softfab::fabtests
