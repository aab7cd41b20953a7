// Host tests of posting work-request lists in stack batches
// (internal/post_batch.h): order, batch limits, and bad_wr naming the caller's
// request whether the backend's check or the provider stopped the list.
#include "backends/verbs/internal/post_batch.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <vector>

#include "backends/verbs/internal/translate.h"
#include "transport/transport.h"

namespace softfab::verbs::internal {
namespace {

namespace tp = ::softfab::transport;

// A fake provider: records what it was handed, refuses the request whose
// wr_id is `refuse_id` with `refuse_code` (naming it unless `anonymous`).
struct FakeProvider {
  uint64_t refuse_id = UINT64_MAX;
  int refuse_code = ENOMEM;
  bool anonymous = false;
  int calls = 0;
  std::vector<uint64_t> posted;
  std::vector<uint64_t> sge_addrs;

  int Post(ibv_recv_wr* first, ibv_recv_wr** bad) {
    ++calls;
    for (ibv_recv_wr* w = first; w != nullptr; w = w->next) {
      if (w->wr_id == refuse_id) {
        *bad = anonymous ? nullptr : w;
        return refuse_code;
      }
      posted.push_back(w->wr_id);
      for (int i = 0; i < w->num_sge; ++i) {
        sge_addrs.push_back(w->sg_list[i].addr);
      }
    }
    return 0;
  }
};

// A list of `n` receive requests with ids 0..n-1, `sges` SGEs each whose
// addresses are 1000 * id + index.
struct RecvList {
  std::vector<tp::RecvWr> wrs;
  std::vector<std::vector<tp::Sge>> sges;
  RecvList(int n, int sges_each) : wrs(n), sges(n) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < sges_each; ++j) {
        sges[i].push_back({static_cast<uint64_t>(1000 * i + j), 8, 1});
      }
      wrs[i].wr_id = static_cast<uint64_t>(i);
      wrs[i].sg_list = sges[i].data();
      wrs[i].num_sge = sges_each;
      wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
    }
  }
};

Status Post(const RecvList& list, FakeProvider* provider,
            const tp::RecvWr** bad, uint32_t max_sge = kPostBatchSges) {
  return PostChain<tp::RecvWr, ibv_recv_wr>(
      list.wrs.empty() ? nullptr : &list.wrs[0], bad,
      [max_sge](const tp::RecvWr& in, ibv_sge* sges, ibv_recv_wr* out) {
        return ToIbvRecvWr(in, max_sge, sges, out);
      },
      [provider](ibv_recv_wr* first, ibv_recv_wr** b) {
        return provider->Post(first, b);
      },
      {"full", "refused"});
}

TEST(PostBatch, EmptyListPostsNothing) {
  FakeProvider p;
  tp::RecvWr sentinel;
  const tp::RecvWr* bad = &sentinel;
  EXPECT_TRUE(Post(RecvList(0, 1), &p, &bad).ok());
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(p.calls, 0);
}

TEST(PostBatch, LongListsGoInOrderInBatches) {
  FakeProvider p;
  RecvList list(40, 1);
  const tp::RecvWr* bad = nullptr;
  ASSERT_TRUE(Post(list, &p, &bad).ok());
  EXPECT_EQ(bad, nullptr);
  ASSERT_EQ(p.posted.size(), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(p.posted[i], static_cast<uint64_t>(i));
  EXPECT_EQ(p.calls, 3);  // 16 + 16 + 8
}

TEST(PostBatch, SgeRoomStartsANewBatch) {
  FakeProvider p;
  RecvList list(5, 30);  // two requests fill 60 of 64 SGEs
  const tp::RecvWr* bad = nullptr;
  ASSERT_TRUE(Post(list, &p, &bad).ok());
  EXPECT_EQ(p.calls, 3);
  ASSERT_EQ(p.sge_addrs.size(), 150u);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 30; ++j) {
      EXPECT_EQ(p.sge_addrs[30 * i + j], static_cast<uint64_t>(1000 * i + j));
    }
  }
}

TEST(PostBatch, BadRequestStopsTheListAfterPostingTheOnesBefore) {
  FakeProvider p;
  RecvList list(30, 1);
  list.wrs[20].num_sge = 2;  // over max_sge 1
  const tp::RecvWr* bad = nullptr;
  Status s = Post(list, &p, &bad, 1);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_EQ(bad, &list.wrs[20]);
  ASSERT_EQ(p.posted.size(), 20u);
  EXPECT_EQ(p.posted.back(), 19u);
}

