// Errors that explain themselves: every error completion the suites produce
// (truncation, cancel, an empty peek, a peer gone: transport retries exceeded)
// carries its cause in prov_errno, and sf_cq_strerror turns it into a
// sentence. Per backend (tests/conformance_fixture.h), plus a link taken down
// in the simulator under the core, and sf_cq_strerror's own contract.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "backends/sim/sim_fabric.h"
#include "core/prov_errno.h"
#include "tests/conformance_fixture.h"
#include "tests/messaging_harness.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

constexpr int kRetryExceeded = 12;  // IBV_WC_RETRY_EXC_ERR
constexpr int kFlushed = 5;         // IBV_WC_WR_FLUSH_ERR
constexpr int kRnrRetryExceeded = 13;

// sf_cq_strerror's sentence for `prov_errno`, written into a buffer.
std::string Sentence(sf_cq* cq, int prov_errno) {
  char buf[512];
  const char* s = sf_cq_strerror(cq, prov_errno, nullptr, buf, sizeof buf);
  EXPECT_EQ(s, buf);
  return s == nullptr ? "" : s;
}

class CqStrerrorTest : public ::softfab::testing::PerBackendTest {
 protected:
  // Peer i's next entry, which must be an error.
  ::testing::AssertionResult NextError(int i, sf_cq_err_entry* x) {
    sf_cq_tagged_entry e;
    const ssize_t n = f.ReadOne(i, &e);
    if (n != -SF_EAVAIL) {
      return ::testing::AssertionFailure() << "not an error entry: " << n;
    }
    if (sf_cq_readerr(f.peers[i].cq, x, 0) != 1) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    return ::testing::AssertionSuccess();
  }
  // The sentence for `x` on peer i's CQ, expected to contain `word`.
  void ExpectExplained(int i, const sf_cq_err_entry& x, const char* word) {
    const std::string s = Sentence(f.peers[i].cq, x.prov_errno);
    EXPECT_NE(s.find(word), std::string::npos)
        << "prov_errno " << x.prov_errno << ": " << s;
  }
  Fixture f;
};

// A message larger than the receive, eager and rendezvous alike: SF_ETRUNC
// with the bytes that did not fit in olen, and the cause named.
TEST_P(CqStrerrorTest, TruncationNamesItsCause) {
  ASSERT_TRUE(f.Open(backend(), 2));
  for (const size_t len : {size_t{100}, size_t{20000}}) {
    SCOPED_TRACE(len);
    const std::vector<uint8_t> out = Pattern(len, 1);
    std::vector<uint8_t> in(16);
    int rctx = 0, sctx = 0;
    ASSERT_EQ(sf_trecv(f.peers[1].ep, in.data(), in.size(), nullptr,
                       SF_ADDR_UNSPEC, 5, 0, &rctx),
              0);
    ASSERT_EQ(sf_tsend(f.peers[0].ep, out.data(), out.size(), nullptr,
                       f.peers[0].addr[1], 5, &sctx),
              0)
        << sf_last_error();
    sf_cq_err_entry x{};
    ASSERT_TRUE(NextError(1, &x));
    EXPECT_EQ(x.op_context, &rctx);
    EXPECT_EQ(x.err, SF_ETRUNC);
    EXPECT_EQ(x.olen, len - in.size());
    EXPECT_EQ(x.prov_errno, SF_PROV_TRUNCATED);
    ExpectExplained(1, x, "truncated");
    sf_cq_tagged_entry e;
    ASSERT_EQ(f.ReadOne(0, &e), 1);
    EXPECT_EQ(e.op_context, &sctx);
  }
}

