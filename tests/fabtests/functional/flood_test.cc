// fabtests' functional/flood on sf_*: the receiver is flooded.
// - Batch: the sender posts a window of sends (64; 16 in the VM) before the
//   receiver has posted anything, so all arrive unexpected (or wait as
//   rendezvous requests); then the receiver posts the window and every
//   buffer completes with its own bytes, and every send completes.
// - Sequential registration: each message's buffers are registered
//   (sf_mr_reg), used with their descriptors and closed, one message at a
//   time on both sides.
// Each phase ends with a one-byte exchange (post_rx_sync). RDM and MSG; the
// program refuses DGRAM. The program asks for keys FT_TX_MR_KEY + i; softfab
// chooses its keys (sf_mr_reg takes requested_key 0), so none is asked.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

class FabtestsFlood : public ::softfab::testing::PerBackendTest {};

// post_rx_sync: each side receives one byte from the other.
void Sync(Fixture& f) {
  uint8_t in[2] = {}, out[2] = {1, 2};
  int rctx[2], sctx[2];
  for (int i : {0, 1}) {
    ASSERT_EQ(
        sf_recv(f.peers[i].ep, &in[i], 1, nullptr, SF_ADDR_UNSPEC, &rctx[i]),
        0);
  }
  for (int i : {0, 1}) {
    ASSERT_EQ(Retry(f,
                    [&] {
                      return sf_send(f.peers[i].ep, &out[i], 1, nullptr,
                                     f.peers[i].addr[1 - i], &sctx[i]);
                    }),
              0);
  }
  for (int i : {0, 1}) {
    std::vector<sf_cq_tagged_entry> got;
    ASSERT_TRUE(CompletesN(f, i, 2, &got));  // A send and a receive.
  }
  EXPECT_EQ(in[0], 2);
  EXPECT_EQ(in[1], 1);
}

void Batch(Fixture& f, size_t size, int window) {
  std::vector<std::vector<uint8_t>> out(window), in(window);
  std::vector<int> sctx(window), rctx(window);
  for (int i = 0; i < window; ++i) {
    out[i] = Pattern(size, i);
    ASSERT_EQ(Retry(f,
                    [&] {
                      return sf_send(f.peers[0].ep, out[i].data(), size,
                                     nullptr, f.peers[0].addr[1], &sctx[i]);
                    }),
              0)
        << sf_last_error();
  }
  for (int r = 0; r < 200; ++r) f.Progress();  // The flood lands.
  for (int i = 0; i < window; ++i) {
    in[i].assign(size, 0);
    ASSERT_EQ(Retry(f,
                    [&] {
                      return sf_recv(f.peers[1].ep, in[i].data(), size, nullptr,
                                     SF_ADDR_UNSPEC, &rctx[i]);
                    }),
              0);
  }
  // Untagged messages from one sender match receives in order.
  for (int i = 0; i < window; ++i) {
    sf_cq_tagged_entry e{};
    ASSERT_TRUE(Completes(f, 1, &rctx[i], &e)) << i;
    EXPECT_EQ(e.len, size);
    ASSERT_TRUE(SameBytes(in[i].data(), out[i])) << i;
  }
  std::vector<sf_cq_tagged_entry> done;
  ASSERT_TRUE(CompletesN(f, 0, window, &done));
  Sync(f);
}

void Sequential(Fixture& f, size_t size, int window) {
  for (int i = 0; i < window; ++i) {
    const std::vector<uint8_t> out = Pattern(size, 1000 + i);
    std::vector<uint8_t> in(size, 0);
    sf_mr* tx_mr = nullptr;
    sf_mr* rx_mr = nullptr;
    ASSERT_EQ(sf_mr_reg(f.peers[0].domain, out.data(), size, SF_SEND, 0, 0, 0,
                        &tx_mr, nullptr),
              0)
        << sf_last_error();
    int sctx = 0, rctx = 0;
    ASSERT_EQ(sf_send(f.peers[0].ep, out.data(), size, sf_mr_desc(tx_mr),
                      f.peers[0].addr[1], &sctx),
              0)
        << sf_last_error();
    ASSERT_EQ(sf_mr_reg(f.peers[1].domain, in.data(), size, SF_RECV, 0, 0, 0,
                        &rx_mr, nullptr),
              0);
    ASSERT_EQ(sf_recv(f.peers[1].ep, in.data(), size, sf_mr_desc(rx_mr),
                      SF_ADDR_UNSPEC, &rctx),
              0)
        << sf_last_error();
    sf_cq_tagged_entry e{};
    ASSERT_TRUE(Completes(f, 1, &rctx, &e));
    EXPECT_EQ(e.len, size);
    ASSERT_TRUE(SameBytes(in.data(), out)) << i;
    ASSERT_TRUE(Completes(f, 0, &sctx));
    ASSERT_EQ(sf_close(&tx_mr->fid), 0) << sf_last_error();
    ASSERT_EQ(sf_close(&rx_mr->fid), 0) << sf_last_error();
  }
  Sync(f);
}

TEST_P(FabtestsFlood, BatchThenSequentialRegistration) {
  const int window = Count(backend(), 64, 16);
  const std::vector<size_t> sizes =
      OnVerbs(backend()) ? std::vector<size_t>{64, 16384}
                         : std::vector<size_t>{1, 1024, 8192, 65536};
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
    Fixture f;
    ASSERT_TRUE(OpenPair(f, backend(), type));
    for (size_t size : sizes) {
      SCOPED_TRACE(std::string(TypeName(type)) + " size " +
                   std::to_string(size));
      Batch(f, size, window);
      if (HasFatalFailure()) return;
      Sequential(f, size, window);
      if (HasFatalFailure()) return;
    }
    EXPECT_TRUE(f.Quiet(0));
    EXPECT_TRUE(f.Quiet(1));
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsFlood);

}  // namespace
}  // namespace softfab::fabtests
