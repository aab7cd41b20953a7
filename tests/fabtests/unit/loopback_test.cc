// fabtests functional/loopback on sf_*: an RDM endpoint whose AV holds its
// own name sends a greeting to itself and receives it (ft_send_greeting,
// ft_recv_greeting), untagged and tagged (fabtests asks for FI_MSG and
// FI_TAGGED), and a second endpoint of the same domain talks to the first.
// (softfab refused sends to an endpoint's own name with -SF_EHOSTUNREACH
// until its RC QP could be connected to itself; see core/wireup.cc.)
#include <gtest/gtest.h>

#include <cstring>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsLoopback : public FabtestsCase {};

TEST_P(FabtestsLoopback, GreetingToSelf) {
  ASSERT_TRUE(f.Open(backend(), 1));
  sf_ep* ep = f.peers[0].ep;
  sf_cq* cq = f.peers[0].cq;
  const sf_addr_t self = f.peers[0].addr[0];
  ExpectMessage(f, ep, cq, self, ep, cq, 12, 1);
  // Beyond fabtests: a message above the eager size, which the endpoint
  // reads from itself (rendezvous).
  ExpectMessage(f, ep, cq, self, ep, cq, 100000, 4);
  // Tagged: a greeting to self that must match its tag.
  const char greeting[] = "Hello";
  char in[16] = {};
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_trecv(ep, in, sizeof in, nullptr, self, 9, 0, &rctx), 0);
  ASSERT_EQ(sf_tsend(ep, greeting, sizeof greeting, nullptr, self, 9, &sctx), 0)
      << sf_last_error();
  int got = 0;
  for (int k = 0; k < 2; ++k) {
    sf_cq_tagged_entry e{};
    sf_cq_err_entry err{};
    ASSERT_EQ(ReadCq(f, cq, &e, &err), 1) << sf_strerror(err.err);
    if (e.op_context == &rctx) {
      EXPECT_EQ(e.tag, 9u);
      EXPECT_EQ(e.len, sizeof greeting);
      got |= 1;
    } else {
      EXPECT_EQ(e.op_context, &sctx);
      got |= 2;
    }
  }
  EXPECT_EQ(got, 3);
  EXPECT_STREQ(in, greeting);
}

TEST_P(FabtestsLoopback, TwoEndpointsOfOneDomain) {
  ASSERT_TRUE(f.Open(backend(), 1));
  Closer closer;
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(AddEndpoint(f, closer, 0, SF_EP_RDM, {&f.peers[0].av->fid}, true,
                          &cq, &ep));
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&ep->fid, name, &len), 0);
  sf_addr_t other = SF_ADDR_NOTAVAIL;
  ASSERT_EQ(sf_av_insert(f.peers[0].av, name, 1, &other, 0, nullptr), 1);
  ExpectMessage(f, f.peers[0].ep, f.peers[0].cq, other, ep, cq, 4000, 2, {cq});
  ExpectMessage(f, ep, cq, f.peers[0].addr[0], f.peers[0].ep, f.peers[0].cq,
                20000, 3, {cq});
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsLoopback);

}  // namespace
}  // namespace softfab::fabtests
