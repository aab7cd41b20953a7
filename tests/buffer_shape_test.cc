// Every buffer shape, on every path: a seeded property test over the send
// shape x the receive shape (1 to SF_IOV_LIMIT pieces, zero-length pieces,
// lengths at the eager size and at common path MTUs, plus and minus one,
// buffers from 1 B to several MiB) x descriptors given or not x msg / tagged
// x RDM / MSG endpoints, and multi-recv buffers consumed by several messages.
// Each case checks the bytes (and that nothing outside the message is
// written), the completion lengths, truncation (olen) and that each operation
// completes exactly once. Per backend (tests/conformance_fixture.h); the seeds
// are fixed and a failure names its seed and case: SOFTFAB_SHAPE_SEED=<seed>
// replays that seed alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Fixture;

constexpr size_t kEager = 8192;  // core::EndpointAttr::eager_max
constexpr uint8_t kCanary = 0xEE;
constexpr size_t kGapMax = 16;  // Bytes between a buffer's pieces.

// SplitMix64: numbers from the raw bits, the same on every standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
  bool Percent(unsigned p) { return Below(100) < p; }

 private:
  uint64_t s_;
};

// A buffer cut into pieces, with canary gaps between and around them.
struct Shape {
  std::vector<uint8_t> backing;
  std::vector<iovec> iov;
  size_t total = 0;
};

// `total` bytes in 1 to SF_IOV_LIMIT pieces (some possibly empty).
Shape MakeShape(Rng& rng, size_t total) {
  const size_t pieces = 1 + rng.Below(SF_IOV_LIMIT);
  std::vector<size_t> cuts = {0, total};
  for (size_t i = 1; i < pieces; ++i) {
    // A third of the cuts repeat one already made: a zero-length piece.
    cuts.push_back(rng.Percent(33) ? cuts[rng.Below(cuts.size())]
                                   : rng.Below(total + 1));
  }
  std::sort(cuts.begin(), cuts.end());
  Shape s;
  s.total = total;
  std::vector<size_t> gaps(pieces + 1);
  size_t bytes = total;
  for (size_t& g : gaps) bytes += (g = rng.Below(kGapMax + 1));
  s.backing.assign(std::max<size_t>(bytes, 1), kCanary);
  size_t at = gaps[0];
  for (size_t i = 0; i < pieces; ++i) {
    const size_t len = cuts[i + 1] - cuts[i];
    s.iov.push_back(iovec{s.backing.data() + at, len});
    at += len + gaps[i + 1];
  }
  return s;
}

void Fill(Shape& s, uint64_t seed) {
  Rng rng(seed);
  for (const iovec& v : s.iov) {
    auto* p = static_cast<uint8_t*>(v.iov_base);
    for (size_t i = 0; i < v.iov_len; ++i)
      p[i] = static_cast<uint8_t>(rng.Next());
  }
}

// The pieces' bytes in order (the first `n` of them).
std::vector<uint8_t> Gather(const Shape& s, size_t n) {
  std::vector<uint8_t> out;
  out.reserve(n);
  for (const iovec& v : s.iov) {
    const size_t k = std::min(v.iov_len, n - out.size());
    auto* p = static_cast<const uint8_t*>(v.iov_base);
    out.insert(out.end(), p, p + k);
  }
  return out;
}

// Bytes of the receive's backing outside its first `n` message bytes that
// are not canary any more.
size_t Stray(const Shape& s, size_t n) {
  std::vector<bool> message(s.backing.size(), false);
  size_t left = n;
  for (const iovec& v : s.iov) {
    const size_t k = std::min(v.iov_len, left);
    const size_t off =
        static_cast<const uint8_t*>(v.iov_base) - s.backing.data();
    std::fill(message.begin() + off, message.begin() + off + k, true);
    left -= k;
  }
  size_t stray = 0;
  for (size_t i = 0; i < s.backing.size(); ++i) {
    stray += !message[i] && s.backing[i] != kCanary;
  }
  return stray;
}

std::string Describe(const Shape& s) {
  std::ostringstream o;
  o << s.total << " B in {";
  for (size_t i = 0; i < s.iov.size(); ++i) {
    o << (i ? ", " : "") << s.iov[i].iov_len;
  }
  o << "}";
  return o.str();
}

