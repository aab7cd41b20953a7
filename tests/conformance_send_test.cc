// The conformance suite, send side: inject, remote CQ data, -SF_EAGAIN and
// retry, completion levels, zero bytes and 16 MiB, the matrix of send calls,
// FI_FENCE, and FI_EP_DGRAM datagrams, through the public sf_* API.
// Instantiated per backend: today the simulator, and the simulator again under
// a fault plan; the verbs issue adds Soft-RoCE (rxe), and a backend that cannot
// run in the current environment is skipped with the reason
// (tests/conformance_fixture.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Backend;
using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;
using ::softfab::testing::TaggedMsg;

class ConformanceTest : public ::softfab::testing::PerBackendTest {
 protected:
  Fixture f;
};

// Scenario 5: inject.
TEST_P(ConformanceTest, InjectBufferReusableAndNoCompletion) {
  ASSERT_TRUE(f.Open(backend(), 2));
  uint64_t v = 42, got = 0;
  ASSERT_EQ(sf_tinject(f.peers[0].ep, &v, 8, f.peers[0].addr[1], 3), 0);
  v = 0;
  ASSERT_EQ(sf_inject(f.peers[0].ep, &v, 8, f.peers[0].addr[1]), 0);
  v = 7;
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, &got, 8, nullptr, SF_ADDR_UNSPEC, 3, 0, nullptr),
      0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 42u);
  ASSERT_EQ(sf_recv(f.peers[1].ep, &got, 8, nullptr, SF_ADDR_UNSPEC, nullptr),
            0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(got, 0u);
  EXPECT_TRUE(f.Quiet(0)) << "inject wrote a completion";
  // FI_INJECT_COMPLETE asks for one.
  int ctx = 0;
  iovec iov{&v, 8};
  sf_msg_tagged m = TaggedMsg(&iov, f.peers[0].addr[1], 4, &ctx);
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_INJECT | SF_INJECT_COMPLETE), 0);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &ctx);
}

// Scenario 6: senddata / injectdata.
TEST_P(ConformanceTest, RemoteCqDataDelivered) {
  ASSERT_TRUE(f.Open(backend(), 2));
  char buf[8];
  ASSERT_EQ(sf_senddata(f.peers[0].ep, "abc", 4, nullptr, 0x1122334455667788,
                        f.peers[0].addr[1], nullptr),
            0);
  ASSERT_EQ(sf_tinjectdata(f.peers[0].ep, "xyz", 4, 0xFFFFFFFF00000001,
                           f.peers[0].addr[1], 8),
            0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(sf_recv(f.peers[1].ep, buf, 8, nullptr, SF_ADDR_UNSPEC, nullptr),
            0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_TRUE(e.flags & SF_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 0x1122334455667788u);
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, buf, 8, nullptr, SF_ADDR_UNSPEC, 8, 0, nullptr),
      0);
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_TRUE(e.flags & SF_REMOTE_CQ_DATA);
  EXPECT_EQ(e.data, 0xFFFFFFFF00000001u);
}

// Scenario 7: resource exhaustion: post until -SF_EAGAIN, drain, retry.
TEST_P(ConformanceTest, EagainThenDrainThenRetry) {
  ASSERT_TRUE(f.Open(backend(), 2));
  int eagain = 0, sent = 0, received = 0;
  constexpr int kTotal = 5000;
  uint64_t next_expected = 0;
  std::vector<uint64_t> slots(16);
  int posted = 0;
  for (int round = 0; round < 1000000 && received < kTotal; ++round) {
    while (posted - received < 16 && posted < kTotal) {
      ASSERT_EQ(sf_trecv(f.peers[1].ep, &slots[posted % 16], 8, nullptr,
                         SF_ADDR_UNSPEC, 0, ~0ull, nullptr),
                0);
      ++posted;
    }
    while (sent < kTotal) {
      const uint64_t v = sent;
      const ssize_t rc = sf_tsend(f.peers[0].ep, &v, 8, nullptr,
                                  f.peers[0].addr[1], 1, nullptr);
      if (rc == -SF_EAGAIN) {
        ++eagain;
        break;
      }
      ASSERT_EQ(rc, 0) << sf_last_error();
      ++sent;
    }
    sf_cq_tagged_entry e[16];
    ssize_t n = sf_cq_read(f.peers[0].cq, e, 16);
    ASSERT_TRUE(n > 0 || n == -SF_EAGAIN);
    n = sf_cq_read(f.peers[1].cq, e, 16);
    ASSERT_TRUE(n > 0 || n == -SF_EAGAIN);
    for (ssize_t i = 0; i < n; ++i) {
      ASSERT_EQ(*static_cast<uint64_t*>(e[i].buf), next_expected++);
      ++received;
    }
  }
  EXPECT_EQ(received, kTotal);
  EXPECT_GT(eagain, 100);
}

