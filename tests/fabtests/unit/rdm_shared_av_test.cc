// fabtests functional/rdm_shared_av on sf_*, the part that applies. fabtests
// forks a child that opens the parent's AV by name (FI_SHARED_AV, read-only)
// and sends through the address the parent inserted, never inserting one
// itself. softfab's AVs are not shared between processes (no named AV, no
// FI_SHARED_AV): left out. What stays is the check's core within a process:
// an endpoint bound to an AV another endpoint filled (the "child") sends
// through the address the other inserted (fi_addr 0 of the table, the
// map_addr[0] fabtests reads), and the server receives the message whole;
// the "parent" endpoint sends nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsRdmSharedAv : public FabtestsCase {};

TEST_P(FabtestsRdmSharedAv, ChildSendsThroughParentsAv) {
  ASSERT_TRUE(f.Open(backend(), 2));
  Closer closer;
  // The client's AV, filled by the parent (the fixture's endpoint on node 1)
  // with the server's name.
  sf_av* av = nullptr;
  ASSERT_EQ(sf_av_open(f.peers[1].domain, nullptr, &av, nullptr), 0);
  closer.Add(&av->fid);
  uint8_t server[SF_NAME_BYTES];
  size_t len = sizeof server;
  ASSERT_EQ(sf_getname(&f.peers[0].ep->fid, server, &len), 0);
  sf_addr_t parent_addr = SF_ADDR_NOTAVAIL;
  ASSERT_EQ(sf_av_insert(av, server, 1, &parent_addr, 0, nullptr), 1);
  ASSERT_EQ(parent_addr, 0u);
  // The child: an endpoint bound to that AV once it is filled.
  sf_cq* cq = nullptr;
  sf_ep* child = nullptr;
  ASSERT_TRUE(
      AddEndpoint(f, closer, 1, SF_EP_RDM, {&av->fid}, true, &cq, &child));

  const char message[] = "Hello from Child Client!";
  char in[64] = {};
  int rctx = 0, sctx = 0;
  ASSERT_EQ(
      sf_recv(f.peers[0].ep, in, sizeof in, nullptr, SF_ADDR_UNSPEC, &rctx), 0);
  ASSERT_EQ(sf_send(child, message, sizeof message, nullptr, 0, &sctx), 0)
      << sf_last_error();
  sf_cq_tagged_entry e{};
  sf_cq_err_entry err{};
  ASSERT_EQ(ReadCq(f, f.peers[0].cq, &e, &err, {cq}), 1)
      << sf_strerror(err.err);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, sizeof message);
  EXPECT_STREQ(in, message);  // check_recv_msg
  ASSERT_EQ(ReadCq(f, cq, &e, &err, {cq}), 1) << sf_strerror(err.err);
  EXPECT_EQ(e.op_context, &sctx);
  // The parent sent nothing: its CQ is quiet.
  EXPECT_TRUE(f.Quiet(1));
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmSharedAv);

}  // namespace
}  // namespace softfab::fabtests
