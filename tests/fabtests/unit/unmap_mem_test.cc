// fabtests functional/unmap_mem on sf_*: the sender maps its buffer afresh
// for every message (asking for the same address as before), sends from it,
// and unmaps it (MADV_DONTNEED, munmap); every message arrives with the new
// mapping's bytes, never stale pages a registration kept. Eager and
// rendezvous sizes (the latter has softfab register the user's buffer for
// the peer's READ). On verbs the registration cache keeps such
// registrations by default and watches unmaps, so this runs with it on.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {
namespace {

class FabtestsUnmapMem : public FabtestsCase {
 protected:
  void PingPong(size_t size) {
    ASSERT_TRUE(f.Open(backend(), 2));
    void* hint = nullptr;
    std::vector<uint8_t> in(size);
    for (int i = 0; i < 10; ++i) {
      // map_tx_buf: at the previous address if the kernel agrees.
      void* buf = mmap(hint, size, PROT_READ | PROT_WRITE,
                       MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
      ASSERT_NE(buf, MAP_FAILED);
      hint = buf;
      const std::vector<uint8_t> msg = Pattern(size, i);
      std::memcpy(buf, msg.data(), size);
      int rctx = 0, sctx = 0;
      ASSERT_EQ(sf_recv(f.peers[1].ep, in.data(), size, nullptr, SF_ADDR_UNSPEC,
                        &rctx),
                0);
      ASSERT_EQ(
          sf_send(f.peers[0].ep, buf, size, nullptr, f.peers[0].addr[1], &sctx),
          0)
          << sf_last_error();
      sf_cq_tagged_entry e{};
      sf_cq_err_entry err{};
      ASSERT_EQ(ReadCq(f, f.peers[0].cq, &e, &err), 1) << sf_strerror(err.err);
      EXPECT_EQ(e.op_context, &sctx);
      ASSERT_EQ(ReadCq(f, f.peers[1].cq, &e, &err), 1) << sf_strerror(err.err);
      EXPECT_EQ(e.op_context, &rctx);
      EXPECT_EQ(e.len, size);
      EXPECT_EQ(std::memcmp(in.data(), msg.data(), size), 0) << i;
      // unmap_tx_buf, once the send is complete.
      EXPECT_EQ(madvise(buf, size, MADV_DONTNEED), 0);
      EXPECT_EQ(munmap(buf, size), 0);
    }
  }
};

TEST_P(FabtestsUnmapMem, Eager) { PingPong(4096); }
TEST_P(FabtestsUnmapMem, Rendezvous) { PingPong(size_t{256} << 10); }

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsUnmapMem);

}  // namespace
}  // namespace softfab::fabtests