TEST_P(CqStrerrorTest, CancelNamesItsCause) {
  ASSERT_TRUE(f.Open(backend(), 2));
  uint8_t in[64];
  int rctx = 0;
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in, sizeof in, nullptr, SF_ADDR_UNSPEC, 5,
                     0, &rctx),
            0);
  ASSERT_EQ(sf_cancel(&f.peers[1].ep->fid, &rctx), 0);
  sf_cq_err_entry x{};
  ASSERT_TRUE(NextError(1, &x));
  EXPECT_EQ(x.op_context, &rctx);
  EXPECT_EQ(x.err, SF_ECANCELED);
  EXPECT_EQ(x.prov_errno, SF_PROV_CANCELED);
  ExpectExplained(1, x, "sf_cancel");
}

TEST_P(CqStrerrorTest, EmptyPeekNamesItsCause) {
  ASSERT_TRUE(f.Open(backend(), 2));
  int ctx = 0;
  sf_msg_tagged m{nullptr, nullptr, 0, SF_ADDR_UNSPEC, 9, 0, &ctx, 0};
  ASSERT_EQ(sf_trecvmsg(f.peers[1].ep, &m, SF_PEEK), 0) << sf_last_error();
  sf_cq_err_entry x{};
  ASSERT_TRUE(NextError(1, &x));
  EXPECT_EQ(x.err, SF_ENOMSG);
  EXPECT_EQ(x.prov_errno, SF_PROV_NO_MESSAGE);
  ExpectExplained(1, x, "SF_PEEK");
}

// The peer's endpoint closes under a connection: the first send runs out of
// transport retries; the rest are flushed by the device (WR_FLUSH_ERR, whose
// sentence points at the first error) or, never posted, failed with the
// connection's cause. Each completes exactly once.
TEST_P(CqStrerrorTest, ClosedPeerFailsSendsWithRetryExceeded) {
  ASSERT_TRUE(f.Open(backend(), 2));
  {  // Connected first.
    uint8_t in[8];
    uint8_t out[8] = {1, 2, 3};
    ASSERT_EQ(
        sf_recv(f.peers[1].ep, in, sizeof in, nullptr, SF_ADDR_UNSPEC, nullptr),
        0);
    ASSERT_EQ(sf_send(f.peers[0].ep, out, sizeof out, nullptr,
                      f.peers[0].addr[1], nullptr),
              0);
    sf_cq_tagged_entry e;
    ASSERT_EQ(f.ReadOne(1, &e), 1);
    ASSERT_EQ(f.ReadOne(0, &e), 1);
  }
  ASSERT_EQ(sf_close(&f.peers[1].ep->fid), 0) << sf_last_error();
  f.peers[1].ep = nullptr;
  constexpr int kSends = 4;
  uint8_t out[64] = {};
  int ctx[kSends];
  for (int i = 0; i < kSends; ++i) {
    ASSERT_EQ(sf_send(f.peers[0].ep, out, sizeof out, nullptr,
                      f.peers[0].addr[1], &ctx[i]),
              0)
        << sf_last_error();
  }
  std::set<void*> seen;
  for (int i = 0; i < kSends; ++i) {
    sf_cq_err_entry x{};
    ASSERT_TRUE(NextError(0, &x)) << "send " << i;
    EXPECT_TRUE(seen.insert(x.op_context).second) << "completed twice";
    EXPECT_EQ(x.err, SF_EIO);
    if (i == 0) {
      EXPECT_EQ(x.prov_errno, kRetryExceeded);
      ExpectExplained(0, x, "retries");
    } else if (x.prov_errno == kFlushed) {
      ExpectExplained(0, x, "first error completion");
    } else {
      EXPECT_EQ(x.prov_errno, kRetryExceeded);
    }
  }
  EXPECT_TRUE(f.Quiet(0));
}