// Scenario 8c: completion levels wait for their event.
TEST_P(ConformanceTest, CompletionLevels) {
  ASSERT_TRUE(f.Open(backend(), 2));
  uint64_t v = 1, got;
  iovec iov{&v, 8};
  int ctx = 0;
  sf_msg_tagged m = TaggedMsg(&iov, f.peers[0].addr[1], 20, &ctx);
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_MATCH_COMPLETE), 0);
  EXPECT_TRUE(f.Quiet(0)) << "match-complete before any receive matched";
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, &got, 8, nullptr, SF_ADDR_UNSPEC, 20, 0, nullptr),
      0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &ctx);
  // Delivery-complete needs the target's ack, not a receive.
  m.tag = 21;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_DELIVERY_COMPLETE), 0);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  // Transmit-complete (the default) and inject-complete.
  m.tag = 22;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_TRANSMIT_COMPLETE), 0);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  m.tag = 23;
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_INJECT_COMPLETE), 0);
  ASSERT_EQ(sf_cq_read(f.peers[0].cq, &e, 1), 1)
      << "inject-complete is at once";
}

// Scenario 8d: zero bytes and 16 MiB.
TEST_P(ConformanceTest, ZeroAndSixteenMebibytes) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_cq_tagged_entry e;
  ASSERT_EQ(sf_tsend(f.peers[0].ep, nullptr, 0, nullptr, f.peers[0].addr[1], 1,
                     nullptr),
            0);
  ASSERT_EQ(
      sf_trecv(f.peers[1].ep, nullptr, 0, nullptr, SF_ADDR_UNSPEC, 1, 0, &e),
      0);
  sf_cq_tagged_entry got;
  ASSERT_EQ(f.ReadOne(1, &got), 1);
  EXPECT_EQ(got.len, 0u);
  const size_t big = 16u << 20;
  std::vector<uint8_t> out = Pattern(big, 9), in(big);
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in.data(), big, nullptr, SF_ADDR_UNSPEC, 2,
                     0, nullptr),
            0);
  ASSERT_EQ(sf_tsend(f.peers[0].ep, out.data(), big, nullptr,
                     f.peers[0].addr[1], 2, nullptr),
            0);
  ASSERT_EQ(f.ReadOne(1, &got), 1);
  EXPECT_EQ(got.len, big);
  EXPECT_TRUE(in == out);
}

// Scenario 9: the matrix of send calls x {msg, tagged} x sizes x
// {default, selective completion}, data verified.
enum class Call { kSend, kSendv, kSendmsg, kInject, kSenddata, kInjectdata };
const char* CallName(Call c) {
  switch (c) {
    case Call::kSend:
      return "send";
    case Call::kSendv:
      return "sendv";
    case Call::kSendmsg:
      return "sendmsg";
    case Call::kInject:
      return "inject";
    case Call::kSenddata:
      return "senddata";
    case Call::kInjectdata:
      return "injectdata";
  }
  return "?";
}

