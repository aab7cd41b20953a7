// fabtests' greeting programs on sf_*: functional/msg, rdm, dgram and
// loopback each set up their endpoints and pass the client's greeting
// ("Hello from Client!", with its NUL) to the server, which checks the
// string (ft_send_recv_greeting).
// - msg: over a connected SF_EP_MSG pair; the client then shuts down, and
//   the server's EQ reports SF_SHUTDOWN.
// - rdm: over RDM endpoints that know each other's address.
// - dgram: over DGRAM, both buffers carrying the 40-byte message prefix.
// - loopback: one RDM endpoint sends to its own address and receives it;
//   here also a tagged message above the eager size (a rendezvous READ from
//   itself).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

constexpr char kGreeting[] = "Hello from Client!";

// The client (`from`) sends the greeting to the server (`to`); `prefix`
// bytes in front of it on both sides (DGRAM's message prefix).
void Greet(Fixture& f, int from, int to, size_t prefix) {
  std::vector<uint8_t> out(prefix + sizeof kGreeting, 0);
  std::memcpy(out.data() + prefix, kGreeting, sizeof kGreeting);
  std::vector<uint8_t> in(prefix + 64, 0);
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_recv(f.peers[to].ep, in.data(), in.size(), nullptr,
                    SF_ADDR_UNSPEC, &rctx),
            0)
      << sf_last_error();
  ASSERT_EQ(sf_send(f.peers[from].ep, out.data(), out.size(), nullptr,
                    f.peers[from].addr[to], &sctx),
            0)
      << sf_last_error();
  sf_cq_tagged_entry e{};
  ASSERT_TRUE(Completes(f, to, &rctx, &e));
  EXPECT_EQ(e.len, out.size());
  EXPECT_STREQ(reinterpret_cast<const char*>(in.data() + prefix), kGreeting);
  ASSERT_TRUE(Completes(f, from, &sctx));
}

class FabtestsMsg : public ::softfab::testing::PerBackendTest {};

TEST_P(FabtestsMsg, GreetingThenShutdown) {
  Fixture f;
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_MSG));
  Greet(f, 1, 0, 0);
  if (HasFatalFailure()) return;
  ASSERT_EQ(sf_shutdown(f.peers[1].ep, 0), 0) << sf_last_error();
  uint32_t event = 0;
  ASSERT_GT(f.WaitEvent(0, &event), 0);
  EXPECT_EQ(event, static_cast<uint32_t>(SF_SHUTDOWN));
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsMsg);

class FabtestsRdm : public ::softfab::testing::PerBackendTest {};

TEST_P(FabtestsRdm, Greeting) {
  Fixture f;
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_RDM));
  Greet(f, 1, 0, 0);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdm);

class FabtestsDgram : public ::softfab::testing::PerBackendTest {};

TEST_P(FabtestsDgram, GreetingAfterThePrefix) {
  Fixture f;
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_DGRAM));
  sf_ep_attr attr{};
  ASSERT_EQ(sf_ep_query(f.peers[0].ep, &attr), 0);
  ASSERT_EQ(attr.msg_prefix_size, 40u);
  Greet(f, 1, 0, attr.msg_prefix_size);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsDgram);

class FabtestsLoopback : public ::softfab::testing::PerBackendTest {};

TEST_P(FabtestsLoopback, GreetingToItself) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 1));  // One endpoint; its AV holds itself.
  Greet(f, 0, 0, 0);
  if (HasFatalFailure()) return;
  const std::vector<uint8_t> out = Pattern(20000, 9);
  std::vector<uint8_t> in(out.size(), 0);
  int rctx = 0, sctx = 0;
  sf_ep* ep = f.peers[0].ep;
  ASSERT_EQ(
      sf_trecv(ep, in.data(), in.size(), nullptr, SF_ADDR_UNSPEC, 7, 0, &rctx),
      0);
  ASSERT_EQ(sf_tsend(ep, out.data(), out.size(), nullptr, f.peers[0].addr[0], 7,
                     &sctx),
            0);
  std::vector<sf_cq_tagged_entry> done;
  ASSERT_TRUE(CompletesN(f, 0, 2, &done));  // The send and the receive.
  EXPECT_TRUE(SameBytes(in.data(), out));
  EXPECT_TRUE(f.Quiet(0));
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsLoopback);

}  // namespace
}  // namespace softfab::fabtests