// The event queue's error entries carry their cause the same way: an
// SF_EP_MSG connect to an endpoint that never answers as a listener times out
// with SF_PROV_PEER_UNREACHABLE.
TEST_P(CqStrerrorTest, UnansweredConnectNamesItsCause) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_eq* eq = nullptr;
  ASSERT_EQ(sf_eq_open(f.fabric, nullptr, &eq, nullptr), 0);
  sf_cq* cq = nullptr;
  sf_ep* ep = nullptr;
  ASSERT_TRUE(f.AddEndpoint(0, SF_EP_MSG, {&eq->fid}, true, &cq, &ep));
  uint8_t name[SF_NAME_BYTES];
  size_t len = sizeof name;
  ASSERT_EQ(sf_getname(&f.peers[1].ep->fid, name, &len), 0);  // RDM, not a
  ASSERT_EQ(sf_connect(ep, name, nullptr, 0), 0);             // listener.
  uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  ssize_t n = -SF_EAGAIN;
  for (int r = 0; r < 1000000 && n == -SF_EAGAIN; ++r) {
    n = sf_eq_read(eq, &event, buf, sizeof buf, 0);
    f.Progress();
  }
  ASSERT_EQ(n, -SF_EAVAIL);
  sf_eq_err_entry x{};
  ASSERT_EQ(sf_eq_readerr(eq, &x, 0), static_cast<ssize_t>(sizeof x));
  EXPECT_EQ(x.err, SF_ETIMEDOUT);
  EXPECT_EQ(x.prov_errno, SF_PROV_PEER_UNREACHABLE);
  const std::string s = Sentence(cq, x.prov_errno);
  EXPECT_NE(s.find("connection setup"), std::string::npos) << s;
  EXPECT_EQ(sf_close(&ep->fid), 0) << sf_last_error();
  EXPECT_EQ(sf_close(&cq->fid), 0) << sf_last_error();
  EXPECT_EQ(sf_close(&eq->fid), 0) << sf_last_error();
}

SOFTFAB_INSTANTIATE_PER_BACKEND(CqStrerrorTest);

// Under the core, on the simulator: the receiver's link goes down once the
// connection is up. The first send fails with the transport's status
// (retries exceeded); the ones behind it are flushed (WR_FLUSH_ERR) or, never
// posted, carry the connection's cause.
TEST(CqStrerrorCoreTest, LinkDownFailsSendsWithRetryExceeded) {
  namespace sim = ::softfab::sim;
  namespace core = ::softfab::core;
  using ::softfab::testing::TRecv;
  using ::softfab::testing::TSend;
  constexpr uint64_t kDownNs = 5'000'000;
  sim::SimConfig config;
  sim::TimedFault down;
  down.kind = sim::TimedFaultKind::kLinkDown;
  down.time_ns = kDownNs;
  down.node = 1;
  config.faults.timed_faults = {down};
  core::EndpointAttr attr;
  attr.rc_timeout = 8;  // 1 ms per try: the retries run out sooner.
  ::softfab::testing::Cluster c(2, config, attr);
  uint8_t buf[32] = {};
  uint8_t in[32];
  iovec iov, riov;
  int rctx = 0, sctx = 0;
  ASSERT_TRUE(c[1].ep->Recv(TRecv(in, sizeof in, 1, 0, &rctx, &riov)).ok());
  ASSERT_TRUE(
      c[0].ep->Send(TSend(buf, sizeof buf, c[0].addr[1], 1, &sctx, &iov)).ok());
  core::CqEntry e;
  // An empty poll runs the next event however far: keep the fault's away
  // until the connection is up.
  c.fabric().SetPollHorizon(kDownNs - 1);
  ASSERT_EQ(c.ReadOne(1, &e), 1);  // Connected.
  ASSERT_EQ(c.ReadOne(0, &e), 1);
  ASSERT_LT(c.fabric().clock().NowNs(), kDownNs);
  c.fabric().RunUntil(kDownNs + 1);
  c.fabric().SetPollHorizon(UINT64_MAX);
  constexpr int kSends = 3;
  int ctx[kSends];
  for (int i = 0; i < kSends; ++i) {
    ASSERT_TRUE(
        c[0].ep->Send(TSend(buf, sizeof buf, c[0].addr[1], 1, &ctx[i], &iov))
            .ok());
  }
  for (int i = 0; i < kSends; ++i) {
    ASSERT_EQ(c.ReadOne(0, &e, 2000000), -core::CompletionQueue::kErrAvail)
        << "send " << i;
    core::CqErrEntry x;
    ASSERT_TRUE(c[0].cq->ReadError(&x).ok());
    EXPECT_EQ(x.op_context, &ctx[i]);
    EXPECT_EQ(x.err, EIO);
    if (i == 0) {
      EXPECT_EQ(x.prov_errno, kRetryExceeded);
    } else {
      EXPECT_TRUE(x.prov_errno == kRetryExceeded || x.prov_errno == kFlushed)
          << x.prov_errno;
    }
  }
}