TEST(PostBatch, ProviderRefusalNamesTheCallersRequest) {
  FakeProvider p;
  p.refuse_id = 21;  // the sixth request of the second batch
  RecvList list(40, 1);
  const tp::RecvWr* bad = nullptr;
  Status s = Post(list, &p, &bad);
  EXPECT_EQ(s.code(), ENOMEM);
  EXPECT_STREQ(s.message(), "full");
  EXPECT_EQ(bad, &list.wrs[21]);
  EXPECT_EQ(p.posted.size(), 21u);
  EXPECT_EQ(p.calls, 2);
}

TEST(PostBatch, NegativeAndAnonymousRefusals) {
  FakeProvider p;
  p.refuse_id = 18;
  p.refuse_code = -EINVAL;
  p.anonymous = true;
  RecvList list(20, 1);
  const tp::RecvWr* bad = nullptr;
  Status s = Post(list, &p, &bad);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_STREQ(s.message(), "refused");
  EXPECT_EQ(bad, &list.wrs[16]);  // the first of the refused batch
}

TEST(PostBatch, MoreSgesThanABatchHoldsIsInvalid) {
  FakeProvider p;
  RecvList list(3, 1);
  std::vector<tp::Sge> many(kPostBatchSges + 1, tp::Sge{1, 1, 1});
  list.wrs[1].sg_list = many.data();
  list.wrs[1].num_sge = kPostBatchSges + 1;
  const tp::RecvWr* bad = nullptr;
  Status s = Post(list, &p, &bad, 1000);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_EQ(bad, &list.wrs[1]);
  EXPECT_EQ(p.posted.size(), 1u);
}

// One request (the data path's every post) takes a shorter way: the same
// results as in a list.
TEST(PostBatch, OneRequestIsPostedAlone) {
  FakeProvider p;
  RecvList list(1, 3);
  tp::RecvWr sentinel;
  const tp::RecvWr* bad = &sentinel;
  ASSERT_TRUE(Post(list, &p, &bad).ok());
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(p.calls, 1);
  ASSERT_EQ(p.posted.size(), 1u);
  EXPECT_EQ(p.posted[0], 0u);
  EXPECT_EQ(p.sge_addrs, (std::vector<uint64_t>{0, 1, 2}));
}

TEST(PostBatch, OneBadRequestIsNamedAndNotPosted) {
  FakeProvider p;
  RecvList list(1, 2);  // over max_sge 1
  const tp::RecvWr* bad = nullptr;
  Status s = Post(list, &p, &bad, 1);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_EQ(bad, &list.wrs[0]);
  EXPECT_EQ(p.calls, 0);
  list.wrs[0].num_sge = -1;
  bad = nullptr;
  EXPECT_EQ(Post(list, &p, &bad).code(), EINVAL);
  EXPECT_EQ(bad, &list.wrs[0]);
  std::vector<tp::Sge> many(kPostBatchSges + 1, tp::Sge{1, 1, 1});
  list.wrs[0].sg_list = many.data();
  list.wrs[0].num_sge = kPostBatchSges + 1;
  bad = nullptr;
  EXPECT_EQ(Post(list, &p, &bad, 1000).code(), EINVAL);
  EXPECT_EQ(bad, &list.wrs[0]);
  EXPECT_EQ(p.calls, 0);
}

TEST(PostBatch, OneRequestRefusedNamedOrNot) {
  for (const bool anonymous : {false, true}) {
    FakeProvider p;
    p.refuse_id = 0;
    p.refuse_code = anonymous ? -EINVAL : ENOMEM;
    p.anonymous = anonymous;
    RecvList list(1, 1);
    const tp::RecvWr* bad = nullptr;
    Status s = Post(list, &p, &bad);
    EXPECT_EQ(s.code(), anonymous ? EINVAL : ENOMEM);
    EXPECT_STREQ(s.message(), anonymous ? "refused" : "full");
    EXPECT_EQ(bad, &list.wrs[0]);
    EXPECT_TRUE(p.posted.empty());
  }
}

}  // namespace
}  // namespace softfab::verbs::internal
