// A guard for fork(2) in the middle of transfers, per backend: a process
// with eager and rendezvous messages in flight forks a child that execs a
// helper (what system(3) or a launcher does), then writes to memory on the
// same pages as its pinned buffers while the transfers go on; every byte
// must still arrive right. On a kernel that copies pinned pages at fork (5.13
// on, Debian 12's 6.1 in the VM) it holds by itself; on an older one it is
// what softfab's ibv_fork_init keeps (backends/verbs/verbs_device.cc).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

class ForkTest : public ::softfab::testing::PerBackendTest {};

TEST_P(ForkTest, ForkAndExecMidTransferKeepsEveryByte) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2));
  constexpr int kMessages = 16;
  const size_t sizes[] = {8, 4096, 64 * 1024, 1 << 20};
  // Every buffer in one heap block, unaligned and back to back with a few
  // bytes of other data between them: pages the device reads or writes are
  // shared with memory the process writes after the fork.
  constexpr size_t kGap = 24;
  std::vector<size_t> at(kMessages), len(kMessages);
  size_t total = 0;
  for (int k = 0; k < kMessages; ++k) {
    len[k] = sizes[k % 4];
    at[k] = total + 8;
    total = at[k] + len[k] + kGap;
  }
  std::vector<uint8_t> out(total, 0), in(total, 0);
  std::vector<std::vector<uint8_t>> want(kMessages);
  for (int k = 0; k < kMessages; ++k) {
    want[k] = Pattern(len[k], 40 + k);
    ASSERT_EQ(sf_trecv(f.peers[1].ep, &in[at[k]], len[k], nullptr,
                       SF_ADDR_UNSPEC, k, 0, nullptr),
              0)
        << sf_last_error();
  }
  auto send = [&](int k) {
    std::memcpy(&out[at[k]], want[k].data(), len[k]);
    ASSERT_EQ(sf_tsend(f.peers[0].ep, &out[at[k]], len[k], nullptr,
                       f.peers[0].addr[1], k, nullptr),
              0)
        << sf_last_error();
  };
  for (int k = 0; k < kMessages / 2; ++k) send(k);
  f.Progress();  // the first half under way
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/true", "true", static_cast<char*>(nullptr));
    _exit(127);
  }
  // The parent writes beside every buffer (the same pages), in flight or not,
  // and sends the second half from memory it writes after the fork.
  for (int k = 0; k < kMessages; ++k) {
    std::memset(&out[at[k] + len[k]], 0x5A, kGap);
    std::memset(&in[at[k] + len[k]], 0x5A, kGap);
  }
  for (int k = kMessages / 2; k < kMessages; ++k) send(k);
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(1, kMessages, &ok, &err);
  EXPECT_TRUE(err.empty()) << "receive failed: " << sf_strerror(err[0].err);
  ok.clear();
  f.Collect(0, kMessages, &ok, &err);
  EXPECT_TRUE(err.empty());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (int k = 0; k < kMessages; ++k) {
    EXPECT_EQ(std::memcmp(&in[at[k]], want[k].data(), len[k]), 0)
        << "message " << k << " (" << len[k] << " bytes)";
    EXPECT_EQ(in[at[k] + len[k]], 0x5A) << "beside message " << k;
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(ForkTest);

}  // namespace