// Registers a shape's backing (descriptors given) or not (NULL desc).
class Registration {
 public:
  Registration(sf_domain* domain, Shape& s, bool give) {
    if (!give) return;
    const uint64_t access = SF_SEND | SF_RECV | SF_READ | SF_WRITE |
                            SF_REMOTE_READ | SF_REMOTE_WRITE;
    ok_ = sf_mr_reg(domain, s.backing.data(), s.backing.size(), access, 0, 0, 0,
                    &mr_, nullptr) == 0;
    desc_.assign(s.iov.size(), ok_ ? sf_mr_desc(mr_) : nullptr);
  }
  ~Registration() {
    if (mr_) EXPECT_EQ(sf_close(&mr_->fid), 0) << sf_last_error();
  }
  bool ok() const { return ok_; }
  void** desc() { return desc_.empty() ? nullptr : desc_.data(); }

 private:
  sf_mr* mr_ = nullptr;
  bool ok_ = true;
  std::vector<void*> desc_;
};

// Message lengths: the edges (eager size and 1 KiB / 4 KiB MTUs, each plus and
// minus one), small and large ones, and a random one up to `max`.
size_t PickLength(Rng& rng, size_t max) {
  static constexpr size_t kEdges[] = {0,
                                      1,
                                      2,
                                      63,
                                      1023,
                                      1024,
                                      1025,
                                      4095,
                                      4096,
                                      4097,
                                      kEager - 1,
                                      kEager,
                                      kEager + 1,
                                      2 * kEager + 1,
                                      65537,
                                      1 << 20,
                                      (3 << 20) + 5};
  if (rng.Percent(70)) {
    const size_t n = kEdges[rng.Below(sizeof kEdges / sizeof kEdges[0])];
    if (n <= max) return n;
  }
  return rng.Below(rng.Percent(70) ? std::min<size_t>(max, 3 * kEager)
                                   : max + 1);
}

// The receive's capacity for a message of `len`: exact, larger, or smaller
// (truncated).
size_t PickCapacity(Rng& rng, size_t len) {
  switch (rng.Below(4)) {
    case 0:
      return len;
    case 1:
      return len + 1 + rng.Below(4096);
    case 2:
      return 2 * len + 1;
    default:
      return len == 0 ? 0 : rng.Below(len);
  }
}

std::vector<uint64_t> Seeds(std::initializer_list<uint64_t> fixed) {
  if (const char* env = std::getenv("SOFTFAB_SHAPE_SEED")) {
    return {std::strtoull(env, nullptr, 10)};
  }
  return fixed;
}

class BufferShapeTest : public ::softfab::testing::PerBackendTest {
 protected:
  bool verbs() const { return backend().backend == SF_BACKEND_VERBS; }
  // The VM's Soft-RoCE runs under emulation: fewer, smaller cases there.
  size_t max_len() const { return verbs() ? (1 << 20) : (4 << 20); }
  int cases() const { return verbs() ? 24 : 40; }

  // Posts a send, retrying while the endpoint says EAGAIN.
  ssize_t Post(const std::function<ssize_t()>& post) {
    ssize_t rc;
    for (int r = 0; r < 100000; ++r) {
      if ((rc = post()) != -SF_EAGAIN) return rc;
      f.Progress();
    }
    return rc;
  }

  void RunCase(uint64_t seed, int index, sf_ep_type type);
  void RunMultiRecv(uint64_t seed, sf_ep_type type);
  // `cases()` cases per seed, each seed on a fresh pair of endpoints.
  void RunSeeds(sf_ep_type type, std::initializer_list<uint64_t> seeds);

  Fixture f;
};

