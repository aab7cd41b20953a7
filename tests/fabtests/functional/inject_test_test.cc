// fabtests' functional/inject_test on sf_*: tagged sends (tag 0xabcd) whose
// buffer the sender overwrites as soon as the call allows, the receiver
// checking it got the original bytes:
// - SF_INJECT through sf_tsendmsg: the buffer is overwritten right after the
//   call returns; the send still completes with its context;
// - SF_INJECT_COMPLETE through sf_tsendmsg, or as the endpoint's default
//   (sf_ep_attr.op_flags, the program's tx_attr op_flags): overwritten once
//   the send's completion has been read.
// Sizes up to the inject size for SF_INJECT (the program clamps to it), and
// also above the eager size for SF_INJECT_COMPLETE. RDM, as the program.
// Left out: SF_INJECT as an endpoint default (sf_ep_attr.op_flags takes
// completion levels only).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

constexpr uint64_t kTag = 0xabcd;

class FabtestsInjectTest : public ::softfab::testing::PerBackendTest {};

// One iteration: the receiver posts, the sender sends `size` bytes with
// `flags` (sf_tsendmsg) or through plain sf_tsend when `use_sendmsg` is off.
void SendOnce(Fixture& f, size_t size, uint64_t flags, bool use_sendmsg,
              uint32_t seed) {
  const std::vector<uint8_t> want = Pattern(size, seed);
  std::vector<uint8_t> tx = want, rx(size + 1, 0);
  sf_context rctx{}, sctx{};
  ASSERT_EQ(sf_trecv(f.peers[1].ep, rx.data(), size, nullptr, SF_ADDR_UNSPEC,
                     kTag, 0, &rctx),
            0);
  iovec iov{tx.data(), size};
  sf_msg_tagged m{&iov, nullptr, 1, f.peers[0].addr[1], kTag, 0, &sctx, 0};
  const ssize_t rc = use_sendmsg
                         ? sf_tsendmsg(f.peers[0].ep, &m, flags | SF_COMPLETION)
                         : sf_tsend(f.peers[0].ep, tx.data(), size, nullptr,
                                    f.peers[0].addr[1], kTag, &sctx);
  ASSERT_EQ(rc, 0) << sf_last_error();
  if (flags & SF_INJECT) {
    std::memset(tx.data(), 0xb, size);
    ASSERT_TRUE(Completes(f, 0, &sctx));
  } else {
    ASSERT_TRUE(Completes(f, 0, &sctx));
    std::memset(tx.data(), 0xb, size);
  }
  sf_cq_tagged_entry e{};
  ASSERT_TRUE(Completes(f, 1, &rctx, &e));
  EXPECT_EQ(e.len, size);
  EXPECT_TRUE(SameBytes(rx.data(), want));
}

TEST_P(FabtestsInjectTest, InjectBufferReusableAtOnce) {
  Fixture f;
  ASSERT_TRUE(OpenPair(f, backend(), SF_EP_RDM));
  sf_ep_attr attr{};
  ASSERT_EQ(sf_ep_query(f.peers[0].ep, &attr), 0);
  ASSERT_GT(attr.inject_size, 0u);
  const int iterations = Count(backend(), 10, 2);
  uint32_t seed = 0;
  for (size_t size : {size_t{1}, size_t{64}, attr.inject_size}) {
    SCOPED_TRACE("size " + std::to_string(size));
    for (int i = 0; i < iterations; ++i) {
      SendOnce(f, size, SF_INJECT, true, ++seed);
      if (HasFatalFailure()) return;
    }
  }
  // Above the inject size, SF_INJECT is refused.
  std::vector<uint8_t> big(attr.inject_size + 1);
  iovec iov{big.data(), big.size()};
  sf_msg_tagged m{&iov, nullptr, 1, f.peers[0].addr[1], kTag, 0, nullptr, 0};
  EXPECT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_INJECT), -SF_EINVAL);
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
}

TEST_P(FabtestsInjectTest, InjectCompleteBufferReusableAfterCompletion) {
  const int iterations = Count(backend(), 10, 2);
  for (bool use_sendmsg : {true, false}) {
    SCOPED_TRACE(use_sendmsg ? "sf_tsendmsg flag" : "endpoint op_flags");
    Fixture f;
    ASSERT_TRUE(OpenPair(f, backend(), SF_EP_RDM));
    int sender = 0;
    if (!use_sendmsg) {
      // The fixture's endpoints have no default: one of our own has.
      std::vector<uint8_t> name;
      ASSERT_TRUE(AddPeer(f, 0, SF_EP_RDM, SF_MSG | SF_TAGGED,
                          SF_CQ_FORMAT_TAGGED, &name, SF_INJECT_COMPLETE));
      sender = 2;
      sf_ep_attr got{};
      ASSERT_EQ(sf_ep_query(f.peers[sender].ep, &got), 0);
      EXPECT_EQ(got.op_flags, SF_INJECT_COMPLETE);
      uint8_t peer1[SF_NAME_BYTES];
      size_t len = sizeof peer1;
      ASSERT_EQ(sf_getname(&f.peers[1].ep->fid, peer1, &len), 0);
      f.peers[sender].addr.resize(2);
      ASSERT_EQ(sf_av_insert(f.peers[sender].av, peer1, 1,
                             &f.peers[sender].addr[1], 0, nullptr),
                1);
    }
    // SendOnce sends from peer 0: swap the sender in.
    std::swap(f.peers[0], f.peers[sender]);
    uint32_t seed = 100;
    for (size_t size : {size_t{1}, size_t{4096}, size_t{20000}}) {
      SCOPED_TRACE("size " + std::to_string(size));
      for (int i = 0; i < iterations; ++i) {
        SendOnce(f, size, use_sendmsg ? SF_INJECT_COMPLETE : 0, use_sendmsg,
                 ++seed);
        if (HasFatalFailure()) return;
      }
    }
    std::swap(f.peers[0], f.peers[sender]);
    if (!use_sendmsg) {
      EXPECT_TRUE(DropPeer(f));
    }
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsInjectTest);

}  // namespace
}  // namespace softfab::fabtests
