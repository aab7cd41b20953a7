// fabtests unit/mr_test on sf_*: registrations across every combination of
// access bits and a range of sizes, and a registration of a buffer that was
// freed and allocated again (the same addresses, new pages). mr_regv and
// mr_regattr are left out: softfab has no sf_mr_regv or sf_mr_regattr (one
// contiguous range per registration, and no device memory).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsMrTest : public FabtestsCase {
 protected:
  bool verbs() const { return backend().backend == SF_BACKEND_VERBS; }
};

// mr_reg: every subset of the access bits softfab takes, at sizes from 1 B
// to 8 MiB (1 MiB on a device: under emulation pinning pages is slow).
TEST_P(FabtestsMrTest, RegAccessCombinations) {
  ASSERT_TRUE(f.Open(backend(), 1));
  constexpr uint64_t kBits[] = {SF_SEND,  SF_RECV,        SF_READ,
                                SF_WRITE, SF_REMOTE_READ, SF_REMOTE_WRITE};
  std::vector<size_t> sizes = {1, 16, 256, 4096, 65536, size_t{1} << 20};
  if (!verbs()) sizes.push_back(size_t{8} << 20);
  std::vector<uint8_t> buf(sizes.back());
  for (size_t size : sizes) {
    for (uint64_t combo = 0; combo < (1u << 6); ++combo) {
      uint64_t access = 0;
      for (int b = 0; b < 6; ++b) {
        if (combo & (1u << b)) access |= kBits[b];
      }
      sf_mr* mr = nullptr;
      ASSERT_EQ(sf_mr_reg(f.peers[0].domain, buf.data(), size, access, 0, 0, 0,
                          &mr, nullptr),
                0)
          << size << " B, access " << std::hex << access << ": "
          << sf_last_error();
      EXPECT_NE(sf_mr_desc(mr), nullptr);
      ASSERT_EQ(sf_close(&mr->fid), 0) << sf_last_error();
    }
  }
}

// mr_reg_free_then_alloc: five rounds of register, close, allocate a new
// buffer, free the old one; each registration (whatever pages now back the
// address) is good for a message, checked byte for byte.
TEST_P(FabtestsMrTest, RegFreeThenAlloc) {
  ASSERT_TRUE(f.Open(backend(), 2));
  const size_t size = verbs() ? size_t{64} << 10 : size_t{4} << 20;
  auto* buf = static_cast<uint8_t*>(std::malloc(size));
  ASSERT_NE(buf, nullptr);
  std::vector<uint8_t> in(size);
  for (int round = 0; round < 5; ++round) {
    const std::vector<uint8_t> msg = Pattern(size, round);
    std::memcpy(buf, msg.data(), size);
    sf_mr* mr = nullptr;
    ASSERT_EQ(sf_mr_reg(f.peers[0].domain, buf, size, SF_SEND | SF_READ, 0, 0,
                        0, &mr, nullptr),
              0)
        << sf_last_error();
    int rctx = 0, sctx = 0;
    ASSERT_EQ(
        sf_recv(f.peers[1].ep, in.data(), size, nullptr, SF_ADDR_UNSPEC, &rctx),
        0);
    ASSERT_EQ(sf_send(f.peers[0].ep, buf, size, sf_mr_desc(mr),
                      f.peers[0].addr[1], &sctx),
              0)
        << sf_last_error();
    sf_cq_tagged_entry e{};
    sf_cq_err_entry err{};
    ASSERT_EQ(ReadCq(f, f.peers[1].cq, &e, &err), 1) << sf_strerror(err.err);
    EXPECT_EQ(e.len, size);
    EXPECT_EQ(std::memcmp(in.data(), msg.data(), size), 0) << round;
    ASSERT_EQ(ReadCq(f, f.peers[0].cq, &e, &err), 1) << sf_strerror(err.err);
    EXPECT_EQ(e.op_context, &sctx);
    ASSERT_EQ(sf_close(&mr->fid), 0) << sf_last_error();
    auto* next = static_cast<uint8_t*>(std::malloc(size));
    ASSERT_NE(next, nullptr);
    std::free(buf);
    buf = next;
  }
  std::free(buf);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsMrTest);

}  // namespace
}  // namespace softfab::fabtests
