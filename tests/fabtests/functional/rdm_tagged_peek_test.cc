// fabtests' functional/rdm_tagged_peek on sf_*: ten tagged messages (tags
// 0x900d + 1..10) wait at the receiver, which then, with directed receives
// and one sf_context: peeks for an absent tag (SF_ENOMSG, with and without
// SF_CLAIM); peeks message 1 and receives it; peeks message 2 with
// SF_CLAIM and receives it with SF_CLAIM; discards 3 with SF_PEEK |
// SF_DISCARD (a later peek: SF_ENOMSG); claims 4 then SF_CLAIM |
// SF_DISCARD; receives 5 and 6 in order and 10 down to 7 in reverse. Every
// received buffer holds its bytes. The program runs on RDM.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/fabtests/functional/fabtests_harness.h"

namespace softfab::fabtests {
namespace {

constexpr uint64_t kBaseTag = 0x900d;
constexpr int kSendCount = 10;

class FabtestsRdmTaggedPeek : public ::softfab::testing::PerBackendTest {
 protected:
  // trecv_op: posts (tag, flags) with a buffer unless peeking or discarding,
  // then reads the receive CQ: 0 on success, else -err of the error entry.
  ssize_t TrecvOp(uint64_t tag, uint64_t flags, bool ignore_nomsg) {
    ssize_t ret = 0;
    do {
      iovec iov{buf.data(), buf.size()};
      sf_msg_tagged m{};
      if (!(flags & (SF_PEEK | SF_DISCARD))) {
        std::fill(buf.begin(), buf.end(), 0);
        m.msg_iov = &iov;
        m.iov_count = 1;
      }
      m.addr = f.peers[1].addr[0];
      m.tag = tag;
      m.context = &ctx;
      if (sf_trecvmsg(f.peers[1].ep, &m, flags) != 0) {
        ADD_FAILURE() << "sf_trecvmsg: " << sf_last_error();
        return -SF_EIO;
      }
      sf_cq_tagged_entry e{};
      const ssize_t n = f.ReadOne(1, &e);
      if (n == 1) {
        EXPECT_EQ(e.op_context, &ctx);
        EXPECT_EQ(e.tag, tag);
        if (!(flags & SF_DISCARD)) {
          EXPECT_EQ(e.len, size);
        }
        ret = 0;
        break;
      }
      if (n != -SF_EAVAIL) return n;
      sf_cq_err_entry x{};
      if (sf_cq_readerr(f.peers[1].cq, &x, 0) != 1) return -SF_EIO;
      EXPECT_EQ(x.op_context, &ctx);
      ret = -x.err;
      if (ret == -SF_ENOMSG && ignore_nomsg) f.Progress();
    } while (ret == -SF_ENOMSG && ignore_nomsg);
    if (ret == 0 && !(flags & (SF_PEEK | SF_DISCARD))) {
      EXPECT_TRUE(SameBytes(buf.data(), Pattern(size, tag)));
    }
    return ret;
  }

  void Run(size_t message_size) {
    size = message_size;
    SCOPED_TRACE("size " + std::to_string(size));
    ASSERT_TRUE(OpenPair(f, backend(), SF_EP_RDM, SF_DIRECTED_RECV));
    buf.assign(size, 0);
    std::vector<std::vector<uint8_t>> out(kSendCount + 1);
    int sctx[kSendCount + 1];
    for (int i = 1; i <= kSendCount; ++i) {
      out[i] = Pattern(size, kBaseTag + i);
      ASSERT_EQ(Retry(f,
                      [&] {
                        return sf_tsend(f.peers[0].ep, out[i].data(), size,
                                        nullptr, f.peers[0].addr[1],
                                        kBaseTag + i, &sctx[i]);
                      }),
                0);
    }
    // test_bad
    EXPECT_EQ(TrecvOp(0xbad, SF_PEEK, false), -SF_ENOMSG);
    EXPECT_EQ(TrecvOp(0xbad, SF_PEEK | SF_CLAIM, false), -SF_ENOMSG);
    // test_peek
    EXPECT_EQ(TrecvOp(kBaseTag + 1, SF_PEEK, true), 0);
    EXPECT_EQ(TrecvOp(kBaseTag + 1, 0, false), 0);
    // test_claim
    EXPECT_EQ(TrecvOp(kBaseTag + 2, SF_PEEK | SF_CLAIM, true), 0);
    EXPECT_EQ(TrecvOp(kBaseTag + 2, SF_CLAIM, false), 0);
    // test_discard
    EXPECT_EQ(TrecvOp(kBaseTag + 3, SF_PEEK | SF_DISCARD, true), 0);
    EXPECT_EQ(TrecvOp(kBaseTag + 3, SF_PEEK, false), -SF_ENOMSG);
    EXPECT_EQ(TrecvOp(kBaseTag + 4, SF_PEEK | SF_CLAIM, true), 0);
    EXPECT_EQ(TrecvOp(kBaseTag + 4, SF_CLAIM | SF_DISCARD, false), 0);
    // test_ordered, test_ooo
    for (int i = 5; i <= 6; ++i) EXPECT_EQ(TrecvOp(kBaseTag + i, 0, false), 0);
    for (int i = kSendCount; i >= 7; --i) {
      EXPECT_EQ(TrecvOp(kBaseTag + i, 0, false), 0);
    }
    // wait_for_send_comp: every send completes, in any order.
    std::vector<sf_cq_tagged_entry> done;
    ASSERT_TRUE(CompletesN(f, 0, kSendCount, &done));
    EXPECT_TRUE(f.Quiet(0));
    EXPECT_TRUE(f.Quiet(1));
  }

  Fixture f;
  sf_context ctx{};
  size_t size = 0;
  std::vector<uint8_t> buf;
};

// The program's default transfer size (1024 B).
TEST_P(FabtestsRdmTaggedPeek, PeekClaimDiscardInOrder) { Run(1024); }

// The same sequence on messages above the eager size (rendezvous).
TEST_P(FabtestsRdmTaggedPeek, AboveTheEagerSize) { Run(20000); }

SOFTFAB_INSTANTIATE_PER_BACKEND(FabtestsRdmTaggedPeek);

}  // namespace
}  // namespace softfab::fabtests