void BufferShapeTest::RunCase(uint64_t seed, int index, sf_ep_type type) {
  Rng rng(seed * 1000003 + index);
  const size_t len = PickLength(rng, max_len());
  const size_t cap = std::min(PickCapacity(rng, len), 2 * max_len());
  const bool tagged = rng.Percent(50);
  const bool send_desc = rng.Percent(50), recv_desc = rng.Percent(50);
  Shape out = MakeShape(rng, len);
  Shape in = MakeShape(rng, cap);
  Fill(out, seed + index);
  const uint64_t tag = rng.Next() >> 8;
  std::ostringstream what;
  what << "seed " << seed << " case " << index << " "
       << (type == SF_EP_MSG ? "MSG " : "RDM ") << (tagged ? "tagged" : "msg")
       << " " << Describe(out) << " into " << Describe(in) << ", desc send "
       << send_desc << " recv " << recv_desc
       << " (replay: SOFTFAB_SHAPE_SEED=" << seed << ")";
  SCOPED_TRACE(what.str());
  Registration rreg(f.peers[1].domain, in, recv_desc);
  Registration sreg(f.peers[0].domain, out, send_desc);
  ASSERT_TRUE(rreg.ok() && sreg.ok()) << sf_last_error();
  int rctx = 0, sctx = 0;
  sf_ep* rx = f.peers[1].ep;
  sf_ep* tx = f.peers[0].ep;
  const sf_addr_t dest = f.peers[0].addr[1];
  ASSERT_EQ(tagged ? sf_trecvv(rx, in.iov.data(), rreg.desc(), in.iov.size(),
                               SF_ADDR_UNSPEC, tag, 0, &rctx)
                   : sf_recvv(rx, in.iov.data(), rreg.desc(), in.iov.size(),
                              SF_ADDR_UNSPEC, &rctx),
            0)
      << sf_last_error();
  ASSERT_EQ(Post([&] {
              return tagged ? sf_tsendv(tx, out.iov.data(), sreg.desc(),
                                        out.iov.size(), dest, tag, &sctx)
                            : sf_sendv(tx, out.iov.data(), sreg.desc(),
                                       out.iov.size(), dest, &sctx);
            }),
            0)
      << sf_last_error();
  // Exactly one completion each; the receive's says what arrived.
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(1, 1, &ok, &err);
  if (HasFatalFailure()) return;
  const size_t got = std::min(len, cap);
  if (len <= cap) {
    ASSERT_EQ(ok.size(), 1u) << "error " << (err.empty() ? 0 : err[0].err);
    EXPECT_EQ(ok[0].op_context, &rctx);
    EXPECT_EQ(ok[0].len, len);
    EXPECT_TRUE(ok[0].flags & SF_RECV);
    EXPECT_EQ(!!(ok[0].flags & SF_TAGGED), tagged);
    if (tagged) EXPECT_EQ(ok[0].tag, tag);
  } else {
    ASSERT_EQ(err.size(), 1u) << "truncation reported as success";
    EXPECT_EQ(err[0].op_context, &rctx);
    EXPECT_EQ(err[0].err, SF_ETRUNC);
    EXPECT_EQ(err[0].len, cap);
    EXPECT_EQ(err[0].olen, len - cap);
    EXPECT_EQ(err[0].prov_errno, SF_PROV_TRUNCATED);
  }
  EXPECT_TRUE(Gather(in, got) == Gather(out, got)) << "bytes differ";
  EXPECT_EQ(Stray(in, got), 0u) << "bytes written outside the message";
  ok.clear();
  err.clear();
  f.Collect(0, 1, &ok, &err);
  if (HasFatalFailure()) return;
  ASSERT_EQ(ok.size(), 1u) << "send failed: " << (err.empty() ? 0 : err[0].err);
  EXPECT_EQ(ok[0].op_context, &sctx);
  EXPECT_TRUE(ok[0].flags & SF_SEND);
}