// sf_cq_strerror's contract: a sentence for every cause, and a clear one for
// everything else; never NULL.
TEST(CqStrerrorContractTest, EveryCauseHasItsOwnSentence) {
  Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 1));
  sf_cq* cq = f.peers[0].cq;
  std::set<std::string> sentences;
  std::vector<int> causes;
  for (int p = 1; p <= SF_PROV_WC_LAST; ++p) causes.push_back(p);
  for (int p = SF_PROV_OWN_BASE + 1; p <= SF_PROV_OWN_LAST; ++p) {
    causes.push_back(p);
  }
  for (const int p : causes) {
    const char* s = sf_cq_strerror(cq, p, nullptr, nullptr, 0);
    ASSERT_NE(s, nullptr) << p;
    EXPECT_GT(std::strlen(s), 40u) << p << ": " << s;
    EXPECT_TRUE(sentences.insert(s).second) << p << " repeats: " << s;
  }
  const std::string rnr = Sentence(cq, kRnrRetryExceeded);
  EXPECT_NE(rnr.find("no receive posted"), std::string::npos) << rnr;
  EXPECT_NE(rnr.find("rnr_retry"), std::string::npos) << rnr;
  const std::string retry = Sentence(cq, kRetryExceeded);
  EXPECT_NE(retry.find("retry_cnt"), std::string::npos) << retry;
}

TEST(CqStrerrorContractTest, BadArgumentsGetAClearSentence) {
  Fixture f;
  ASSERT_TRUE(f.Open(SF_BACKEND_SIM, 1));
  sf_cq* cq = f.peers[0].cq;
  auto* not_cq = reinterpret_cast<sf_cq*>(f.peers[0].av);
  for (sf_cq* bad : {static_cast<sf_cq*>(nullptr), not_cq}) {
    const std::string s = Sentence(bad, SF_PROV_TRUNCATED);
    EXPECT_NE(s.find("not an open completion queue"), std::string::npos) << s;
  }
  for (const int p : {-1, SF_PROV_WC_LAST + 1, SF_PROV_OWN_BASE,
                      SF_PROV_OWN_LAST + 1, 1 << 30}) {
    const std::string s = Sentence(cq, p);
    EXPECT_NE(s.find("unknown provider error"), std::string::npos) << p;
    EXPECT_NE(s.find("(" + std::to_string(p) + ")"), std::string::npos) << s;
    const char* constant = sf_cq_strerror(cq, p, nullptr, nullptr, 0);
    ASSERT_NE(constant, nullptr);
    EXPECT_NE(std::string(constant).find("unknown"), std::string::npos);
  }
  EXPECT_NE(Sentence(cq, 0).find("no provider error"), std::string::npos);
  // A short buffer holds the start of the sentence, NUL-terminated.
  char small[8];
  std::memset(small, 'x', sizeof small);
  EXPECT_EQ(sf_cq_strerror(cq, SF_PROV_TRUNCATED, nullptr, small, sizeof small),
            small);
  EXPECT_EQ(std::string(small), "message");
  // A buffer of length 0 is not written: the constant sentence comes back.
  char untouched = 'x';
  const char* s = sf_cq_strerror(cq, SF_PROV_TRUNCATED, nullptr, &untouched, 0);
  EXPECT_EQ(untouched, 'x');
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::string(s), Sentence(cq, SF_PROV_TRUNCATED));
}

}  // namespace
