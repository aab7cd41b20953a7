// softfab through libfabric on the simulator, one process: FI_EP_MSG
// connections over event queues (fi_passive_ep, fi_listen, FI_CONNREQ,
// fi_domain + fi_endpoint from the request's fi_info, fi_accept, fi_connect,
// FI_CONNECTED, fi_shutdown, fi_reject) and FI_EP_DGRAM with FI_MSG_PREFIX.
#include <vector>

#include "tests/libfabric/fi_test_util.h"

namespace softfab::fi_test {
namespace {

const auto* const env = ::testing::AddGlobalTestEnvironment(new FiEnvironment);

struct MsgFixture : ::testing::Test, Listening {
  fi_info* info = nullptr;
  std::vector<uint8_t> pep_name;

  void SetUp() override {
    fi_info* h = SimHints(FI_EP_MSG, FI_MSG | FI_TAGGED);
    ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
    fi_freeinfo(h);
    ASSERT_EQ(info->ep_attr->type, FI_EP_MSG);
    ASSERT_NO_FATAL_FAILURE(Listen(info));
    size_t len = 0;
    ASSERT_EQ(fi_getname(&pep->fid, nullptr, &len), -FI_ETOOSMALL);
    pep_name.resize(len);
    ASSERT_EQ(fi_getname(&pep->fid, pep_name.data(), &len), 0);
  }
  void TearDown() override {
    CloseAll();
    if (info) fi_freeinfo(info);
  }
};

TEST_F(MsgFixture, ConnectAcceptExchangeShutdown) {
  Active client, server;
  ASSERT_NO_FATAL_FAILURE(client.Open(fabric, info, client_eq));
  const char hello[] = "private hello";
  ASSERT_EQ(fi_connect(client.ep, pep_name.data(), hello, sizeof hello), 0);

  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 64];
  auto* entry = reinterpret_cast<fi_eq_cm_entry*>(buf);
  uint32_t event = 0;
  ASSERT_GE(NextEvent(server_eq, client_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  ASSERT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  EXPECT_EQ(entry->fid, &pep->fid);
  ASSERT_NE(entry->info, nullptr);
  ASSERT_NE(entry->info->handle, nullptr);
  EXPECT_EQ(entry->info->handle->fclass, static_cast<size_t>(FI_CLASS_CONNREQ));
  EXPECT_EQ(memcmp(entry->data, hello, sizeof hello), 0);
  fi_info* request = entry->info;
  ASSERT_NO_FATAL_FAILURE(server.Open(fabric, request, server_eq));
  ASSERT_EQ(fi_accept(server.ep, nullptr, 0), 0);
  fi_freeinfo(request);

  ASSERT_EQ(NextEvent(server_eq, client_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
  EXPECT_EQ(entry->fid, &server.ep->fid);
  ASSERT_GE(NextEvent(client_eq, server_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_CONNECTED));
  EXPECT_EQ(entry->fid, &client.ep->fid);

  // Both directions, plain and tagged, small and large.
  for (size_t len : {size_t{5}, size_t{100000}}) {
    std::vector<uint8_t> out(len), in(len);
    Fill(out.data(), len, 3);
    fi_context2 rctx, sctx;
    ASSERT_EQ(fi_recv(server.ep, in.data(), len, nullptr, 0, &rctx), 0);
    ASSERT_EQ(fi_send(client.ep, out.data(), len, nullptr, 0, &sctx), 0);
    fi_cq_tagged_entry e{};
    ASSERT_EQ(ReadOne(server.rx, &e, client.tx), 1);
    EXPECT_EQ(e.op_context, &rctx);
    EXPECT_EQ(FirstBadByte(in.data(), len, 3), len);
    ASSERT_EQ(ReadOne(client.tx, &e, server.rx), 1);

    Fill(out.data(), len, 4);
    ASSERT_EQ(fi_trecv(client.ep, in.data(), len, nullptr, 0, 77, 0, &rctx), 0);
    ASSERT_EQ(fi_tsend(server.ep, out.data(), len, nullptr, 0, 77, &sctx), 0);
    ASSERT_EQ(ReadOne(client.rx, &e, server.tx), 1);
    EXPECT_EQ(e.tag, 77u);
    EXPECT_EQ(FirstBadByte(in.data(), len, 4), len);
    ASSERT_EQ(ReadOne(server.tx, &e, client.rx), 1);
  }

  ASSERT_EQ(fi_shutdown(client.ep, 0), 0);
  ASSERT_GE(NextEvent(server_eq, client_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  EXPECT_EQ(event, static_cast<uint32_t>(FI_SHUTDOWN));
  EXPECT_EQ(entry->fid, &server.ep->fid);
  client.Close();
  server.Close();
}

TEST_F(MsgFixture, RejectReachesTheConnectorAsAnErrorEvent) {
  Active client;
  ASSERT_NO_FATAL_FAILURE(client.Open(fabric, info, client_eq));
  ASSERT_EQ(fi_connect(client.ep, pep_name.data(), nullptr, 0), 0);
  alignas(fi_eq_cm_entry) uint8_t buf[sizeof(fi_eq_cm_entry) + 64];
  auto* entry = reinterpret_cast<fi_eq_cm_entry*>(buf);
  uint32_t event = 0;
  ASSERT_GE(NextEvent(server_eq, client_eq, &event, entry),
            static_cast<ssize_t>(sizeof(fi_eq_cm_entry)));
  ASSERT_EQ(event, static_cast<uint32_t>(FI_CONNREQ));
  const char no[] = "no";
  ASSERT_EQ(fi_reject(pep, entry->info->handle, no, sizeof no), 0);
  // A request is decided once.
  EXPECT_EQ(fi_reject(pep, entry->info->handle, nullptr, 0), -FI_EINVAL);
  fi_freeinfo(entry->info);

  ASSERT_EQ(NextEvent(client_eq, server_eq, &event, entry), -FI_EAVAIL);
  fi_eq_err_entry err{};
  ASSERT_EQ(fi_eq_readerr(client_eq, &err, 0),
            static_cast<ssize_t>(sizeof err));
  EXPECT_EQ(err.fid, &client.ep->fid);
  EXPECT_EQ(err.context, &client);
  EXPECT_EQ(err.err, FI_ECONNREFUSED);
  ASSERT_EQ(err.err_data_size, sizeof no);
  EXPECT_EQ(memcmp(err.err_data, no, sizeof no), 0);
  char text[200];
  EXPECT_NE(fi_eq_strerror(client_eq, err.prov_errno, err.err_data, text,
                           sizeof text),
            nullptr);
  // Nothing more: a timed wait on the idle queue runs out.
  EXPECT_EQ(fi_eq_sread(client_eq, &event, entry, sizeof buf, 10, 0),
            -FI_EAGAIN);
  client.Close();
}

TEST(FiDgram, DatagramsCarryTheMessagePrefix) {
  fi_info* h = SimHints(FI_EP_DGRAM, FI_MSG);
  fi_info* info = nullptr;
  ASSERT_EQ(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, h, &info), 0);
  fi_freeinfo(h);
  ASSERT_EQ(info->ep_attr->type, FI_EP_DGRAM);
  ASSERT_EQ(info->mode & FI_MSG_PREFIX, FI_MSG_PREFIX);
  const size_t prefix = info->ep_attr->msg_prefix_size;
  ASSERT_EQ(prefix, 40u);
  const size_t max = info->ep_attr->max_msg_size;
  ASSERT_GE(max, 1024u);
  fid_fabric* fabric = nullptr;
  ASSERT_EQ(fi_fabric(info->fabric_attr, &fabric, nullptr), 0);
  fid_domain* domain[2];
  fid_av* av[2];
  fid_cq* cq[2];
  fid_ep* ep[2];
  char names[2][64];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(fi_domain(fabric, info, &domain[i], nullptr), 0);
    fi_av_attr av_attr{};
    ASSERT_EQ(fi_av_open(domain[i], &av_attr, &av[i], nullptr), 0);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_MSG;
    ASSERT_EQ(fi_cq_open(domain[i], &cq_attr, &cq[i], nullptr), 0);
    ASSERT_EQ(fi_endpoint(domain[i], info, &ep[i], nullptr), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &av[i]->fid, 0), 0);
    ASSERT_EQ(fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV), 0);
    ASSERT_EQ(fi_enable(ep[i]), 0);
    size_t len = sizeof names[i];
    ASSERT_EQ(fi_getname(&ep[i]->fid, names[i], &len), 0);
  }
  fi_addr_t peer;
  ASSERT_EQ(fi_av_insert(av[0], names[1], 1, &peer, 0, nullptr), 1);
  for (size_t len : {size_t{1}, size_t{100}, max}) {
    std::vector<uint8_t> out(prefix + len), in(prefix + len);
    Fill(out.data() + prefix, len, 9);
    fi_context2 rctx, sctx;
    ASSERT_EQ(
        fi_recv(ep[1], in.data(), in.size(), nullptr, FI_ADDR_UNSPEC, &rctx),
        0);
    if (len + prefix <= info->tx_attr->inject_size + prefix && len < 200) {
      ASSERT_EQ(fi_inject(ep[0], out.data(), out.size(), peer), 0);
    } else {
      ASSERT_EQ(fi_send(ep[0], out.data(), out.size(), nullptr, peer, &sctx),
                0);
      fi_cq_msg_entry e{};
      ASSERT_EQ(ReadOne(cq[0], &e, cq[1]), 1);
      EXPECT_EQ(e.op_context, &sctx);
    }
    fi_cq_msg_entry e{};
    ASSERT_EQ(ReadOne(cq[1], &e, cq[0]), 1) << len;
    EXPECT_EQ(e.op_context, &rctx);
    EXPECT_EQ(e.len, prefix + len);
    EXPECT_EQ(FirstBadByte(in.data() + prefix, len, 9), len);
  }
  // Above the datagram size: refused, nothing sent.
  std::vector<uint8_t> big(prefix + max + 1);
  EXPECT_LT(fi_send(ep[0], big.data(), big.size(), nullptr, peer, nullptr), 0);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(fi_close(&ep[i]->fid), 0);
    EXPECT_EQ(fi_close(&cq[i]->fid), 0);
    EXPECT_EQ(fi_close(&av[i]->fid), 0);
    EXPECT_EQ(fi_close(&domain[i]->fid), 0);
  }
  EXPECT_EQ(fi_close(&fabric->fid), 0);
  fi_freeinfo(info);
}

}  // namespace
}  // namespace softfab::fi_test