TEST_P(ConformanceTest, SendMatrix) {
  for (auto [type, selective] : {std::pair{SF_EP_RDM, false},
                                 {SF_EP_RDM, true},
                                 {SF_EP_MSG, false},
                                 {SF_EP_MSG, true}}) {
    SCOPED_TRACE(type == SF_EP_MSG ? "FI_EP_MSG" : "FI_EP_RDM");
    Fixture m;
    ASSERT_TRUE(m.Open(backend(), 2, selective ? SF_SELECTIVE_COMPLETION : 0, 0,
                       7, type));
    sf_ep_attr attr{};
    ASSERT_EQ(sf_ep_query(m.peers[0].ep, &attr), 0);
    const size_t eager = 8192;  // The default eager limit.
    const std::vector<size_t> sizes = {0,     1,         attr.inject_size,
                                       eager, eager + 1, 1u << 20};
    int case_no = 0;
    for (Call call : {Call::kSend, Call::kSendv, Call::kSendmsg, Call::kInject,
                      Call::kSenddata, Call::kInjectdata}) {
      for (bool tagged : {false, true}) {
        for (size_t size : sizes) {
          const bool inject =
              call == Call::kInject || call == Call::kInjectdata;
          if (inject && size > attr.inject_size) continue;
          SCOPED_TRACE(std::string(CallName(call)) + (tagged ? " tagged" : "") +
                       " size " + std::to_string(size) +
                       (selective ? " selective" : ""));
          ++case_no;
          std::vector<uint8_t> out = Pattern(size, case_no);
          std::vector<uint8_t> in(size + 1, 0x5C);
          const uint64_t tag = 1000 + case_no;
          const uint64_t data = 0xD000 + case_no;
          int rctx = 0, sctx = 0;
          ASSERT_EQ(tagged ? sf_trecv(m.peers[1].ep, in.data(), size, nullptr,
                                      SF_ADDR_UNSPEC, tag, 0, &rctx)
                           : sf_recv(m.peers[1].ep, in.data(), size, nullptr,
                                     SF_ADDR_UNSPEC, &rctx),
                    0);
          const sf_addr_t dest = m.peers[0].addr[1];
          sf_ep* ep = m.peers[0].ep;
          iovec iov[2] = {{out.data(), size / 2},
                          {out.data() + size / 2, size - size / 2}};
          ssize_t rc = -1;
          bool has_data = false;
          switch (call) {
            case Call::kSend:
              rc = tagged ? sf_tsend(ep, out.data(), size, nullptr, dest, tag,
                                     &sctx)
                          : sf_send(ep, out.data(), size, nullptr, dest, &sctx);
              break;
            case Call::kSendv:
              rc = tagged ? sf_tsendv(ep, iov, nullptr, 2, dest, tag, &sctx)
                          : sf_sendv(ep, iov, nullptr, 2, dest, &sctx);
              break;
            case Call::kSendmsg: {
              if (tagged) {
                sf_msg_tagged msg{iov, nullptr, 2, dest, tag, 0, &sctx, 0};
                rc = sf_tsendmsg(ep, &msg, SF_COMPLETION);
              } else {
                sf_msg msg{iov, nullptr, 2, dest, &sctx, 0};
                rc = sf_sendmsg(ep, &msg, SF_COMPLETION);
              }
              break;
            }
            case Call::kInject:
              rc = tagged ? sf_tinject(ep, out.data(), size, dest, tag)
                          : sf_inject(ep, out.data(), size, dest);
              break;
            case Call::kSenddata:
              has_data = true;
              rc = tagged ? sf_tsenddata(ep, out.data(), size, nullptr, data,
                                         dest, tag, &sctx)
                          : sf_senddata(ep, out.data(), size, nullptr, data,
                                        dest, &sctx);
              break;
            case Call::kInjectdata:
              has_data = true;
              rc = tagged
                       ? sf_tinjectdata(ep, out.data(), size, data, dest, tag)
                       : sf_injectdata(ep, out.data(), size, data, dest);
              break;
          }
          ASSERT_EQ(rc, 0) << sf_last_error();
          sf_cq_tagged_entry e;
          // Receives complete (no FI_COMPLETION given: with selective
          // completion the receive writes no entry, so check the data).
          if (!selective) {
            ASSERT_EQ(m.ReadOne(1, &e), 1);
            EXPECT_EQ(e.op_context, &rctx);
            EXPECT_EQ(e.len, size);
            EXPECT_EQ(e.flags & (SF_TAGGED | SF_MSG),
                      tagged ? SF_TAGGED : SF_MSG);
            EXPECT_EQ(!!(e.flags & SF_REMOTE_CQ_DATA), has_data);
            if (has_data) {
              EXPECT_EQ(e.data, data);
            }
          } else {
            for (int r = 0; r < 20000; ++r) m.Progress();
          }
          if (size > 0) {
            ASSERT_EQ(std::memcmp(in.data(), out.data(), size), 0);
          }
          EXPECT_EQ(in[size], 0x5C);
          // Send completion: none for inject; with selective completion only
          // sendmsg (FI_COMPLETION) writes one.
          const bool want_send_entry =
              !inject && (!selective || call == Call::kSendmsg);
          if (want_send_entry) {
            ASSERT_EQ(m.ReadOne(0, &e), 1);
            EXPECT_EQ(e.op_context, &sctx);
          }
          EXPECT_TRUE(m.Quiet(0));
          EXPECT_TRUE(m.Quiet(1));
        }
      }
    }
    // 6 calls x 2 x 6 sizes, less inject calls above inject_size (2x2x3).
    EXPECT_EQ(case_no, 60);
  }
}

