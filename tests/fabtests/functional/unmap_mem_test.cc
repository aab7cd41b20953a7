// fabtests' functional/unmap_mem on sf_*: a ping-pong whose send buffer is
// mapped afresh (mmap, at the old address if the kernel agrees) before every
// send and unmapped (madvise DONTNEED, munmap) once the send completed. Each
// message must carry the new mapping's bytes: nothing softfab keeps from an
// earlier send (a registration of the old pages) may be used for the new
// one. RDM and MSG, below and above the eager size (where softfab registers
// the user's buffer itself).
// On verbs the registration cache is on by default and watches unmaps, so
// this is also its test (tests/registration_cache_test asks for the same
// addresses with MAP_FIXED and counts what the cache did).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

class FabtestsUnmapMem : public ::softfab::testing::PerBackendTest {};

// ft_tx from a fresh mapping of `size` bytes at `hint`; returns the address
// used, so the next mapping can ask for it again.
void* SendFromFreshMapping(Fixture& f, int from, void* hint, size_t size,
                           uint32_t seed) {
  void* buf = mmap(hint, size, PROT_READ | PROT_WRITE,
                   MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
  if (buf == MAP_FAILED) {
    ADD_FAILURE() << "mmap failed";
    return nullptr;
  }
  const std::vector<uint8_t> bytes = Pattern(size, seed);
  std::memcpy(buf, bytes.data(), size);
  int sctx = 0;
  EXPECT_EQ(Retry(f,
                  [&] {
                    return sf_send(f.peers[from].ep, buf, size, nullptr,
                                   f.peers[from].addr[1 - from], &sctx);
                  }),
            0)
      << sf_last_error();
  EXPECT_TRUE(Completes(f, from, &sctx));
  EXPECT_EQ(madvise(buf, size, MADV_DONTNEED), 0);
  EXPECT_EQ(munmap(buf, size), 0);
  return buf;
}

TEST_P(FabtestsUnmapMem, EverySendFromANewMapping) {
  const int iterations = Count(backend(), 6, 2);
  const std::vector<size_t> sizes =
      OnVerbs(backend()) ? std::vector<size_t>{64, 16384}
                         : std::vector<size_t>{1, 4096, 8192, 65536, 1 << 20};
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
    Fixture f;
    ASSERT_TRUE(OpenPair(f, backend(), type));
    void* hint[2] = {nullptr, nullptr};
    uint32_t seed = 0;
    for (size_t size : sizes) {
      SCOPED_TRACE(std::string(TypeName(type)) + " size " +
                   std::to_string(size));
      std::vector<uint8_t> in(size);
      for (int i = 0; i < iterations; ++i) {
        // Client (1) to server (0), then back.
        for (int from : {1, 0}) {
          const int to = 1 - from;
          std::fill(in.begin(), in.end(), 0);
          int rctx = 0;
          ASSERT_EQ(sf_recv(f.peers[to].ep, in.data(), size, nullptr,
                            SF_ADDR_UNSPEC, &rctx),
                    0);
          ++seed;
          hint[from] = SendFromFreshMapping(f, from, hint[from], size, seed);
          if (HasFailure()) return;
          sf_cq_tagged_entry e{};
          ASSERT_TRUE(Completes(f, to, &rctx, &e));
          EXPECT_EQ(e.len, size);
          ASSERT_TRUE(SameBytes(in.data(), Pattern(size, seed)))
              << "iteration " << i << " from " << from;
        }
      }
    }
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsUnmapMem);

}  // namespace
}  // namespace softfab::fabtests
