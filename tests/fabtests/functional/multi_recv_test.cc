// fabtests' functional/multi_recv on sf_*: one receive buffer posted as two
// SF_MULTI_RECV halves (sf_recvmsg, the program's -M), FI_OPT_MIN_MULTI_RECV
// set to the message size, a stream of messages of one size. Each message
// completes with its length and a buffer inside the posted one, never the
// same as the entry before; a half is released (SF_MULTI_RECV in the flags)
// after exactly half / size messages and is posted again. RDM and MSG.
// Left out: the program's default of fi_recv with FI_MULTI_RECV in the
// receive attributes' op_flags (sf_ep_attr.op_flags only takes completion
// levels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

class FabtestsMultiRecv : public ::softfab::testing::PerBackendTest {};

void Stream(const Backend& b, sf_ep_type type, size_t size, int messages) {
  SCOPED_TRACE(std::string(TypeName(type)) + " size " + std::to_string(size));
  Fixture f;
  ASSERT_TRUE(OpenPair(f, b, type));
  sf_ep* rx = f.peers[1].ep;
  ASSERT_EQ(sf_setopt(&rx->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV, &size,
                      sizeof size),
            0);
  // As the program sizes it: each half holds 2 to 64 messages.
  const size_t rx_size = std::min(size * 128, size_t{4} << 20);
  const size_t half = rx_size / 2;
  const int per_half = static_cast<int>(half / size);
  std::vector<uint8_t> buffer(rx_size);
  int ctx[2];
  auto post = [&](int h) {
    iovec iov{buffer.data() + h * half, half};
    sf_msg m{&iov, nullptr, 1, SF_ADDR_UNSPEC, &ctx[h], 0};
    return sf_recvmsg(rx, &m, SF_MULTI_RECV);
  };
  ASSERT_EQ(post(0), 0);
  ASSERT_EQ(post(1), 0);
  // The sender keeps a window of sends in flight; the receiver reads as
  // entries come.
  const int window = 8;
  std::vector<std::vector<uint8_t>> out(window);
  int sent = 0, send_done = 0, received = 0, in_half = 0, released = 0;
  const void* last_buf = nullptr;
  for (int guard = 0; guard < 1000000 && received < messages; ++guard) {
    while (sent < messages && sent - send_done < window) {
      std::vector<uint8_t>& v = out[sent % window];
      v = Pattern(size, sent);
      const ssize_t rc = sf_send(f.peers[0].ep, v.data(), v.size(), nullptr,
                                 f.peers[0].addr[1], &out[sent % window]);
      if (rc == -SF_EAGAIN) break;
      ASSERT_EQ(rc, 0) << sf_last_error();
      ++sent;
    }
    sf_cq_tagged_entry e{};
    ssize_t n = sf_cq_read(f.peers[0].cq, &e, 1);
    if (n == -SF_EAVAIL) FAIL() << ErrorEntry(f.peers[0].cq);
    if (n == 1) ++send_done;
    n = sf_cq_read(f.peers[1].cq, &e, 1);
    if (n == -SF_EAVAIL) FAIL() << ErrorEntry(f.peers[1].cq);
    if (n != 1) continue;
    if (e.flags & SF_RECV) {
      ASSERT_EQ(e.len, size);
      const auto* p = static_cast<const uint8_t*>(e.buf);
      ASSERT_TRUE(p >= buffer.data() && p < buffer.data() + rx_size)
          << "completion buffer out of range";
      ASSERT_NE(e.buf, last_buf);
      last_buf = e.buf;
      // Messages of one sender arrive in order (fi_msg: send-after-send).
      ASSERT_TRUE(SameBytes(p, Pattern(size, received))) << received;
      ++received;
      ++in_half;
    }
    if (e.flags & SF_MULTI_RECV) {
      ASSERT_EQ(in_half, per_half) << "completions for one half";
      in_half = 0;
      ASSERT_TRUE(e.op_context == &ctx[0] || e.op_context == &ctx[1]);
      ASSERT_EQ(post(e.op_context == &ctx[1]), 0);
      ++released;
    }
  }
  ASSERT_EQ(received, messages);
  EXPECT_EQ(released, messages / per_half);
  for (int guard = 0; guard < 100000 && send_done < sent; ++guard) {
    sf_cq_tagged_entry e{};
    const ssize_t n = f.ReadOne(0, &e);
    ASSERT_EQ(n, 1);
    ++send_done;
  }
  EXPECT_TRUE(f.Quiet(1));
}

TEST_P(FabtestsMultiRecv, HalvesRefilledAndReposted) {
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
    for (size_t size : {size_t{64}, size_t{1000}, size_t{4096}}) {
      // Enough messages to release and repost each half at least twice.
      const int per_half =
          static_cast<int>(std::min(size * 64, size_t{2} << 20) / size);
      Stream(backend(), type, size, Count(backend(), 5, 2) * per_half + 3);
      if (HasFatalFailure()) return;
    }
  }
}

// Above the eager size (rendezvous into a multi-recv buffer); sim only in
// bytes that would be slow in the VM, small on verbs.
TEST_P(FabtestsMultiRecv, AboveTheEagerSize) {
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
    Stream(backend(), type, 10000, Count(backend(), 150, 70));
    if (HasFatalFailure()) return;
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsMultiRecv);

}  // namespace
}  // namespace softfab::fabtests
