// fabtests functional/resmgmt_test on sf_*: resource management. 100
// operations (fabtests' max_opts) are posted on endpoints whose transmit and
// receive queues hold 16 and whose CQs hold 100: each side posts until the
// endpoint answers -SF_EAGAIN (it must, rather than overrun its queue or its
// CQ), reads completions, and posts on until all are done. Every operation
// completes exactly once and every message arrives whole; tagged (tag q + 1
// for the q-th) and untagged, RDM and MSG.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fabtests/unit/endpoint_set.h"

namespace softfab::fabtests {
namespace {

constexpr int kOps = 100;       // max_opts
constexpr size_t kSize = 1024;  // fabtests' default transfer size
constexpr size_t kQueue = 16;   // -T / -X

class FabtestsResmgmt : public FabtestsCase {
 protected:
  void Run(sf_ep_type type, bool tagged) {
    ASSERT_TRUE(f.Open(backend(), 2));
    Closer closer;
    SetOptions o;
    o.type = type;
    o.cq_size = kOps;
    o.tx_size = kQueue;
    o.rx_size = kQueue;
    EndpointSet server(f, closer, 0, 1, o), client(f, closer, 1, 1, o);
    Listener l;
    ASSERT_TRUE(server.PairWith(client, l));
    sf_ep* rx = server.ep(0);
    sf_ep* tx = client.ep(0);
    const sf_addr_t dest = client.addr(0);

    std::vector<std::vector<uint8_t>> msg, in;
    for (int q = 0; q < kOps; ++q) {
      msg.push_back(Pattern(kSize, q));
      in.emplace_back(kSize, 0);
    }
    int posted_rx = 0, posted_tx = 0, eagain_rx = 0, eagain_tx = 0;
    std::vector<int> rx_done(kOps, 0), tx_done(kOps, 0);
    int done = 0;
    const std::vector<sf_cq*> cqs = {server.cq(0), client.cq(0)};
    auto post = [&]() -> bool {
      while (posted_rx < kOps) {
        const int q = posted_rx;
        const ssize_t rc = tagged
                               ? sf_trecv(rx, in[q].data(), kSize, nullptr,
                                          SF_ADDR_UNSPEC, q + 1, 0, &rx_done[q])
                               : sf_recv(rx, in[q].data(), kSize, nullptr,
                                         SF_ADDR_UNSPEC, &rx_done[q]);
        if (rc == -SF_EAGAIN) {
          ++eagain_rx;
          break;
        }
        EXPECT_EQ(rc, 0) << sf_last_error();
        if (rc != 0) return false;
        ++posted_rx;
      }
      while (posted_tx < kOps) {
        const int q = posted_tx;
        const ssize_t rc = tagged ? sf_tsend(tx, msg[q].data(), kSize, nullptr,
                                             dest, q + 1, &tx_done[q])
                                  : sf_send(tx, msg[q].data(), kSize, nullptr,
                                            dest, &tx_done[q]);
        if (rc == -SF_EAGAIN) {
          ++eagain_tx;
          break;
        }
        EXPECT_EQ(rc, 0) << sf_last_error();
        if (rc != 0) return false;
        ++posted_tx;
      }
      return true;
    };
    ASSERT_TRUE(::softfab::testing::WaitUntil(
        [&] { return done == 2 * kOps; },
        [&] {
          if (!post()) return;
          for (sf_cq* cq : cqs) {
            sf_cq_tagged_entry e[8];
            const ssize_t n = sf_cq_read(cq, e, 8);
            ASSERT_TRUE(n > 0 || n == -SF_EAGAIN) << n << sf_last_error();
            for (ssize_t k = 0; k < n; ++k) {
              ++*static_cast<int*>(e[k].op_context);
              ++done;
            }
          }
        }))
        << done << " of " << 2 * kOps << " operations completed";
    // fabtests' queues are smaller than its count: both sides met EAGAIN.
    EXPECT_GT(eagain_rx, 0);
    EXPECT_GT(eagain_tx, 0);
    for (int q = 0; q < kOps; ++q) {
      EXPECT_EQ(rx_done[q], 1) << q;
      EXPECT_EQ(tx_done[q], 1) << q;
    }
    // Tagged: the q-th receive matched the q-th send by tag. Untagged: each
    // message landed whole in exactly one receive.
    std::vector<bool> landed(kOps, false);
    for (int q = 0; q < kOps; ++q) {
      int j = q;
      if (!tagged) {
        for (j = 0; j < kOps; ++j) {
          if (!landed[j] && in[q] == msg[j]) break;
        }
      }
      ASSERT_LT(j, kOps) << "receive " << q << " holds no message";
      EXPECT_EQ(in[q], msg[j]) << q;
      landed[j] = true;
    }
  }
};

TEST_P(FabtestsResmgmt, RdmUntagged) { Run(SF_EP_RDM, false); }
TEST_P(FabtestsResmgmt, RdmTagged) { Run(SF_EP_RDM, true); }
TEST_P(FabtestsResmgmt, MsgUntagged) { Run(SF_EP_MSG, false); }
TEST_P(FabtestsResmgmt, MsgTagged) { Run(SF_EP_MSG, true); }

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsResmgmt);

}  // namespace
}  // namespace softfab::fabtests
