// The conformance suite, errors: every public call refuses bad arguments with
// a clear code and no effect (table-driven, call by call). Instantiated
// per backend: today the simulator, and the simulator again under a fault
// plan; the verbs issue adds Soft-RoCE (rxe), and a backend that cannot run in
// the current environment is skipped with the reason
// (tests/conformance_fixture.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"

namespace {

using ::softfab::testing::Fixture;

class ConformanceTest : public ::softfab::testing::PerBackendTest {
 protected:
  Fixture f;
};

// Every public call refuses bad arguments with a clear code and no effect.
TEST_P(ConformanceTest, BadArgumentsAreRefused) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* ep = f.peers[0].ep;
  const sf_addr_t dest = f.peers[0].addr[1];
  char buf[16] = {};
  iovec iov{buf, 16};
  iovec null_iov{nullptr, 16};
  sf_msg_tagged tm{&iov, nullptr, 1, dest, 1, 0, nullptr, 0};
  sf_msg_tagged tm_bad_iov{&null_iov, nullptr, 1, dest, 1, 0, nullptr, 0};
  sf_msg m{&iov, nullptr, 1, dest, nullptr, 0};
  sf_ep* not_ep = reinterpret_cast<sf_ep*>(f.peers[0].cq);  // wrong class
  int foreign = 0;
  // Not registrations of this domain: a small non-object and another
  // domain's registration.
  void* bad_desc = &foreign;
  sf_mr* other_mr = nullptr;
  ASSERT_EQ(sf_mr_reg(f.peers[1].domain, buf, sizeof buf, SF_SEND, 0, 0, 0,
                      &other_mr, nullptr),
            0);
  void* other_desc = sf_mr_desc(other_mr);
  std::vector<uint8_t> huge(8);
  struct Case {
    const char* what;
    ssize_t got;
    ssize_t want;
  };
  const Case cases[] = {
      {"send on NULL ep", sf_send(nullptr, buf, 1, nullptr, dest, nullptr),
       -SF_EINVAL},
      {"send on a CQ", sf_send(not_ep, buf, 1, nullptr, dest, nullptr),
       -SF_EINVAL},
      {"send NULL buf len 8", sf_send(ep, nullptr, 8, nullptr, dest, nullptr),
       -SF_EINVAL},
      {"send to unknown addr", sf_send(ep, buf, 1, nullptr, 77, nullptr),
       -SF_EINVAL},
      {"send foreign desc", sf_send(ep, buf, 1, bad_desc, dest, nullptr),
       -SF_EINVAL},
      {"send other domain's desc",
       sf_send(ep, buf, 1, other_desc, dest, nullptr), -SF_EINVAL},
      {"sendv too many iov", sf_sendv(ep, &iov, nullptr, 99, dest, nullptr),
       -SF_EINVAL},
      {"sendmsg NULL msg", sf_sendmsg(ep, nullptr, 0), -SF_EINVAL},
      {"sendmsg unknown flag", sf_sendmsg(ep, &m, 1ull << 40), -SF_EINVAL},
      {"sendmsg two levels",
       sf_sendmsg(ep, &m, SF_DELIVERY_COMPLETE | SF_MATCH_COMPLETE),
       -SF_EINVAL},
      {"sendmsg multicast", sf_sendmsg(ep, &m, SF_MULTICAST), -SF_ENOSYS},
      {"inject too large", sf_inject(ep, huge.data(), 4096, dest), -SF_EINVAL},
      {"senddata NULL ep",
       sf_senddata(nullptr, buf, 1, nullptr, 1, dest, nullptr), -SF_EINVAL},
      {"injectdata unknown addr", sf_injectdata(ep, buf, 1, 1, 77), -SF_EINVAL},
      {"tsend unknown addr", sf_tsend(ep, buf, 1, nullptr, 77, 1, nullptr),
       -SF_EINVAL},
      {"tsendv NULL iov", sf_tsendv(ep, nullptr, nullptr, 1, dest, 1, nullptr),
       -SF_EINVAL},
      {"tsendmsg NULL iov base", sf_tsendmsg(ep, &tm_bad_iov, 0), -SF_EINVAL},
      {"tinject NULL ep", sf_tinject(nullptr, buf, 1, dest, 1), -SF_EINVAL},
      {"tsenddata unknown addr",
       sf_tsenddata(ep, buf, 1, nullptr, 1, 77, 1, nullptr), -SF_EINVAL},
      {"tinjectdata too large",
       sf_tinjectdata(ep, huge.data(), 4096, 1, dest, 1), -SF_EINVAL},
      {"recv NULL buf",
       sf_recv(ep, nullptr, 8, nullptr, SF_ADDR_UNSPEC, nullptr), -SF_EINVAL},
      {"recvv too many",
       sf_recvv(ep, &iov, nullptr, 99, SF_ADDR_UNSPEC, nullptr), -SF_EINVAL},
      {"recvmsg NULL", sf_recvmsg(ep, nullptr, 0), -SF_EINVAL},
      {"recvmsg bad flag", sf_recvmsg(ep, &m, SF_INJECT), -SF_EINVAL},
      {"recvmsg discard alone", sf_recvmsg(ep, &m, SF_DISCARD), -SF_EINVAL},
      {"trecv NULL ep",
       sf_trecv(nullptr, buf, 1, nullptr, SF_ADDR_UNSPEC, 1, 0, nullptr),
       -SF_EINVAL},
      {"trecvv NULL iov",
       sf_trecvv(ep, nullptr, nullptr, 1, SF_ADDR_UNSPEC, 1, 0, nullptr),
       -SF_EINVAL},
      {"trecvmsg claim unknown ctx", sf_trecvmsg(ep, &tm, SF_CLAIM),
       -SF_EINVAL},
      {"cq_read NULL", sf_cq_read(nullptr, buf, 1), -SF_EINVAL},
      {"cq_read NULL buf", sf_cq_read(f.peers[0].cq, nullptr, 1), -SF_EINVAL},
      {"cq_readfrom NULL src", sf_cq_readfrom(f.peers[0].cq, buf, 1, nullptr),
       -SF_EINVAL},
      {"cq_readerr NULL buf", sf_cq_readerr(f.peers[0].cq, nullptr, 0),
       -SF_EINVAL},
      {"cq_sread cond", sf_cq_sread(f.peers[0].cq, buf, 1, buf, 0), -SF_EINVAL},
      {"cancel unknown", sf_cancel(&ep->fid, &foreign), -SF_ENOENT},
      {"cancel NULL", sf_cancel(nullptr, nullptr), -SF_EINVAL},
      {"setopt bad level",
       sf_setopt(&ep->fid, 99, SF_OPT_MIN_MULTI_RECV, buf, 8), -SF_ENOSYS},
      {"setopt short",
       sf_setopt(&ep->fid, SF_OPT_ENDPOINT, SF_OPT_MIN_MULTI_RECV, buf, 1),
       -SF_EINVAL},
      {"getname NULL len", sf_getname(&ep->fid, buf, nullptr), -SF_EINVAL},
      {"av_insert flags",
       sf_av_insert(f.peers[0].av, buf, 0, nullptr, 1, nullptr), -SF_EINVAL},
      {"av_lookup missing",
       [&] {
         size_t len = 64;
         return static_cast<ssize_t>(
             sf_av_lookup(f.peers[0].av, 500, buf, &len));
       }(),
       -SF_EINVAL},
      {"ep_bind after enable", sf_ep_bind(ep, &f.peers[0].cq->fid, SF_RECV),
       -SF_EOPBADSTATE},
      {"close CQ in use", sf_close(&f.peers[0].cq->fid), -SF_EBUSY},
      {"close domain in use", sf_close(&f.peers[0].domain->fid), -SF_EBUSY},
      {"close NULL", sf_close(nullptr), -SF_EINVAL},
      {"mr_reg NULL buf",
       [&] {
         sf_mr* mr = nullptr;
         return static_cast<ssize_t>(sf_mr_reg(f.peers[0].domain, nullptr, 8, 0,
                                               0, 0, 0, &mr, nullptr));
       }(),
       -SF_EINVAL},
      {"fabric verbs: no device of that name",
       [&] {
         sf_fabric_attr a{};
         a.backend = SF_BACKEND_VERBS;
         a.verbs_device = "softfab-no-such-device";
         sf_fabric* fab = nullptr;
         return static_cast<ssize_t>(sf_fabric_open(&a, &fab, nullptr));
       }(),
       -SF_ENODEV},
      {"fabric verbs: unknown verbs_flags",
       [&] {
         sf_fabric_attr a{};
         a.backend = SF_BACKEND_VERBS;
         a.verbs_flags = 1u << 7;
         sf_fabric* fab = nullptr;
         return static_cast<ssize_t>(sf_fabric_open(&a, &fab, nullptr));
       }(),
       -SF_EINVAL},
      {"fabric verbs: negative GID index",
       [&] {
         sf_fabric_attr a{};
         a.backend = SF_BACKEND_VERBS;
         a.verbs_flags = SF_VERBS_GID_INDEX;
         a.verbs_gid_index = -2;
         sf_fabric* fab = nullptr;
         return static_cast<ssize_t>(sf_fabric_open(&a, &fab, nullptr));
       }(),
       -SF_EINVAL},
      {"fabric sim: unknown personality",
       [&] {
         sf_fabric_attr a{};
         a.backend = SF_BACKEND_SIM;
         a.sim_nodes = 2;
         a.sim_personality = static_cast<sf_sim_personality>(9);
         sf_fabric* fab = nullptr;
         return static_cast<ssize_t>(sf_fabric_open(&a, &fab, nullptr));
       }(),
       -SF_EINVAL},
      {"srx_context NULL domain",
       [&] {
         sf_ep* x = nullptr;
         return static_cast<ssize_t>(
             sf_srx_context(nullptr, nullptr, &x, nullptr));
       }(),
       -SF_EINVAL},
      {"srx_context bad caps, mode, flags, size",
       [&] {
         sf_ep* x = nullptr;
         sf_rx_attr bad[4] = {};
         bad[0].caps = SF_MULTICAST;
         bad[1].mode = 1ull << 40;
         bad[2].op_flags = SF_COMPLETION;
         bad[3].size = (1u << 20) + 1;
         ssize_t worst = 0;
         for (const sf_rx_attr& a : bad) {
           const ssize_t rc =
               sf_srx_context(f.peers[0].domain, &a, &x, nullptr);
           if (rc != -SF_EINVAL) worst = rc == 0 ? 1 : rc;
         }
         return worst == 0 ? static_cast<ssize_t>(-SF_EINVAL) : worst;
       }(),
       -SF_EINVAL},
      {"bind a shared context to an enabled endpoint",
       [&] {
         sf_ep* x = nullptr;
         if (sf_srx_context(f.peers[0].domain, nullptr, &x, nullptr)) return 1l;
         const ssize_t rc = sf_ep_bind(ep, &x->fid, 0);
         sf_close(&x->fid);
         return static_cast<ssize_t>(rc);
       }(),
       -SF_EOPBADSTATE},
      {"endpoint with unknown mode bits",
       [&] {
         sf_ep_attr a{};
         a.type = SF_EP_RDM;
         a.mode = 1;
         sf_ep* e = nullptr;
         return static_cast<ssize_t>(
             sf_endpoint(f.peers[0].domain, &a, &e, nullptr));
       }(),
       -SF_EINVAL},
      {"DGRAM with buffered receives",
       [&] {
         sf_ep_attr a{};
         a.type = SF_EP_DGRAM;
         a.mode = SF_BUFFERED_RECV;
         sf_ep* e = nullptr;
         return static_cast<ssize_t>(
             sf_endpoint(f.peers[0].domain, &a, &e, nullptr));
       }(),
       -SF_EINVAL},
      {"setopt BUFFERED_LIMIT after enable",
       [&] {
         size_t v = 64;
         return static_cast<ssize_t>(sf_setopt(
             &ep->fid, SF_OPT_ENDPOINT, SF_OPT_BUFFERED_LIMIT, &v, sizeof v));
       }(),
       -SF_EOPBADSTATE},
      {"setopt CM_DATA_SIZE (read-only)",
       [&] {
         size_t v = 8;
         return static_cast<ssize_t>(sf_setopt(
             &ep->fid, SF_OPT_ENDPOINT, SF_OPT_CM_DATA_SIZE, &v, sizeof v));
       }(),
       -SF_EINVAL},
      {"endpoint RDM with a connection request",
       [&] {
         sf_ep_attr a{};
         a.type = SF_EP_RDM;
         a.info = reinterpret_cast<sf_info*>(&foreign);
         sf_ep* e = nullptr;
         return static_cast<ssize_t>(
             sf_endpoint(f.peers[0].domain, &a, &e, nullptr));
       }(),
       -SF_EINVAL},
  };
  for (const Case& c : cases) EXPECT_EQ(c.got, c.want) << c.what;
  EXPECT_EQ(sf_close(&other_mr->fid), 0);
  // None of them posted anything.
  EXPECT_TRUE(f.Quiet(0));
  EXPECT_TRUE(f.Quiet(1));
  EXPECT_STRNE(sf_last_error(), "");
}

