// fabtests' functional/recv_cancel on sf_*: two tagged receives posted (tag
// 0xC, then 0xA), the first cancelled with sf_cancel. Exactly one error entry
// follows: SF_ECANCELED, SF_RECV in its flags, the cancelled context; a
// second sf_cq_readerr finds nothing. Then the sender sends 0xA and 0xC: the
// uncancelled receive completes with 0xA's message, and the cancelled
// context, posted again, with 0xC's. RDM and MSG, below and above the eager
// size.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

constexpr uint64_t kCancelTag = 0xC;
constexpr uint64_t kStandardTag = 0xA;

class FabtestsRecvCancel : public ::softfab::testing::PerBackendTest {};

void CancelOne(const Backend& b, sf_ep_type type, size_t size) {
  SCOPED_TRACE(std::string(TypeName(type)) + " size " + std::to_string(size));
  Fixture f;
  ASSERT_TRUE(OpenPair(f, b, type));
  sf_ep* rx = f.peers[1].ep;
  std::vector<uint8_t> cancel_buf(size, 0), standard_buf(size, 0);
  sf_context cancel_ctx{}, standard_ctx{};
  ASSERT_EQ(sf_trecv(rx, cancel_buf.data(), size, nullptr, SF_ADDR_UNSPEC,
                     kCancelTag, 0, &cancel_ctx),
            0);
  ASSERT_EQ(sf_trecv(rx, standard_buf.data(), size, nullptr, SF_ADDR_UNSPEC,
                     kStandardTag, 0, &standard_ctx),
            0);
  ASSERT_EQ(sf_cancel(&rx->fid, &cancel_ctx), 0);
  sf_cq_tagged_entry e{};
  ASSERT_EQ(f.ReadOne(1, &e), -SF_EAVAIL);
  sf_cq_err_entry x{};
  ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
  EXPECT_EQ(x.err, SF_ECANCELED);
  EXPECT_TRUE(x.flags & SF_RECV);
  EXPECT_EQ(x.op_context, &cancel_ctx);
  EXPECT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), -SF_EAGAIN);
  // The sender's two messages: standard first, then the cancelled tag.
  const std::vector<uint8_t> standard = Pattern(size, 1),
                             cancelled = Pattern(size, 2);
  int sctx[2];
  ASSERT_EQ(sf_tsend(f.peers[0].ep, standard.data(), size, nullptr,
                     f.peers[0].addr[1], kStandardTag, &sctx[0]),
            0);
  ASSERT_EQ(sf_tsend(f.peers[0].ep, cancelled.data(), size, nullptr,
                     f.peers[0].addr[1], kCancelTag, &sctx[1]),
            0);
  ASSERT_TRUE(Completes(f, 1, &standard_ctx, &e));
  EXPECT_EQ(e.tag, kStandardTag);
  EXPECT_TRUE(SameBytes(standard_buf.data(), standard));
  // Nothing landed in the cancelled buffer.
  EXPECT_TRUE(SameBytes(cancel_buf.data(), std::vector<uint8_t>(size, 0)));
  ASSERT_EQ(sf_trecv(rx, cancel_buf.data(), size, nullptr, SF_ADDR_UNSPEC,
                     kCancelTag, 0, &cancel_ctx),
            0);
  ASSERT_TRUE(Completes(f, 1, &cancel_ctx, &e));
  EXPECT_EQ(e.tag, kCancelTag);
  EXPECT_TRUE(SameBytes(cancel_buf.data(), cancelled));
  std::vector<sf_cq_tagged_entry> done;
  ASSERT_TRUE(CompletesN(f, 0, 2, &done));
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
}

TEST_P(FabtestsRecvCancel, CancelledReceiveReportsOnceAndReposts) {
  for (sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
    for (size_t size : {size_t{1024}, size_t{20000}}) {
      CancelOne(backend(), type, size);
      if (HasFatalFailure()) return;
    }
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRecvCancel);

}  // namespace
}  // namespace softfab::fabtests