// One multi-recv buffer takes messages until less than the minimum is free:
// one completion per message, each where the previous one ended, the last
// one flagged SF_MULTI_RECV; the next message goes to the receive behind it.
void BufferShapeTest::RunMultiRecv(uint64_t seed, sf_ep_type type) {
  Rng rng(seed * 7919 + 17);
  const size_t largest = rng.Percent(50) ? 2000 : 3 * kEager + 1;
  const size_t min_free = largest;
  const size_t size = largest + rng.Below(verbs() ? 8 * largest : 40 * largest);
  const bool give_desc = rng.Percent(50);
  std::ostringstream what;
  what << "seed " << seed << " " << (type == SF_EP_MSG ? "MSG" : "RDM")
       << ": multi-recv of " << size << " B, min free " << min_free << ", desc "
       << give_desc << " (replay: SOFTFAB_SHAPE_SEED=" << seed << ")";
  SCOPED_TRACE(what.str());
  sf_ep* rx = f.peers[1].ep;
  sf_ep* tx = f.peers[0].ep;
  const sf_addr_t dest = f.peers[0].addr[1];
  ASSERT_EQ(sf_setopt(&rx->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV,
                      &min_free, sizeof min_free),
            0);
  Shape buffer;
  buffer.backing.assign(size, kCanary);
  buffer.iov = {iovec{buffer.backing.data(), size}};
  buffer.total = size;
  Registration reg(f.peers[1].domain, buffer, give_desc);
  ASSERT_TRUE(reg.ok()) << sf_last_error();
  int mctx = 0, after_ctx = 0;
  sf_msg m{buffer.iov.data(), reg.desc(), 1, SF_ADDR_UNSPEC, &mctx, 0};
  ASSERT_EQ(sf_recvmsg(rx, &m, SF_MULTI_RECV), 0) << sf_last_error();
  std::vector<uint8_t> after(largest, kCanary);
  ASSERT_EQ(sf_recv(rx, after.data(), after.size(), nullptr, SF_ADDR_UNSPEC,
                    &after_ctx),
            0);
  // Messages until the buffer must have been released, and one more.
  std::vector<std::vector<uint8_t>> sent;
  size_t used = 0;
  while (true) {
    const size_t len = rng.Percent(20) ? 0 : 1 + rng.Below(largest);
    std::vector<uint8_t> v(len);
    for (uint8_t& b : v) b = static_cast<uint8_t>(rng.Next());
    sent.push_back(std::move(v));
    const bool into_after = size - used < min_free;
    ASSERT_EQ(Post([&] {
                return sf_send(tx, sent.back().data(), sent.back().size(),
                               nullptr, dest, nullptr);
              }),
              0)
        << sf_last_error();
    if (into_after) break;
    used += len;
  }
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(1, sent.size(), &ok, &err);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(err.empty()) << "error " << err[0].err;
  // Messages land in the order they were matched, one after another, but
  // a rendezvous one completes once its READ is done: match the entries to
  // the messages by place and length, not by order.
  std::vector<size_t> offset(sent.size());
  size_t at = 0;
  for (size_t i = 0; i + 1 < sent.size(); ++i) {
    offset[i] = at;
    at += sent[i].size();
  }
  std::vector<bool> matched(sent.size(), false);
  size_t released = 0;
  const sf_cq_tagged_entry* last_multi = nullptr;
  for (const sf_cq_tagged_entry& e : ok) {
    const size_t n = e.len;
    if (e.op_context == &after_ctx) {
      EXPECT_FALSE(matched.back()) << "the receive after completed twice";
      matched.back() = true;
      EXPECT_EQ(n, sent.back().size());
      EXPECT_TRUE(
          std::equal(sent.back().begin(), sent.back().end(), after.begin()));
      continue;
    }
    ASSERT_EQ(e.op_context, &mctx);
    last_multi = &e;
    released += !!(e.flags & SF_MULTI_RECV);
    const size_t off = static_cast<uint8_t*>(e.buf) - buffer.backing.data();
    size_t i = 0;
    while (i + 1 < sent.size() &&
           (matched[i] || offset[i] != off || sent[i].size() != n)) {
      ++i;
    }
    ASSERT_LT(i + 1, sent.size()) << "an entry of " << n << " B at offset "
                                  << off << " matches no message";
    matched[i] = true;
    EXPECT_TRUE(std::equal(sent[i].begin(), sent[i].end(),
                           buffer.backing.begin() + off))
        << "message " << i << ": bytes differ";
  }
  EXPECT_EQ(released, 1u);
  ASSERT_NE(last_multi, nullptr);
  EXPECT_TRUE(last_multi->flags & SF_MULTI_RECV)
      << "the release is not reported on the buffer's last entry";
  EXPECT_EQ(Stray(buffer, at), 0u) << "bytes written past the messages";
  ok.clear();
  err.clear();
  f.Collect(0, sent.size(), &ok, &err);
  EXPECT_TRUE(err.empty());
}

void BufferShapeTest::RunSeeds(sf_ep_type type,
                               std::initializer_list<uint64_t> seeds) {
  for (const uint64_t seed : Seeds(seeds)) {
    ASSERT_TRUE(f.Open(backend(), 2, 0, 0, 7, type));
    for (int i = 0; i < cases(); ++i) {
      RunCase(seed, i, type);
      if (HasFatalFailure()) return;
    }
    EXPECT_TRUE(f.Quiet(0));
    EXPECT_TRUE(f.Quiet(1));
    f.Close();
  }
}

TEST_P(BufferShapeTest, RdmEveryShape) { RunSeeds(SF_EP_RDM, {1, 2, 3}); }

TEST_P(BufferShapeTest, MsgEveryShape) { RunSeeds(SF_EP_MSG, {4, 5, 6}); }

TEST_P(BufferShapeTest, MultiRecvConsumedBySeveralMessages) {
  for (const uint64_t seed : Seeds({7, 8, 9, 10, 11, 12})) {
    for (const sf_ep_type type : {SF_EP_RDM, SF_EP_MSG}) {
      ASSERT_TRUE(f.Open(backend(), 2, 0, 0, 7, type));
      RunMultiRecv(seed, type);
      if (HasFatalFailure()) return;
      EXPECT_TRUE(f.Quiet(1));
      f.Close();
    }
  }
}

SOFTFAB_INSTANTIATE_PER_BACKEND(BufferShapeTest);

}  // namespace