// A registration a post found, then closed: a post with its desc is refused,
// not read through (the domain remembers the last desc it found, for the
// next post's check, and forgets it when that registration closes).
TEST_P(ConformanceTest, AClosedRegistrationsDescIsRefused) {
  ASSERT_TRUE(f.Open(backend(), 2));
  sf_ep* ep = f.peers[0].ep;
  char buf[16] = {};
  sf_mr* mr = nullptr;
  ASSERT_EQ(sf_mr_reg(f.peers[0].domain, buf, sizeof buf, SF_RECV, 0, 0, 0, &mr,
                      nullptr),
            0);
  void* desc = sf_mr_desc(mr);
  int ctx = 0;
  ASSERT_EQ(sf_trecv(ep, buf, sizeof buf, desc, SF_ADDR_UNSPEC, 7, 0, &ctx), 0);
  ASSERT_EQ(sf_cancel(&ep->fid, &ctx), 0);
  sf_cq_tagged_entry e;
  ASSERT_EQ(sf_cq_read(f.peers[0].cq, &e, 1), -SF_EAVAIL);
  sf_cq_err_entry x;
  ASSERT_EQ(sf_cq_readerr(f.peers[0].cq, &x, 0), 1);
  EXPECT_EQ(x.err, SF_ECANCELED);
  ASSERT_EQ(sf_close(&mr->fid), 0);
  EXPECT_EQ(sf_trecv(ep, buf, sizeof buf, desc, SF_ADDR_UNSPEC, 7, 0, &ctx),
            -SF_EINVAL);
  EXPECT_EQ(sf_recv(ep, buf, sizeof buf, desc, SF_ADDR_UNSPEC, &ctx),
            -SF_EINVAL);
  EXPECT_TRUE(f.Quiet(0));
}

SOFTFAB_INSTANTIATE_PER_BACKEND(ConformanceTest);

}  // namespace
