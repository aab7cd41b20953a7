// Addressing by IP address and port through libfabric (fi_getinfo's node and
// service), as fabtests and FI_EP_MSG listeners use it: a listener's
// fi_getinfo(node, service, FI_SOURCE) gives an fi_info whose src_addr is
// that address; its passive endpoint (at fi_listen) or RDM endpoint (at
// fi_enable) answers there; a client's fi_getinfo(node, service) gets the
// listener's name as dest_addr, which fi_connect and fi_av_insert take.
//
// It needs a verbs fabric (SOFTFAB_FI_FABRIC) and an IP address of that
// device (SOFTFAB_VERBS_ADDR): tools/verbs-tests.sh sets both in the rxe VM;
// or the simulator several processes share (backends/simd/
// multiprocess_test.sh runs it under `softfab run` with SOFTFAB_VERBS_ADDR
// 127.0.0.1: the daemon answers). On the simulator in one process there is
// no address to listen at, and fi_getinfo with a node or service finds
// nothing there (checked).
#include <arpa/inet.h>
#include <netinet/in.h>

#include <vector>

#include "tests/libfabric/fi_test_util.h"

namespace softfab::fi_test {
namespace {

const auto* const env = ::testing::AddGlobalTestEnvironment(new FiEnvironment);

const char* DeviceAddress() {
  const char* ip = getenv("SOFTFAB_VERBS_ADDR");
  return ip != nullptr && *ip != '\0' ? ip : nullptr;
}

// On the simulator several processes share (SOFTFAB_FABRIC: this process
// is one node of it) the daemon answers for the addresses.
bool OnSharedSimulator() { return getenv("SOFTFAB_FABRIC") != nullptr; }

#define SKIP_WITHOUT_DEVICE_ADDRESS()                                          \
  if ((OnSimulator() && !OnSharedSimulator()) || DeviceAddress() == nullptr) { \
    GTEST_SKIP() << "needs a verbs fabric (SOFTFAB_FI_FABRIC) and its IP "     \
                    "address (SOFTFAB_VERBS_ADDR), or the shared simulator";   \
  }

uint16_t PortOf(const fi_info* info) {
  if (info->src_addr == nullptr || info->src_addrlen != sizeof(sockaddr_in)) {
    return 0;
  }
  return ntohs(static_cast<const sockaddr_in*>(info->src_addr)->sin_port);
}

std::vector<uint8_t> NameOf(fid* f) {
  size_t len = 0;
  EXPECT_EQ(fi_getname(f, nullptr, &len), -FI_ETOOSMALL);
  std::vector<uint8_t> name(len);
  EXPECT_EQ(fi_getname(f, name.data(), &len), 0);
  return name;
}

TEST(FiNodeService, TheSimulatorInOneProcessHasNoAddressToAsk) {
  if (!OnSimulator() || OnSharedSimulator()) {
    GTEST_SKIP() << "the simulator in one process";
  }
  fi_info* h = SimHints(FI_EP_MSG, FI_MSG);
  fi_info* info = nullptr;
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "7471", 0, h, &info),
            -FI_ENODATA);
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, "7471", FI_SOURCE, h, &info),
            -FI_ENODATA);
  EXPECT_EQ(info, nullptr);
  fi_freeinfo(h);
}

TEST(FiNodeService, AnAddressWhereNothingListensFindsNothing) {
  SKIP_WITHOUT_DEVICE_ADDRESS();
  fi_info* h = SimHints(FI_EP_MSG, FI_MSG);
  fi_info* info = nullptr;
  // libfabric turns every provider's failure into -FI_ENODATA; the
  // provider's reason ("no softfab endpoint listens there") is in its log.
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), DeviceAddress(), "7470", 0, h, &info),
            -FI_ENODATA);
  EXPECT_EQ(fi_getinfo(FI_VERSION(1, 17), DeviceAddress(), "no-such-port", 0, h,
                       &info),
            -FI_ENODATA);
  fi_freeinfo(h);
}

