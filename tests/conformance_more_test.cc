// More of the conformance suite (scenario 8 and the API around it): a shared
// receive context serving 100 endpoints, buffered receives (fi_msg(3) and
// fi_tagged(3) "Buffered Receives") with claim and discard, FI_EP_MSG
// connect/accept through an event queue, and the CQ wait fd. Instantiated per
// backend like the rest of the suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Backend;
using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

class ConformanceMoreTest : public ::softfab::testing::PerBackendTest {};

size_t SizeOpt(sf_ep* ep, int name) {
  size_t v = 0, len = sizeof v;
  EXPECT_EQ(sf_getopt(&ep->fid, SF_OPT_ENDPOINT, name, &v, &len), 0)
      << sf_last_error();
  return v;
}

// ---- A shared receive context serving 100 endpoints ----

TEST_P(ConformanceMoreTest, SharedReceiveContextServesHundredEndpoints) {
  constexpr int kEndpoints = 100;
  constexpr int kRounds = 3;  // Messages per endpoint.
  sf_fabric_attr fa{};
  fa.backend = backend().backend;
  fa.sim_drop = backend().drop;
  fa.sim_duplicate = backend().duplicate;
  fa.sim_reorder = backend().reorder;
  fa.sim_nodes = 2;
  fa.sim_seed = 11;
  sf_fabric* fabric = nullptr;
  ASSERT_EQ(sf_fabric_open(&fa, &fabric, nullptr), 0) << sf_last_error();
  sf_domain *d0 = nullptr, *d1 = nullptr;
  ASSERT_EQ(sf_domain_open(fabric, 0, &d0, nullptr), 0);
  ASSERT_EQ(sf_domain_open(fabric, 1, &d1, nullptr), 0);
  sf_cq_attr ca{};
  ca.size = 4096;
  ca.format = SF_CQ_FORMAT_TAGGED;
  sf_cq *rcq = nullptr, *scq = nullptr;
  sf_av *rav = nullptr, *sav = nullptr;
  ASSERT_EQ(sf_cq_open(d0, &ca, &rcq, nullptr), 0);
  ASSERT_EQ(sf_cq_open(d1, &ca, &scq, nullptr), 0);
  ASSERT_EQ(sf_av_open(d0, nullptr, &rav, nullptr), 0);
  ASSERT_EQ(sf_av_open(d1, nullptr, &sav, nullptr), 0);
  sf_rx_attr ra{};
  ra.size = 1024;
  sf_ep* srx = nullptr;
  ASSERT_EQ(sf_srx_context(d0, &ra, &srx, nullptr), 0) << sf_last_error();
  EXPECT_EQ(srx->fid.fclass, static_cast<uint32_t>(SF_CLASS_SRX_CTX));
  // Posting before any endpoint using it is enabled is refused.
  std::vector<uint8_t> early(16);
  EXPECT_EQ(sf_recv(srx, early.data(), early.size(), nullptr, SF_ADDR_UNSPEC,
                    nullptr),
            -SF_EOPBADSTATE);

  sf_ep_attr ea{};
  ea.type = SF_EP_RDM;
  ea.caps = SF_MSG | SF_TAGGED;
  std::vector<sf_ep*> eps(kEndpoints);
  std::vector<uint8_t> names(kEndpoints * SF_NAME_BYTES);
  for (int i = 0; i < kEndpoints; ++i) {
    size_t len = SF_NAME_BYTES;
    ASSERT_EQ(sf_endpoint(d0, &ea, &eps[i], nullptr), 0);
    ASSERT_EQ(sf_ep_bind(eps[i], &rcq->fid, SF_TRANSMIT | SF_RECV), 0);
    ASSERT_EQ(sf_ep_bind(eps[i], &rav->fid, 0), 0);
    ASSERT_EQ(sf_ep_bind(eps[i], &srx->fid, 0), 0) << sf_last_error();
    ASSERT_EQ(sf_enable(eps[i]), 0) << sf_last_error();
    ASSERT_EQ(sf_getname(&eps[i]->fid, &names[i * SF_NAME_BYTES], &len), 0);
  }
  // A second binding, another domain's context and a different CQ are refused.
  sf_ep* stray = nullptr;
  ASSERT_EQ(sf_endpoint(d0, &ea, &stray, nullptr), 0);
  sf_cq* other_cq = nullptr;
  ASSERT_EQ(sf_cq_open(d0, &ca, &other_cq, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(stray, &other_cq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_ep_bind(stray, &rav->fid, 0), 0);
  ASSERT_EQ(sf_ep_bind(stray, &srx->fid, 0), 0);
  EXPECT_EQ(sf_ep_bind(stray, &srx->fid, 0), -SF_EINVAL);
  EXPECT_EQ(sf_enable(stray), -SF_EINVAL);  // Not the context's CQ.
  EXPECT_EQ(sf_close(&srx->fid), -SF_EBUSY);

  sf_ep* sender = nullptr;
  ASSERT_EQ(sf_endpoint(d1, &ea, &sender, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(sender, &scq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_ep_bind(sender, &sav->fid, 0), 0);
  ASSERT_EQ(sf_enable(sender), 0);
  std::vector<sf_addr_t> dest(kEndpoints);
  ASSERT_EQ(
      sf_av_insert(sav, names.data(), kEndpoints, dest.data(), 0, nullptr),
      kEndpoints);

  // Half the receives up front (the rest of the messages wait unexpected),
  // every buffer a different size so a message's landing place shows.
  constexpr int kMessages = kEndpoints * kRounds;
  std::vector<std::vector<uint8_t>> bufs(kMessages);
  std::vector<int> ctx(kMessages);
  auto post = [&](int k) {
    bufs[k].assign(2048, 0);
    ctx[k] = k;
    return sf_trecv(srx, bufs[k].data(), bufs[k].size(), nullptr,
                    SF_ADDR_UNSPEC, 0x77, 0, &ctx[k]);
  };
  for (int k = 0; k < kMessages / 2; ++k) ASSERT_EQ(post(k), 0);
  // Message m goes to endpoint m % 100, with a header naming m.
  std::vector<std::vector<uint8_t>> msgs(kMessages);
  int sends_done = 0;
  for (int m = 0; m < kMessages; ++m) {
    msgs[m] = Pattern(8 + (m * 13) % 2000, 1000 + m);
    std::memcpy(msgs[m].data(), &m, sizeof m);
    ssize_t rc;
    do {
      rc = sf_tsend(sender, msgs[m].data(), msgs[m].size(), nullptr,
                    dest[m % kEndpoints], 0x77, nullptr);
      if (rc == -SF_EAGAIN) {
        sf_cq_tagged_entry e[16];
        const ssize_t n = sf_cq_read(scq, e, 16);
        if (n > 0) sends_done += static_cast<int>(n);
        ASSERT_EQ(sf_cq_read(rcq, nullptr, 0), 0);
      }
    } while (rc == -SF_EAGAIN);
    ASSERT_EQ(rc, 0) << sf_last_error();
  }
  std::set<int> got_messages, used_buffers;
  bool posted_rest = false;
  for (int r = 0; r < 2000000 &&
                  (got_messages.size() < kMessages || sends_done < kMessages);
       ++r) {
    sf_cq_tagged_entry e[16];
    ssize_t n = sf_cq_read(rcq, e, 16);
    ASSERT_TRUE(n > 0 || n == -SF_EAGAIN) << n;
    for (ssize_t i = 0; i < n; ++i) {
      const int k = *static_cast<int*>(e[i].op_context);
      ASSERT_TRUE(used_buffers.insert(k).second) << "buffer used twice";
      int m;
      std::memcpy(&m, bufs[k].data(), sizeof m);
      ASSERT_GE(m, 0);
      ASSERT_LT(m, kMessages);
      ASSERT_TRUE(got_messages.insert(m).second) << "message twice: " << m;
      ASSERT_EQ(e[i].len, msgs[m].size());
      ASSERT_EQ(e[i].buf, bufs[k].data());
      ASSERT_EQ(0, std::memcmp(bufs[k].data(), msgs[m].data(), e[i].len));
    }
    if (!posted_rest && got_messages.size() >= kMessages / 2) {
      for (int k = kMessages / 2; k < kMessages; ++k) ASSERT_EQ(post(k), 0);
      posted_rest = true;
    }
    n = sf_cq_read(scq, e, 16);
    if (n == -SF_EAVAIL) {
      sf_cq_err_entry x;
      ASSERT_EQ(sf_cq_readerr(scq, &x, 0), 1);
      FAIL() << "send failed: " << sf_strerror(x.err);
    }
    if (n > 0) sends_done += static_cast<int>(n);
  }
  EXPECT_EQ(got_messages.size(), static_cast<size_t>(kMessages));
  EXPECT_EQ(used_buffers.size(), static_cast<size_t>(kMessages));
  EXPECT_EQ(sends_done, kMessages);
  // Cancel through the context.
  std::vector<uint8_t> spare(64);
  int spare_ctx = 0;
  ASSERT_EQ(sf_trecv(srx, spare.data(), spare.size(), nullptr, SF_ADDR_UNSPEC,
                     0x99, 0, &spare_ctx),
            0);
  ASSERT_EQ(sf_cancel(&srx->fid, &spare_ctx), 0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(sf_cq_read(rcq, &e, 1), -SF_EAVAIL);
  sf_cq_err_entry x;
  ASSERT_EQ(sf_cq_readerr(rcq, &x, 0), 1);
  EXPECT_EQ(x.err, SF_ECANCELED);
  EXPECT_EQ(x.op_context, &spare_ctx);

  ASSERT_EQ(sf_close(&stray->fid), 0);
  for (sf_ep* ep : eps) ASSERT_EQ(sf_close(&ep->fid), 0);
  ASSERT_EQ(sf_close(&srx->fid), 0);
  ASSERT_EQ(sf_close(&sender->fid), 0);
  for (sf_fid* fid : {&rcq->fid, &scq->fid, &other_cq->fid, &rav->fid,
                      &sav->fid, &d0->fid, &d1->fid, &fabric->fid}) {
    ASSERT_EQ(sf_close(fid), 0) << sf_last_error();
  }
}

// ---- Buffered receives ----

// Reads one entry at peer i; fails the test on anything else.
sf_cq_tagged_entry ReadEntry(Fixture& f, int i) {
  sf_cq_tagged_entry e{};
  EXPECT_EQ(f.ReadOne(i, &e), 1) << sf_last_error();
  return e;
}

TEST_P(ConformanceMoreTest, BufferedUntaggedReportsClaimsAndDiscards) {
  Fixture f;
  f.before_enable = [](int node, sf_ep* ep) {
    size_t v = node == 0 ? 32 : 64;  // Sender: BUFFERED_MIN; receiver: LIMIT.
    return sf_setopt(&ep->fid, SF_OPT_ENDPOINT,
                     node == 0 ? SF_OPT_BUFFERED_MIN : SF_OPT_BUFFERED_LIMIT,
                     &v, sizeof v);
  };
  ASSERT_TRUE(
      f.Open(backend(), 2, 0, 0, 7, SF_EP_RDM, /*mode=*/SF_BUFFERED_RECV));
  sf_ep* rx = f.peers[1].ep;
  EXPECT_EQ(SizeOpt(rx, SF_OPT_BUFFERED_LIMIT), 64u);
  EXPECT_EQ(SizeOpt(f.peers[0].ep, SF_OPT_BUFFERED_MIN), 32u);
  // Options are fixed once enabled; a plain receive has no place here.
  size_t v = 16;
  EXPECT_EQ(
      sf_setopt(&rx->fid, SF_OPT_ENDPOINT, SF_OPT_BUFFERED_LIMIT, &v, sizeof v),
      -SF_EOPBADSTATE);
  std::vector<uint8_t> sink(64);
  EXPECT_EQ(
      sf_recv(rx, sink.data(), sink.size(), nullptr, SF_ADDR_UNSPEC, nullptr),
      -SF_EINVAL);

  // Small (whole), eager beyond the limit, and rendezvous (100 KiB).
  const std::vector<uint8_t> small = Pattern(50, 1);
  const std::vector<uint8_t> medium = Pattern(1000, 2);
  const std::vector<uint8_t> large = Pattern(100 * 1024, 3);
  for (const auto* m : {&small, &medium, &large}) {
    ASSERT_EQ(sf_senddata(f.peers[0].ep, m->data(), m->size(), nullptr,
                          m->size(), f.peers[0].addr[1], nullptr),
              0)
        << sf_last_error();
  }
  sf_recv_context* rc[3];
  for (int i = 0; i < 3; ++i) {
    const auto& m = i == 0 ? small : i == 1 ? medium : large;
    sf_cq_tagged_entry e = ReadEntry(f, 1);
    rc[i] = static_cast<sf_recv_context*>(e.op_context);
    ASSERT_NE(rc[i], nullptr);
    EXPECT_EQ(rc[i]->ep, rx);
    EXPECT_EQ(rc[i]->context, nullptr);
    EXPECT_EQ(e.len, m.size());
    EXPECT_EQ(e.data, m.size());
    EXPECT_EQ(e.flags & (SF_RECV | SF_MSG | SF_REMOTE_CQ_DATA),
              SF_RECV | SF_MSG | SF_REMOTE_CQ_DATA);
    EXPECT_EQ((e.flags & SF_MORE) != 0, i > 0) << i;
    const size_t shown = i == 0 ? m.size() : i == 1 ? 64 : 32;
    ASSERT_NE(e.buf, nullptr);
    EXPECT_EQ(0, std::memcmp(e.buf, m.data(), shown)) << i;
  }
  // Discard the small one: no entry. Claim the others into our buffers.
  sf_msg msg{};
  msg.context = rc[0];
  ASSERT_EQ(sf_recvmsg(rx, &msg, SF_DISCARD), 0) << sf_last_error();
  EXPECT_TRUE(f.Quiet(1));
  EXPECT_EQ(sf_recvmsg(rx, &msg, SF_DISCARD), -SF_EINVAL);  // Gone.
  int medium_ctx = 0, large_ctx = 0;
  std::vector<uint8_t> mbuf(medium.size()), lbuf(large.size());
  rc[1]->context = &medium_ctx;
  rc[2]->context = &large_ctx;
  iovec iov{mbuf.data(), mbuf.size()};
  msg.msg_iov = &iov;
  msg.iov_count = 1;
  msg.context = rc[1];
  ASSERT_EQ(sf_recvmsg(rx, &msg, SF_CLAIM), 0) << sf_last_error();
  sf_cq_tagged_entry e = ReadEntry(f, 1);
  EXPECT_EQ(e.op_context, &medium_ctx);
  EXPECT_EQ(e.flags & (SF_CLAIM | SF_RECV), SF_CLAIM | SF_RECV);
  EXPECT_EQ(e.len, medium.size());
  EXPECT_EQ(mbuf, medium);
  iov = {lbuf.data(), lbuf.size()};
  msg.context = rc[2];
  ASSERT_EQ(sf_recvmsg(rx, &msg, SF_CLAIM), 0) << sf_last_error();
  e = ReadEntry(f, 1);
  EXPECT_EQ(e.op_context, &large_ctx);
  EXPECT_EQ(e.flags & SF_CLAIM, SF_CLAIM);
  EXPECT_EQ(e.len, large.size());
  EXPECT_EQ(lbuf, large);
  // All three sends completed (the rendezvous one once claimed).
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(0, 3, &ok, &err);
  EXPECT_EQ(err.size(), 0u);
}

// FI_VARIABLE_MSG: buffered handling, and max_msg_size lifted to what one
// RDMA READ reaches.
TEST_P(ConformanceMoreTest, VariableMessagesAreBufferedAndClaimed) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 2, 0, SF_VARIABLE_MSG));
  sf_ep_attr attr{};
  ASSERT_EQ(sf_ep_query(f.peers[1].ep, &attr), 0);
  EXPECT_EQ(attr.max_msg_size, 0xFFFFFFFFu);
  const std::vector<uint8_t> m = Pattern(3 << 20, 9);  // Rendezvous.
  ASSERT_EQ(sf_send(f.peers[0].ep, m.data(), m.size(), nullptr,
                    f.peers[0].addr[1], nullptr),
            0);
  sf_cq_tagged_entry e = ReadEntry(f, 1);
  EXPECT_EQ(e.len, m.size());
  EXPECT_NE(e.flags & SF_MORE, 0u);
  auto* rc = static_cast<sf_recv_context*>(e.op_context);
  EXPECT_EQ(rc->ep, f.peers[1].ep);
  std::vector<uint8_t> in(m.size());
  iovec iov{in.data(), in.size()};
  sf_msg msg{&iov, nullptr, 1, 0, rc, 0};
  int ctx = 0;
  rc->context = &ctx;
  ASSERT_EQ(sf_recvmsg(f.peers[1].ep, &msg, SF_CLAIM), 0) << sf_last_error();
  e = ReadEntry(f, 1);
  EXPECT_EQ(e.op_context, &ctx);
  EXPECT_EQ(in, m);
  // The sender's completion comes once the claim's READ is done.
  ASSERT_EQ(ReadEntry(f, 0).op_context, nullptr);
}

// FI_OPT_BUFFERED_MIN set by the receiver alone still governs what its
// FI_MORE entries show (fi_msg(3)): the sender learns it when connecting.
TEST_P(ConformanceMoreTest, ReceiversBufferedMinGoverns) {
  Fixture f;
  f.before_enable = [](int node, sf_ep* ep) {
    size_t v = 48;
    return node == 1 ? sf_setopt(&ep->fid, SF_OPT_ENDPOINT, SF_OPT_BUFFERED_MIN,
                                 &v, sizeof v)
                     : 0;
  };
  ASSERT_TRUE(
      f.Open(backend(), 2, 0, 0, 7, SF_EP_RDM, /*mode=*/SF_BUFFERED_RECV));
  EXPECT_EQ(SizeOpt(f.peers[0].ep, SF_OPT_BUFFERED_MIN), 0u);
  const std::vector<uint8_t> large = Pattern(64 * 1024, 4);
  ASSERT_EQ(sf_send(f.peers[0].ep, large.data(), large.size(), nullptr,
                    f.peers[0].addr[1], nullptr),
            0);
  sf_cq_tagged_entry e = ReadEntry(f, 1);
  EXPECT_NE(e.flags & SF_MORE, 0u);
  EXPECT_EQ(e.len, large.size());
  ASSERT_NE(e.buf, nullptr);
  EXPECT_EQ(std::memcmp(e.buf, large.data(), 48), 0);
  sf_msg msg{};
  msg.context = e.op_context;
  ASSERT_EQ(sf_recvmsg(f.peers[1].ep, &msg, SF_DISCARD), 0);
  // Discarded: the sender completes.
  EXPECT_EQ(ReadEntry(f, 0).op_context, nullptr);
}

TEST_P(ConformanceMoreTest, BufferedTaggedMatchesPostedTags) {
  Fixture f;
  ASSERT_TRUE(
      f.Open(backend(), 2, 0, 0, 7, SF_EP_RDM, /*mode=*/SF_BUFFERED_RECV));
  sf_ep* rx = f.peers[1].ep;
  int ctx5 = 5, ctx6 = 6, ctx7 = 7;
  // Tags are posted without buffers.
  ASSERT_EQ(sf_trecv(rx, nullptr, 0, nullptr, SF_ADDR_UNSPEC, 5, 0, &ctx5), 0);
  ASSERT_EQ(sf_trecv(rx, nullptr, 0, nullptr, SF_ADDR_UNSPEC, 6, 0, &ctx6), 0);
  const std::vector<uint8_t> m6 = Pattern(300, 6), m5 = Pattern(40, 5),
                             m7 = Pattern(70, 7);
  for (auto [m, tag] : {std::pair{&m6, 6}, {&m5, 5}, {&m7, 7}}) {
    ASSERT_EQ(sf_tsend(f.peers[0].ep, m->data(), m->size(), nullptr,
                       f.peers[0].addr[1], tag, nullptr),
              0);
  }
  // Reported in arrival order, each with the posted tag's context.
  std::map<uint64_t, sf_recv_context*> rc;
  for (int i = 0; i < 2; ++i) {
    sf_cq_tagged_entry e = ReadEntry(f, 1);
    auto* c = static_cast<sf_recv_context*>(e.op_context);
    EXPECT_EQ(c->ep, nullptr);
    EXPECT_EQ(e.tag, i == 0 ? 6u : 5u);
    EXPECT_EQ(c->context, e.tag == 6 ? &ctx6 : &ctx5);
    const auto& m = e.tag == 6 ? m6 : m5;
    EXPECT_EQ(e.len, m.size());
    EXPECT_EQ(0, std::memcmp(e.buf, m.data(), m.size()));
    EXPECT_EQ(e.flags & SF_MORE, 0u);
    rc[e.tag] = c;
  }
  // Tag 7 waits for its tag.
  EXPECT_TRUE(f.Quiet(1));
  ASSERT_EQ(sf_trecv(rx, nullptr, 0, nullptr, SF_ADDR_UNSPEC, 7, 0, &ctx7), 0);
  sf_cq_tagged_entry e = ReadEntry(f, 1);
  EXPECT_EQ(e.tag, 7u);
  rc[7] = static_cast<sf_recv_context*>(e.op_context);
  EXPECT_EQ(rc[7]->context, &ctx7);
  // Claim 6 (too small a buffer: truncated), discard 5 and 7.
  std::vector<uint8_t> small(100);
  iovec iov{small.data(), small.size()};
  sf_msg_tagged t{};
  t.msg_iov = &iov;
  t.iov_count = 1;
  t.context = rc[6];
  ASSERT_EQ(sf_trecvmsg(rx, &t, SF_CLAIM), 0) << sf_last_error();
  ASSERT_EQ(f.ReadOne(1, &e), -SF_EAVAIL);
  sf_cq_err_entry x;
  ASSERT_EQ(sf_cq_readerr(f.peers[1].cq, &x, 0), 1);
  EXPECT_EQ(x.err, SF_ETRUNC);
  EXPECT_EQ(x.olen, m6.size() - small.size());
  EXPECT_EQ(x.op_context, &ctx6);
  EXPECT_EQ(0, std::memcmp(small.data(), m6.data(), small.size()));
  for (uint64_t tag : {5, 7}) {
    t.context = rc[tag];
    ASSERT_EQ(sf_trecvmsg(rx, &t, SF_DISCARD), 0) << sf_last_error();
  }
  EXPECT_TRUE(f.Quiet(1));
}

// The AV can change under an endpoint: a removed index reused for another
// peer sends there, and sources follow the AV (cached lookups must notice).
TEST_P(ConformanceMoreTest, AvChangesRedirectSendsAndSources) {
  Fixture f;
  ASSERT_TRUE(f.Open(backend(), 3));
  // Sends `tag` from node `from` to its AV index `dest`; returns the source
  // node `to` reports for it.
  auto transfer = [&](int from, sf_addr_t dest, int to, uint64_t tag) {
    char in[8] = {}, out[8] = "x";
    int ctx = 0;
    EXPECT_EQ(sf_trecv(f.peers[to].ep, in, sizeof in, nullptr, SF_ADDR_UNSPEC,
                       tag, 0, &ctx),
              0);
    EXPECT_EQ(sf_tsend(f.peers[from].ep, out, sizeof out, nullptr, dest, tag,
                       nullptr),
              0)
        << sf_last_error();
    sf_addr_t src = 0;
    for (int r = 0; r < 100000; ++r) {
      sf_cq_tagged_entry e;
      if (sf_cq_readfrom(f.peers[to].cq, &e, 1, &src) == 1 &&
          e.op_context == &ctx) {
        return src;
      }
      f.Progress();
    }
    ADD_FAILURE() << "tag " << tag << " did not arrive at node " << to;
    return SF_ADDR_NOTAVAIL;
  };
  const sf_addr_t to1 = f.peers[0].addr[1], to2 = f.peers[0].addr[2];
  EXPECT_EQ(transfer(1, f.peers[1].addr[0], 0, 1), to1);
  EXPECT_EQ(transfer(0, to1, 1, 2), f.peers[1].addr[0]);
  // Node 0's index for node 1 now names node 2.
  uint8_t name2[SF_NAME_BYTES];
  size_t len = sizeof name2;
  ASSERT_EQ(sf_av_lookup(f.peers[0].av, to2, name2, &len), 0);
  sf_addr_t gone[2] = {to1, to2};
  ASSERT_EQ(sf_av_remove(f.peers[0].av, gone, 2, 0), 0);
  sf_addr_t reused = SF_ADDR_NOTAVAIL;
  ASSERT_EQ(sf_av_insert(f.peers[0].av, name2, 1, &reused, 0, nullptr), 1);
  ASSERT_EQ(reused, to1);  // Lowest free index first.
  EXPECT_EQ(transfer(0, reused, 2, 3), f.peers[2].addr[0]);
  // Node 1 is no longer in node 0's AV: its messages carry no source.
  EXPECT_EQ(transfer(1, f.peers[1].addr[0], 0, 4), SF_ADDR_NOTAVAIL);
  // And node 2's are reported under the reused index.
  EXPECT_EQ(transfer(2, f.peers[2].addr[0], 0, 5), reused);
}

// ---- FI_EP_MSG: connect, accept, reject, shutdown ----

struct CmEvent {
  uint32_t event = 0;
  sf_fid* fid = nullptr;
  sf_info* info = nullptr;
  std::string data;
};

// Waits for peer i's next event (driving every peer); fails on an error.
CmEvent NextEvent(Fixture& f, sf_eq* eq) {
  alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  CmEvent out;
  ssize_t n = -SF_EAGAIN;
  for (int r = 0; r < 100000 && n == -SF_EAGAIN; ++r) {
    n = sf_eq_read(eq, &out.event, buf, sizeof buf, 0);
    if (n == -SF_EAGAIN) f.Progress();
  }
  EXPECT_GE(n, static_cast<ssize_t>(sizeof(sf_eq_cm_entry))) << n;
  if (n < static_cast<ssize_t>(sizeof(sf_eq_cm_entry))) return out;
  auto* e = reinterpret_cast<sf_eq_cm_entry*>(buf);
  out.fid = e->fid;
  out.info = e->info;
  out.data.assign(reinterpret_cast<char*>(e->data), n - sizeof(sf_eq_cm_entry));
  return out;
}

// Two nodes with CQs, AVs and EQs, a listener on node 0 and an MSG endpoint
// on node 1 (not connected yet).
struct MsgSetup {
  Fixture f;
  sf_pep* pep = nullptr;
  sf_ep* client = nullptr;
  uint8_t pep_name[SF_NAME_BYTES] = {};

  ::testing::AssertionResult Open(const Backend& backend) {
    // The fixture's RDM peers give us domains and CQs; the MSG endpoints are
    // extra objects on them.
    if (auto r = f.Open(backend, 2); !r) return r;
    for (::softfab::testing::Peer& p : f.peers) {
      if (sf_eq_open(f.fabric, nullptr, &p.eq, nullptr)) {
        return ::testing::AssertionFailure() << sf_last_error();
      }
    }
    size_t len = sizeof pep_name;
    if (sf_passive_ep(f.peers[0].domain, &pep, nullptr) ||
        sf_pep_bind(pep, &f.peers[0].eq->fid, 0) || sf_listen(pep) ||
        sf_getname(&pep->fid, pep_name, &len)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    f.pep = pep;
    client = NewMsgEp(1, nullptr);
    if (client == nullptr) return ::testing::AssertionFailure() << "client";
    return ::testing::AssertionSuccess();
  }

  sf_ep* NewMsgEp(int node, sf_info* info) {
    sf_ep_attr ea{};
    ea.type = SF_EP_MSG;
    ea.caps = SF_MSG | SF_TAGGED;
    ea.info = info;
    sf_ep* ep = nullptr;
    ::softfab::testing::Peer& p = f.peers[node];
    if (sf_endpoint(p.domain, &ea, &ep, nullptr) ||
        sf_ep_bind(ep, &p.cq->fid, SF_TRANSMIT | SF_RECV) ||
        sf_ep_bind(ep, &p.eq->fid, 0) || sf_enable(ep)) {
      ADD_FAILURE() << sf_last_error();
      return nullptr;
    }
    extra.push_back(ep);
    return ep;
  }

  ~MsgSetup() {
    for (sf_ep* ep : extra) EXPECT_EQ(sf_close(&ep->fid), 0);
  }
  std::vector<sf_ep*> extra;
};

TEST_P(ConformanceMoreTest, MsgConnectAcceptTransferShutdown) {
  MsgSetup m;
  ASSERT_TRUE(m.Open(backend()));
  Fixture& f = m.f;
  ASSERT_EQ(sf_connect(m.client, m.pep_name, "hello", 5), 0) << sf_last_error();
  // Connecting twice is refused.
  EXPECT_EQ(sf_connect(m.client, m.pep_name, nullptr, 0), -SF_EOPBADSTATE);
  CmEvent req = NextEvent(f, f.peers[0].eq);
  ASSERT_EQ(req.event, static_cast<uint32_t>(SF_CONNREQ));
  EXPECT_EQ(req.fid, &m.pep->fid);
  EXPECT_EQ(req.data, "hello");
  ASSERT_NE(req.info, nullptr);
  sf_ep* server = m.NewMsgEp(0, req.info);
  sf_freeinfo(req.info);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(sf_accept(server, "welcome", 7), 0) << sf_last_error();
  CmEvent c1 = NextEvent(f, f.peers[1].eq);
  EXPECT_EQ(c1.event, static_cast<uint32_t>(SF_CONNECTED));
  EXPECT_EQ(c1.fid, &m.client->fid);
  EXPECT_EQ(c1.data, "welcome");
  CmEvent c0 = NextEvent(f, f.peers[0].eq);
  EXPECT_EQ(c0.event, static_cast<uint32_t>(SF_CONNECTED));
  EXPECT_EQ(c0.fid, &server->fid);

  // Both ways, untagged and tagged, eager and rendezvous.
  const std::vector<uint8_t> a = Pattern(100, 1), b = Pattern(1 << 20, 2);
  std::vector<uint8_t> ra(a.size()), rb(b.size());
  int actx = 0, bctx = 0;
  ASSERT_EQ(
      sf_recv(server, ra.data(), ra.size(), nullptr, SF_ADDR_UNSPEC, &actx), 0);
  ASSERT_EQ(sf_trecv(m.client, rb.data(), rb.size(), nullptr, SF_ADDR_UNSPEC,
                     42, 0, &bctx),
            0);
  ASSERT_EQ(sf_send(m.client, a.data(), a.size(), nullptr, 0, nullptr), 0)
      << sf_last_error();
  ASSERT_EQ(sf_tsend(server, b.data(), b.size(), nullptr, 0, 42, nullptr), 0);
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(0, 2, &ok, &err);  // server: recv + send
  f.Collect(1, 2, &ok, &err);  // client: send + recv
  EXPECT_EQ(err.size(), 0u);
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
  for (const auto& e : ok) {
    if (e.op_context == &actx || e.op_context == &bctx) {
      EXPECT_EQ(e.len, e.op_context == &actx ? a.size() : b.size());
    }
  }

  // Shutdown: the peer hears of it; further sends fail on both sides.
  ASSERT_EQ(sf_shutdown(m.client, 0), 0) << sf_last_error();
  CmEvent down = NextEvent(f, f.peers[0].eq);
  EXPECT_EQ(down.event, static_cast<uint32_t>(SF_SHUTDOWN));
  EXPECT_EQ(down.fid, &server->fid);
  EXPECT_EQ(sf_send(m.client, a.data(), a.size(), nullptr, 0, nullptr),
            -SF_EHOSTUNREACH);
  EXPECT_EQ(sf_send(server, a.data(), a.size(), nullptr, 0, nullptr),
            -SF_EHOSTUNREACH);
  EXPECT_EQ(sf_shutdown(m.client, 0), -SF_EOPBADSTATE);
}

TEST_P(ConformanceMoreTest, MsgRejectCarriesDataToTheConnector) {
  MsgSetup m;
  ASSERT_TRUE(m.Open(backend()));
  Fixture& f = m.f;
  ASSERT_EQ(sf_connect(m.client, m.pep_name, nullptr, 0), 0);
  CmEvent req = NextEvent(f, f.peers[0].eq);
  ASSERT_EQ(req.event, static_cast<uint32_t>(SF_CONNREQ));
  ASSERT_EQ(sf_reject(m.pep, req.info, "busy", 4), 0) << sf_last_error();
  // Rejecting twice is refused.
  EXPECT_EQ(sf_reject(m.pep, req.info, nullptr, 0), -SF_EINVAL);
  sf_freeinfo(req.info);
  uint32_t event = 0;
  alignas(8) uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  ssize_t n = -SF_EAGAIN;
  for (int r = 0; r < 100000 && n == -SF_EAGAIN; ++r) {
    n = sf_eq_read(f.peers[1].eq, &event, buf, sizeof buf, 0);
    if (n == -SF_EAGAIN) f.Progress();
  }
  ASSERT_EQ(n, -SF_EAVAIL);
  sf_eq_err_entry x;
  ASSERT_EQ(sf_eq_readerr(f.peers[1].eq, &x, 0),
            static_cast<ssize_t>(sizeof x));
  EXPECT_EQ(x.err, SF_ECONNREFUSED);
  EXPECT_EQ(x.fid, &m.client->fid);
  ASSERT_EQ(x.err_data_size, 4u);
  EXPECT_EQ(std::string(static_cast<char*>(x.err_data), 4), "busy");
  EXPECT_EQ(sf_send(m.client, buf, 1, nullptr, 0, nullptr), -SF_EHOSTUNREACH);
}

TEST_P(ConformanceMoreTest, MsgCallsRefuseBadArguments) {
  MsgSetup m;
  ASSERT_TRUE(m.Open(backend()));
  Fixture& f = m.f;
  sf_ep* rdm = f.peers[1].ep;
  uint8_t big[64] = {};
  uint8_t buf[sizeof(sf_eq_cm_entry) + 8];
  uint32_t event = 0;
  // An MSG endpoint without an EQ, and one not enabled.
  sf_ep_attr ea{};
  ea.type = SF_EP_MSG;
  sf_ep *no_eq = nullptr, *not_enabled = nullptr;
  ASSERT_EQ(sf_endpoint(f.peers[1].domain, &ea, &no_eq, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(no_eq, &f.peers[1].cq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_enable(no_eq), 0);
  ASSERT_EQ(sf_endpoint(f.peers[1].domain, &ea, &not_enabled, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(not_enabled, &f.peers[1].eq->fid, 0), 0);
  struct Case {
    const char* what;
    ssize_t got;
    ssize_t want;
  };
  const Case cases[] = {
      {"connect NULL ep", sf_connect(nullptr, m.pep_name, nullptr, 0),
       -SF_EINVAL},
      {"connect NULL addr", sf_connect(m.client, nullptr, nullptr, 0),
       -SF_EINVAL},
      {"connect RDM", sf_connect(rdm, m.pep_name, nullptr, 0), -SF_EINVAL},
      {"connect 57 bytes of data", sf_connect(m.client, m.pep_name, big, 57),
       -SF_EINVAL},
      {"connect NULL data len 4", sf_connect(m.client, m.pep_name, nullptr, 4),
       -SF_EINVAL},
      {"connect without an EQ", sf_connect(no_eq, m.pep_name, nullptr, 0),
       -SF_EINVAL},
      {"connect before enable", sf_connect(not_enabled, m.pep_name, nullptr, 0),
       -SF_EOPBADSTATE},
      {"accept without a request", sf_accept(m.client, nullptr, 0), -SF_EINVAL},
      {"reject NULL info", sf_reject(m.pep, nullptr, nullptr, 0), -SF_EINVAL},
      {"shutdown unconnected", sf_shutdown(m.client, 0), -SF_EOPBADSTATE},
      {"shutdown flags", sf_shutdown(m.client, 1), -SF_EINVAL},
      {"send unconnected", sf_send(m.client, big, 1, nullptr, 0, nullptr),
       -SF_ENOTCONN},
      {"bind EQ to RDM", sf_ep_bind(rdm, &f.peers[1].eq->fid, 0),
       -SF_EOPBADSTATE},
      {"pep bind a CQ", sf_pep_bind(m.pep, &f.peers[0].cq->fid, 0), -SF_EINVAL},
      {"pep bind flags", sf_pep_bind(m.pep, &f.peers[0].eq->fid, 1),
       -SF_EINVAL},
      {"listen NULL", sf_listen(nullptr), -SF_EINVAL},
      {"eq_read NULL buf", sf_eq_read(f.peers[0].eq, &event, nullptr, 64, 0),
       -SF_EINVAL},
      {"eq_read short buf", sf_eq_read(f.peers[0].eq, &event, buf, 8, 0),
       -SF_EINVAL},
      {"eq_read bad flags",
       sf_eq_read(f.peers[0].eq, &event, buf, sizeof buf, 1), -SF_EINVAL},
      {"eq_readerr none",
       [&] {
         sf_eq_err_entry x;
         return sf_eq_readerr(f.peers[0].eq, &x, 0);
       }(),
       -SF_EAGAIN},
      {"eq_open NULL", sf_eq_open(nullptr, nullptr, nullptr, nullptr),
       -SF_EINVAL},
      {"close bound EQ", sf_close(&f.peers[1].eq->fid), -SF_EBUSY},
      {"getopt CM data size",
       static_cast<ssize_t>(SizeOpt(m.client, SF_OPT_CM_DATA_SIZE)), 56},
  };
  for (const Case& c : cases) EXPECT_EQ(c.got, c.want) << c.what;
  // Nothing happened: no events, no completions.
  EXPECT_EQ(sf_eq_read(f.peers[0].eq, &event, buf, sizeof buf, 0), -SF_EAGAIN);
  EXPECT_EQ(sf_eq_read(f.peers[1].eq, &event, buf, sizeof buf, 0), -SF_EAGAIN);
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
  EXPECT_EQ(sf_close(&no_eq->fid), 0);
  EXPECT_EQ(sf_close(&not_enabled->fid), 0);
}

SOFTFAB_INSTANTIATE_PER_BACKEND(ConformanceMoreTest);

}  // namespace
