// fabtests' ping-pong benchmarks as correctness checks on sf_*:
// benchmarks/msg_pingpong (MSG, untagged), rdm_pingpong (RDM, untagged),
// rdm_tagged_pingpong (RDM, tagged) and dgram_pingpong (DGRAM, behind the
// 40-byte prefix). Over fabtests' transfer sizes, a few iterations each
// (benchmark_shared.c's pingpong): the client sends, the server answers;
// a message at or below the inject size goes by inject, others by send with
// a completion; receives are pre-posted (the default) or posted only when
// the message is due (the programs' no-pre-posted-rx path). Every message
// arrives once, with its bytes and length (their -v). Timing is not measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

struct PingPong {
  sf_ep_type type;
  bool tagged;
  bool pre_posted;
};

constexpr uint64_t kTag = 0x1;

void RunPingPong(const Backend& b, const PingPong& p) {
  SCOPED_TRACE(std::string(TypeName(p.type)) + (p.tagged ? " tagged" : "") +
               (p.pre_posted ? "" : " not pre-posted"));
  Fixture f;
  ASSERT_TRUE(OpenPair(f, b, p.type));
  sf_ep_attr attr{};
  ASSERT_EQ(sf_ep_query(f.peers[0].ep, &attr), 0);
  const size_t prefix = p.type == SF_EP_DGRAM ? attr.msg_prefix_size : 0;
  size_t max = OnVerbs(b) ? 16384 : size_t{1} << 20;
  if (p.type == SF_EP_DGRAM) max = std::min(max, attr.max_msg_size - prefix);
  std::vector<size_t> sizes = TransferSizes(max);
  if (OnVerbs(b)) {  // Every fourth size in the VM, and the largest.
    std::vector<size_t> few;
    for (size_t i = 0; i < sizes.size(); i += 4) few.push_back(sizes[i]);
    few.push_back(sizes.back());
    sizes = few;
  }
  const int iterations = Count(b, 5, 2);
  std::vector<uint8_t> rx[2];
  int rctx[2];
  uint32_t seed = 0;
  auto post_rx = [&](int i, size_t size) {
    rx[i].assign(prefix + size, 0);
    return PostRecv(f.peers[i].ep, p.tagged, rx[i].data(), rx[i].size(),
                    SF_ADDR_UNSPEC, kTag, &rctx[i]);
  };
  for (size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    if (p.pre_posted) {
      ASSERT_EQ(post_rx(0, size), 0);
      ASSERT_EQ(post_rx(1, size), 0);
    }
    for (int it = 0; it < iterations; ++it) {
      for (int from : {1, 0}) {  // The client pings, the server pongs.
        const int to = 1 - from;
        if (!p.pre_posted) {
          ASSERT_EQ(post_rx(to, size), 0);
        }
        std::vector<uint8_t> out = Pattern(prefix + size, ++seed);
        const std::vector<uint8_t> want(out.begin() + prefix, out.end());
        const sf_addr_t dest = f.peers[from].addr[to];
        int sctx = 0;
        const bool inject = prefix + size <= attr.inject_size;
        ASSERT_EQ(Retry(f,
                        [&] {
                          return inject ? PostInject(f.peers[from].ep, p.tagged,
                                                     out.data(), out.size(),
                                                     dest, kTag)
                                        : PostSend(f.peers[from].ep, p.tagged,
                                                   out.data(), out.size(), dest,
                                                   kTag, &sctx);
                        }),
                  0)
            << sf_last_error();
        if (inject) std::fill(out.begin(), out.end(), 0);  // Reusable now.
        sf_cq_tagged_entry e{};
        ASSERT_TRUE(Completes(f, to, &rctx[to], &e));
        ASSERT_EQ(e.len, prefix + size);
        ASSERT_TRUE(SameBytes(rx[to].data() + prefix, want));
        if (!inject) {
          ASSERT_TRUE(Completes(f, from, &sctx));
        }
        // Pre-posted: the next receive goes up before the next message.
        const bool last = it == iterations - 1;
        if (p.pre_posted && !last) {
          ASSERT_EQ(post_rx(to, size), 0);
        }
      }
    }
  }
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
}

class FabtestsMsgPingpong : public ::softfab::testing::PerBackendTest {};
TEST_P(FabtestsMsgPingpong, EveryMessageWithItsBytes) {
  RunPingPong(backend(), {SF_EP_MSG, false, true});
  if (HasFatalFailure()) return;
  RunPingPong(backend(), {SF_EP_MSG, false, false});
}
SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsMsgPingpong);

class FabtestsRdmPingpong : public ::softfab::testing::PerBackendTest {};
TEST_P(FabtestsRdmPingpong, EveryMessageWithItsBytes) {
  RunPingPong(backend(), {SF_EP_RDM, false, true});
  if (HasFatalFailure()) return;
  RunPingPong(backend(), {SF_EP_RDM, false, false});
}
SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmPingpong);

class FabtestsRdmTaggedPingpong : public ::softfab::testing::PerBackendTest {};
TEST_P(FabtestsRdmTaggedPingpong, EveryMessageWithItsBytes) {
  RunPingPong(backend(), {SF_EP_RDM, true, true});
  if (HasFatalFailure()) return;
  RunPingPong(backend(), {SF_EP_RDM, true, false});
}
SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmTaggedPingpong);

// DGRAM runs without the fault plan (fabtests_harness.h: WithoutFaults).
class FabtestsDgramPingpong : public ::softfab::testing::PerBackendTest {};
TEST_P(FabtestsDgramPingpong, EveryMessageWithItsBytes) {
  RunPingPong(backend(), {SF_EP_DGRAM, false, true});
  if (HasFatalFailure()) return;
  RunPingPong(backend(), {SF_EP_DGRAM, false, false});
}
SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsDgramPingpong);

}  // namespace
}  // namespace softfab::fabtests