TEST(FiNodeService, MsgListenerAtAPortIsConnectedToByAddress) {
  SKIP_WITHOUT_DEVICE_ADDRESS();
  fi_info* h = SimHints(FI_EP_MSG, FI_MSG | FI_TAGGED);
  fi_info* listen_info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), DeviceAddress(), "7471", FI_SOURCE, h,
                       &listen_info),
            0);
  EXPECT_EQ(PortOf(listen_info), 7471);
  EXPECT_STREQ(listen_info->fabric_attr->name, FabricName());

  Listening l;
  ASSERT_NO_FATAL_FAILURE(l.Listen(listen_info));
  fid_fabric* fabric = l.fabric;
  fid_eq* server_eq = l.server_eq;
  fid_eq* client_eq = l.client_eq;
  fid_pep* pep = l.pep;

  // A second listener at the same port is refused.
  fid_pep* twin = nullptr;
  ASSERT_EQ(fi_passive_ep(fabric, listen_info, &twin, nullptr), 0);
  ASSERT_EQ(fi_pep_bind(twin, &server_eq->fid, 0), 0);
  EXPECT_EQ(fi_listen(twin), -FI_EADDRINUSE);
  EXPECT_EQ(fi_close(&twin->fid), 0);

  // The client asks the address for the listener's name.
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), DeviceAddress(), "7471", 0, h, &info),
            0);
  fi_freeinfo(h);
  ASSERT_NE(info->dest_addr, nullptr);
  const std::vector<uint8_t> pep_name = NameOf(&pep->fid);
  ASSERT_EQ(info->dest_addrlen, pep_name.size());
  EXPECT_EQ(memcmp(info->dest_addr, pep_name.data(), pep_name.size()), 0);

  Active client, server;
  ASSERT_NO_FATAL_FAILURE(client.Open(fabric, info, client_eq));
  ASSERT_EQ(fi_connect(client.ep, info->dest_addr, nullptr, 0), 0);
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 64];
  auto* entry = reinterpret_cast<fi_eq_cm_entry*>(buf);
  uint32_t event = 0;
  ASSERT_GE(NextEvent(server_eq, client_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  ASSERT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  fi_info* request = entry->info;
  // The accepting endpoint does not take over the listener's address.
  ASSERT_NO_FATAL_FAILURE(server.Open(fabric, request, server_eq));
  ASSERT_EQ(fi_accept(server.ep, nullptr, 0), 0);
  fi_freeinfo(request);
  ASSERT_GE(NextEvent(server_eq, client_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
  ASSERT_GE(NextEvent(client_eq, server_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));

  const size_t len = 65536;
  std::vector<uint8_t> out(len), in(len);
  Fill(out.data(), len, 9);
  fi_context2 rctx, sctx;
  ASSERT_EQ(fi_recv(server.ep, in.data(), len, nullptr, 0, &rctx), 0);
  ASSERT_EQ(fi_send(client.ep, out.data(), len, nullptr, 0, &sctx), 0);
  fi_cq_tagged_entry e{};
  ASSERT_EQ(ReadOne(server.rx, &e, client.tx), 1);
  EXPECT_EQ(e.len, len);
  EXPECT_EQ(FirstBadByte(in.data(), len, 9), len);
  ASSERT_EQ(ReadOne(client.tx, &e, server.rx), 1);

  client.Close();
  server.Close();
  EXPECT_EQ(fi_close(&pep->fid), 0);
  l.pep = nullptr;
  // Closed, the listener no longer answers.
  fi_info* again = nullptr;
  fi_info* h2 = SimHints(FI_EP_MSG, FI_MSG);
  EXPECT_EQ(
      fi_getinfo(FI_VERSION(1, 17), DeviceAddress(), "7471", 0, h2, &again),
      -FI_ENODATA);
  fi_freeinfo(h2);
  l.CloseAll();
  fi_freeinfo(info);
  fi_freeinfo(listen_info);
}

// One RDM side on `fabric`: domain, AV, CQ and an enabled endpoint.
struct RdmSide {
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* cq = nullptr;
  fid_ep* ep = nullptr;
  void Open(fid_fabric* fabric, fi_info* info) {
    ASSERT_EQ(fi_domain(fabric, info, &domain, nullptr), 0);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_MAP;
    ASSERT_EQ(fi_av_open(domain, &av_attr, &av, nullptr), 0);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    ASSERT_EQ(fi_cq_open(domain, &cq_attr, &cq, nullptr), 0);
    ASSERT_EQ(fi_endpoint(domain, info, &ep, nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep, &av->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep), 0);
  }
  void Close() {
    if (ep) EXPECT_EQ(fi_close(&ep->fid), 0);
    if (cq) EXPECT_EQ(fi_close(&cq->fid), 0);
    if (av) EXPECT_EQ(fi_close(&av->fid), 0);
    if (domain) EXPECT_EQ(fi_close(&domain->fid), 0);
  }
};

TEST(FiNodeService, RdmEndpointAtAPortIsReachedByAddress) {
  SKIP_WITHOUT_DEVICE_ADDRESS();
  fi_info* h = SimHints(FI_EP_RDM, FI_MSG | FI_TAGGED | FI_SOURCE);
  fi_info* server_info = nullptr;
  // A service alone (no node, no FI_SOURCE) listens too, at every address.
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, "7473", 0, h, &server_info),
            0);
  EXPECT_EQ(PortOf(server_info), 7473);
  // One fabric for both sides (a process is one node of a shared simulated
  // fabric, and opens it once).
  fid_fabric* fabric = nullptr;
  ASSERT_EQ(fi_fabric(server_info->fabric_attr, &fabric, nullptr), 0);
  RdmSide server, client;
  ASSERT_NO_FATAL_FAILURE(server.Open(fabric, server_info));

  fi_info* client_info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), DeviceAddress(), "7473", 0, h,
                       &client_info),
            0);
  fi_freeinfo(h);
  const std::vector<uint8_t> server_name = NameOf(&server.ep->fid);
  ASSERT_EQ(client_info->dest_addrlen, server_name.size());
  EXPECT_EQ(
      memcmp(client_info->dest_addr, server_name.data(), server_name.size()),
      0);
  ASSERT_NO_FATAL_FAILURE(client.Open(fabric, client_info));
  fi_addr_t to_server = FI_ADDR_UNSPEC;
  ASSERT_EQ(fi_av_insert(client.av, client_info->dest_addr, 1, &to_server, 0,
                         nullptr),
            1);

  const size_t len = 4096;
  std::vector<uint8_t> out(len), in(len);
  Fill(out.data(), len, 12);
  fi_context2 rctx, sctx;
  ASSERT_EQ(
      fi_trecv(server.ep, in.data(), len, nullptr, FI_ADDR_UNSPEC, 5, 0, &rctx),
      0);
  ASSERT_EQ(fi_tsend(client.ep, out.data(), len, nullptr, to_server, 5, &sctx),
            0);
  fi_cq_tagged_entry e{};
  fi_addr_t from = FI_ADDR_NOTAVAIL;
  ssize_t rc = -FI_EAGAIN;
  for (int i = 0; i < 1000000 && rc == -FI_EAGAIN; ++i) {
    rc = fi_cq_readfrom(server.cq, &e, 1, &from);
    if (rc == -FI_EAGAIN) fi_cq_read(client.cq, nullptr, 0);
  }
  ASSERT_EQ(rc, 1);
  EXPECT_EQ(e.op_context, &rctx);
  EXPECT_EQ(e.tag, 5u);
  EXPECT_EQ(FirstBadByte(in.data(), len, 12), len);
  ASSERT_EQ(ReadOne(client.cq, &e, server.cq), 1);
  EXPECT_EQ(e.op_context, &sctx);

  client.Close();
  server.Close();
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(client_info);
  fi_freeinfo(server_info);
}

}  // namespace
}  // namespace softfab::fi_test