// FI_FENCE: a fenced send waits for every earlier operation to the same
// peer. A rendezvous message (completing when its READ is done) followed by a
// small fenced one: without the fence the small one would land first.
TEST_P(ConformanceTest, FenceOrdersAfterEarlierSends) {
  ASSERT_TRUE(f.Open(backend(), 2));
  const std::vector<uint8_t> big = Pattern(1 << 20, 21), small = Pattern(8, 22);
  std::vector<uint8_t> in_big(big.size()), in_small(small.size());
  int big_ctx = 0, small_ctx = 0;
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in_big.data(), in_big.size(), nullptr,
                     SF_ADDR_UNSPEC, 1, 0, &big_ctx),
            0);
  ASSERT_EQ(sf_trecv(f.peers[1].ep, in_small.data(), in_small.size(), nullptr,
                     SF_ADDR_UNSPEC, 2, 0, &small_ctx),
            0);
  ASSERT_EQ(sf_tsend(f.peers[0].ep, big.data(), big.size(), nullptr,
                     f.peers[0].addr[1], 1, nullptr),
            0);
  iovec iov{const_cast<uint8_t*>(small.data()), small.size()};
  sf_msg_tagged m{&iov, nullptr, 1, f.peers[0].addr[1], 2, 0, nullptr, 0};
  ASSERT_EQ(sf_tsendmsg(f.peers[0].ep, &m, SF_FENCE), 0) << sf_last_error();
  std::vector<sf_cq_tagged_entry> ok;
  std::vector<sf_cq_err_entry> err;
  f.Collect(1, 2, &ok, &err);
  ASSERT_EQ(err.size(), 0u);
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0].op_context, &big_ctx);
  EXPECT_EQ(ok[1].op_context, &small_ctx);
  EXPECT_EQ(in_big, big);
  EXPECT_EQ(in_small, small);
}

