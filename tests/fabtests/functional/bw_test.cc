// fabtests' bandwidth benchmarks as correctness checks on sf_*:
// benchmarks/msg_bw (MSG), rdm_bw (RDM) and rdm_tagged_bw (RDM, tagged), as
// benchmark_shared.c's bandwidth() runs them: windows of sends (64; 16 in
// the VM), each window's sends posted before the receiver has posted its
// window (the sender overruns it), inject at or below the inject size; with
// the programs' --use-fi-more, every post in a window but the last carries
// SF_MORE (sf_sendmsg / sf_recvmsg and their tagged forms). Every receive
// completes with its own message (one sender, one tag: in order) and every
// send completes. Timing is not measured.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

struct Bandwidth {
  sf_ep_type type;
  bool tagged;
  bool use_fi_more;
};

constexpr uint64_t kTag = 0x1;

ssize_t PostMsg(sf_ep* ep, bool tagged, bool send, void* buf, size_t len,
                sf_addr_t addr, void* context, uint64_t flags) {
  iovec iov{buf, len};
  if (tagged) {
    sf_msg_tagged m{&iov, nullptr, 1, addr, kTag, 0, context, 0};
    return send ? sf_tsendmsg(ep, &m, flags) : sf_trecvmsg(ep, &m, flags);
  }
  sf_msg m{&iov, nullptr, 1, addr, context, 0};
  return send ? sf_sendmsg(ep, &m, flags) : sf_recvmsg(ep, &m, flags);
}

void RunBandwidth(const Backend& b, const Bandwidth& p) {
  SCOPED_TRACE(std::string(TypeName(p.type)) + (p.tagged ? " tagged" : "") +
               (p.use_fi_more ? " --use-fi-more" : ""));
  Fixture f;
  ASSERT_TRUE(OpenPair(f, b, p.type));
  sf_ep_attr attr{};
  ASSERT_EQ(sf_ep_query(f.peers[0].ep, &attr), 0);
  const int window = Count(b, 64, 16);
  const int windows = Count(b, 3, 2);
  const std::vector<size_t> sizes =
      OnVerbs(b) ? std::vector<size_t>{1, 256, 16384}
                 : std::vector<size_t>{1, 64, 256, 4096, 8192, 16384, 65536};
  sf_ep* tx = f.peers[0].ep;
  sf_ep* rx = f.peers[1].ep;
  const sf_addr_t dest = f.peers[0].addr[1];
  uint32_t seed = 0;
  for (size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const bool inject = size <= attr.inject_size && !p.use_fi_more;
    std::vector<std::vector<uint8_t>> out(window), in(window);
    std::vector<int> sctx(window), rctx(window);
    for (int w = 0; w < windows; ++w) {
      const uint32_t first_seed = seed;
      for (int j = 0; j < window; ++j) {
        out[j] = Pattern(size, ++seed);
        const uint64_t more =
            p.use_fi_more && j < window - 1 ? SF_MORE : uint64_t{0};
        ASSERT_EQ(Retry(f,
                        [&] {
                          if (inject) {
                            return PostInject(tx, p.tagged, out[j].data(), size,
                                              dest, kTag);
                          }
                          return PostMsg(tx, p.tagged, true, out[j].data(),
                                         size, dest, &sctx[j],
                                         SF_COMPLETION | more);
                        }),
                  0)
            << sf_last_error();
      }
      for (int j = 0; j < window; ++j) {
        in[j].assign(size, 0);
        const uint64_t more =
            p.use_fi_more && j < window - 1 ? SF_MORE : uint64_t{0};
        ASSERT_EQ(Retry(f,
                        [&] {
                          return PostMsg(rx, p.tagged, false, in[j].data(),
                                         size, SF_ADDR_UNSPEC, &rctx[j],
                                         SF_COMPLETION | more);
                        }),
                  0)
            << sf_last_error();
      }
      for (int j = 0; j < window; ++j) {
        sf_cq_tagged_entry e{};
        ASSERT_TRUE(Completes(f, 1, &rctx[j], &e)) << j;
        ASSERT_EQ(e.len, size);
        ASSERT_TRUE(SameBytes(in[j].data(), Pattern(size, first_seed + j + 1)))
            << "window " << w << " message " << j;
      }
      if (!inject) {
        std::vector<sf_cq_tagged_entry> done;
        ASSERT_TRUE(CompletesN(f, 0, window, &done));
      }
    }
  }
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
}

class FabtestsMsgBw : public ::softfab::testing::PerBackendTest {};
TEST_P(FabtestsMsgBw, WindowsArriveWhole) {
  RunBandwidth(backend(), {SF_EP_MSG, false, false});
  if (HasFatalFailure()) return;
  RunBandwidth(backend(), {SF_EP_MSG, false, true});
}
SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsMsgBw);

class FabtestsRdmBw : public ::softfab::testing::PerBackendTest {};
TEST_P(FabtestsRdmBw, WindowsArriveWhole) {
  RunBandwidth(backend(), {SF_EP_RDM, false, false});
  if (HasFatalFailure()) return;
  RunBandwidth(backend(), {SF_EP_RDM, false, true});
}
SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmBw);

class FabtestsRdmTaggedBw : public ::softfab::testing::PerBackendTest {};
TEST_P(FabtestsRdmTaggedBw, WindowsArriveWhole) {
  RunBandwidth(backend(), {SF_EP_RDM, true, false});
  if (HasFatalFailure()) return;
  RunBandwidth(backend(), {SF_EP_RDM, true, true});
}
SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmTaggedBw);

}  // namespace
}  // namespace softfab::fabtests