// FI_EP_DGRAM: unreliable datagrams over UD; every buffer starts with the
// 40-byte FI_MSG_PREFIX, where the receiver finds the GRH.
TEST_P(ConformanceTest, DatagramsCarryTheGrhPrefix) {
  // DGRAM is unreliable by definition (UD): a lost or doubled datagram is not
  // an error, so this test runs without the fault plan in every instantiation.
  Backend b = backend();
  b.drop = b.duplicate = b.reorder = 0;
  ASSERT_TRUE(f.Open(b, 2, 0, 0, 7, SF_EP_DGRAM));
  sf_ep_attr attr{};
  ASSERT_EQ(sf_ep_query(f.peers[0].ep, &attr), 0);
  EXPECT_EQ(attr.type, SF_EP_DGRAM);
  EXPECT_EQ(attr.msg_prefix_size, 40u);
  ASSERT_GT(attr.max_msg_size, 40u);
  // The calls that apply to DGRAM (fi_msg without remote CQ data) at the
  // sizes that apply (prefix only, 1 byte, inject_size, one path MTU).
  {
    int case_no = 0;
    for (const size_t size : {size_t{0}, size_t{1}, attr.inject_size - 40,
                              attr.max_msg_size - 40}) {
      for (int call = 0; call < 4; ++call) {
        SCOPED_TRACE("call " + std::to_string(call) + " payload " +
                     std::to_string(size));
        ++case_no;
        std::vector<uint8_t> out = Pattern(40 + size, 100 + case_no);
        std::vector<uint8_t> in(40 + size + 4, 0x5C);
        int rctx = 0;
        ASSERT_EQ(sf_recv(f.peers[1].ep, in.data(), 40 + size, nullptr,
                          SF_ADDR_UNSPEC, &rctx),
                  0);
        const sf_addr_t dest = f.peers[0].addr[1];
        iovec iov[2] = {{out.data(), 40}, {out.data() + 40, size}};
        sf_msg msg{iov, nullptr, 2, dest, nullptr, 0};
        ssize_t rc = -1;
        switch (call) {
          case 0:
            rc = sf_send(f.peers[0].ep, out.data(), out.size(), nullptr, dest,
                         nullptr);
            break;
          case 1:
            rc = sf_sendv(f.peers[0].ep, iov, nullptr, 2, dest, nullptr);
            break;
          case 2:
            rc = sf_sendmsg(f.peers[0].ep, &msg, SF_COMPLETION);
            break;
          case 3:
            rc = 40 + size <= attr.inject_size
                     ? sf_inject(f.peers[0].ep, out.data(), out.size(), dest)
                     : sf_send(f.peers[0].ep, out.data(), out.size(), nullptr,
                               dest, nullptr);
            break;
        }
        ASSERT_EQ(rc, 0) << sf_last_error();
        sf_cq_tagged_entry e;
        ASSERT_EQ(f.ReadOne(1, &e), 1);
        EXPECT_EQ(e.op_context, &rctx);
        EXPECT_EQ(e.len, 40 + size);
        if (size > 0) {
          EXPECT_EQ(std::memcmp(in.data() + 40, out.data() + 40, size), 0);
        }
        EXPECT_EQ(in[40 + size], 0x5C);
        if (!(call == 3 && 40 + size <= attr.inject_size)) {
          ASSERT_EQ(f.ReadOne(0, &e), 1);  // The send's completion.
        }
      }
    }
    EXPECT_TRUE(f.Quiet(0));
    char d[64] = {};
    EXPECT_EQ(sf_senddata(f.peers[0].ep, d, sizeof d, nullptr, 7,
                          f.peers[0].addr[1], nullptr),
              -SF_ENOSYS);
    EXPECT_EQ(sf_injectdata(f.peers[0].ep, d, sizeof d, 7, f.peers[0].addr[1]),
              -SF_ENOSYS);
  }
  const size_t payload = attr.max_msg_size - 40;  // One path MTU.
  std::vector<uint8_t> out = Pattern(40 + payload, 11);
  std::vector<uint8_t> in(40 + payload + 8, 0x33);
  int rctx = 0, sctx = 0;
  ASSERT_EQ(sf_recv(f.peers[1].ep, in.data(), 40 + payload, nullptr,
                    SF_ADDR_UNSPEC, &rctx),
            0);
  ASSERT_EQ(sf_send(f.peers[0].ep, out.data(), out.size(), nullptr,
                    f.peers[0].addr[1], &sctx),
            0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(f.ReadOne(1, &e), 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.len, 40 + payload);
  EXPECT_EQ(e.flags, SF_RECV | SF_MSG);
  // Data at offset 40; the sender's own prefix bytes are not sent. The first
  // 20 prefix bytes are undefined (RoCEv2 over IPv4): not checked.
  EXPECT_EQ(std::memcmp(in.data() + 40, out.data() + 40, payload), 0);
  EXPECT_EQ(in[40 + payload], 0x33);
  ASSERT_EQ(f.ReadOne(0, &e), 1);
  EXPECT_EQ(e.op_context, &sctx);
  // No receive posted: the datagram is dropped, nothing completes.
  ASSERT_EQ(sf_inject(f.peers[0].ep, out.data(), 64, f.peers[0].addr[1]), 0);
  EXPECT_TRUE(f.Quiet(1));
  // What DGRAM refuses.
  EXPECT_EQ(sf_send(f.peers[0].ep, out.data(), 39, nullptr, f.peers[0].addr[1],
                    nullptr),
            -SF_EINVAL);  // Shorter than the prefix.
  std::vector<uint8_t> big(attr.max_msg_size + 1);
  EXPECT_EQ(sf_send(f.peers[0].ep, big.data(), big.size(), nullptr,
                    f.peers[0].addr[1], nullptr),
            -SF_EINVAL);  // Larger than a path MTU.
  EXPECT_EQ(sf_tsend(f.peers[0].ep, out.data(), 64, nullptr, f.peers[0].addr[1],
                     1, nullptr),
            -SF_ENOSYS);
  EXPECT_EQ(
      sf_recv(f.peers[1].ep, in.data(), 20, nullptr, SF_ADDR_UNSPEC, nullptr),
      -SF_EINVAL);  // No room for the prefix.
  EXPECT_TRUE(f.Quiet(0));
}

SOFTFAB_INSTANTIATE_PER_BACKEND(ConformanceTest);

}  // namespace
