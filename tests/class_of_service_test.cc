// A fabric's class of service (sf_fabric_attr's traffic_class, service_level
// and pkey_index, or $SOFTFAB_TRAFFIC_CLASS, $SOFTFAB_SERVICE_LEVEL and
// $SOFTFAB_PKEY_INDEX for a field left 0) on the paths its endpoints make.
// Per backend: a datagram's GRH, which an SF_EP_DGRAM receiver finds in its
// 40-byte prefix, holds the traffic class as the IPv4 TOS byte (on rxe in the
// VM as on the simulator); bad values are refused and open nothing; a P_Key
// index beyond the port's table is refused at sf_domain_open. On the
// simulator, a capture shows every packet of an RDM conversation (the CM's
// datagrams, eager sends, a rendezvous READ, every ACK) in that class.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "api/sim/sim_api.h"
#include "api/softfab/fabric.h"
#include "backends/sim/sim_pcap.h"
#include "tests/conformance_fixture.h"
#include "tests/scoped_env.h"
#include "tests/test_pattern.h"

namespace {

using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;
using ::softfab::testing::ScopedEnv;

constexpr uint8_t kDscp26 = 26 << 2;  // a common lossless class under PFC

class ClassOfServiceTest : public ::softfab::testing::PerBackendTest {
 protected:
  // Opens two DGRAM endpoints on a fabric adjusted by `adjust`, sends one
  // datagram from node 0 to node 1 and returns the IPv4 TOS byte the
  // receiver finds in its GRH prefix (-1 on failure, with the reason added).
  int TosOfADatagram(const std::function<void(sf_fabric_attr*)>& adjust) {
    Fixture f;
    f.adjust_fabric = adjust;
    ::softfab::testing::Backend b = backend();
    b.drop = b.duplicate = b.reorder = 0;  // DGRAM is unreliable
    if (!f.Open(b, 2, 0, 0, 7, SF_EP_DGRAM)) {
      ADD_FAILURE() << "open: " << sf_last_error();
      return -1;
    }
    std::vector<uint8_t> out = Pattern(40 + 64, 3);
    std::vector<uint8_t> in(40 + 64, 0);
    int rctx = 0;
    if (sf_recv(f.peers[1].ep, in.data(), in.size(), nullptr, SF_ADDR_UNSPEC,
                &rctx) != 0 ||
        sf_send(f.peers[0].ep, out.data(), out.size(), nullptr,
                f.peers[0].addr[1], nullptr) != 0) {
      ADD_FAILURE() << "post: " << sf_last_error();
      return -1;
    }
    sf_cq_tagged_entry e{};
    if (f.ReadOne(1, &e) != 1 || e.op_context != &rctx ||
        std::memcmp(in.data() + 40, out.data() + 40, 64) != 0) {
      ADD_FAILURE() << "the datagram did not arrive whole";
      return -1;
    }
    EXPECT_EQ(f.ReadOne(0, &e), 1);  // the send's completion
    // RoCEv2 over IPv4: the IPv4 header fills the prefix's last 20 bytes.
    EXPECT_EQ(in[20], 0x45);
    return in[21];
  }
};

TEST_P(ClassOfServiceTest, ADatagramTravelsInTheFabricsTrafficClass) {
  EXPECT_EQ(TosOfADatagram([](sf_fabric_attr* a) {
              a->traffic_class = kDscp26;
              a->service_level = 3;
            }),
            kDscp26);
  // The default class: 0.
  ScopedEnv unset("SOFTFAB_TRAFFIC_CLASS", nullptr);
  EXPECT_EQ(TosOfADatagram(nullptr), 0);
}

TEST_P(ClassOfServiceTest, TheEnvironmentSetsWhatTheAttributesLeaveZero) {
  {
    ScopedEnv tc("SOFTFAB_TRAFFIC_CLASS", "0x68");  // 104: DSCP 26
    ScopedEnv sl("SOFTFAB_SERVICE_LEVEL", "3");
    EXPECT_EQ(TosOfADatagram(nullptr), kDscp26);
  }
  {
    ScopedEnv tc("SOFTFAB_TRAFFIC_CLASS", "16");
    EXPECT_EQ(
        TosOfADatagram([](sf_fabric_attr* a) { a->traffic_class = kDscp26; }),
        kDscp26);
  }
}

TEST_P(ClassOfServiceTest, BadValuesAreRefusedAndOpenNothing) {
  sf_fabric_attr fa{};
  fa.backend = backend().backend;
  fa.sim_nodes = 2;
  sf_fabric* f = nullptr;
  fa.service_level = 16;
  EXPECT_EQ(sf_fabric_open(&fa, &f, nullptr), -SF_EINVAL);
  EXPECT_NE(std::string(sf_last_error()).find("service_level 16"),
            std::string::npos)
      << sf_last_error();
  EXPECT_EQ(f, nullptr);
  fa.service_level = 0;
  const struct {
    const char* name;
    const char* value;
  } bad[] = {
      {"SOFTFAB_TRAFFIC_CLASS", "abc"}, {"SOFTFAB_TRAFFIC_CLASS", "256"},
      {"SOFTFAB_TRAFFIC_CLASS", "-1"},  {"SOFTFAB_TRAFFIC_CLASS", "26 "},
      {"SOFTFAB_SERVICE_LEVEL", "16"},  {"SOFTFAB_PKEY_INDEX", "65536"},
      {"SOFTFAB_PKEY_INDEX", "0x1zz"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(std::string(b.name) + "=" + b.value);
    ScopedEnv env(b.name, b.value);
    EXPECT_EQ(sf_fabric_open(&fa, &f, nullptr), -SF_EINVAL);
    EXPECT_NE(std::string(sf_last_error()).find(b.name), std::string::npos)
        << sf_last_error();
    EXPECT_EQ(f, nullptr);
  }
}

TEST_P(ClassOfServiceTest, APkeyIndexBeyondThePortsTableIsRefused) {
  sf_fabric_attr fa{};
  fa.backend = backend().backend;
  fa.sim_nodes = 2;
  fa.pkey_index = 0xffff;
  sf_fabric* f = nullptr;
  ASSERT_EQ(sf_fabric_open(&fa, &f, nullptr), 0) << sf_last_error();
  sf_domain* d = nullptr;
  EXPECT_EQ(sf_domain_open(f, 0, &d, nullptr), -SF_EINVAL);
  EXPECT_NE(std::string(sf_last_error()).find("P_Key table"), std::string::npos)
      << sf_last_error();
  EXPECT_EQ(d, nullptr);
  // Nothing was left open: the fabric closes.
  EXPECT_EQ(sf_close(&f->fid), 0) << sf_last_error();
}

SOFTFAB_INSTANTIATE_PER_BACKEND(ClassOfServiceTest);

// The IPv4 TOS byte of every frame of a pcap file (Ethernet, IPv4).
std::vector<int> TosOfEveryFrame(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  std::vector<int> tos;
  size_t at = 24;  // the file header
  while (at + 16 <= file.size()) {
    const uint32_t len = file[at + 8] | file[at + 9] << 8 |
                         file[at + 10] << 16 | uint32_t{file[at + 11]} << 24;
    at += 16;
    if (at + len > file.size() || len < 14 + 20) break;
    const uint8_t* frame = &file[at];
    EXPECT_EQ(frame[12] << 8 | frame[13], 0x0800);  // IPv4
    tos.push_back(frame[14 + 1]);
    at += len;
  }
  EXPECT_EQ(at, file.size()) << "a truncated frame";
  return tos;
}

// Every packet an RDM conversation puts on the simulated wire (the CM's
// datagrams, eager and rendezvous messages both ways, the rendezvous READ and
// its response, the ACKs) in the fabric's class; without one, in class 0.
std::vector<int> TosOfAConversation(uint8_t traffic_class) {
  Fixture f;
  f.adjust_fabric = [&](sf_fabric_attr* a) {
    a->traffic_class = traffic_class;
  };
  EXPECT_TRUE(f.Open(SF_BACKEND_SIM, 2));
  softfab::sim::SimFabric* sim = softfab::sf_sim_fabric(f.fabric);
  EXPECT_NE(sim, nullptr);
  if (sim == nullptr) return {};
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/tc" +
                           std::to_string(traffic_class) + ".pcap";
  std::string error;
  auto capture = softfab::sim::PcapCapture::Open(sim, path, &error);
  EXPECT_TRUE(capture.ok()) << error;
  if (!capture.ok()) return {};
  for (const size_t size : {size_t{8}, size_t{64 * 1024}}) {
    for (int from : {0, 1}) {
      const int to = 1 - from;
      const std::vector<uint8_t> out = Pattern(size, static_cast<int>(size));
      std::vector<uint8_t> in(size, 0);
      EXPECT_EQ(sf_trecv(f.peers[to].ep, in.data(), in.size(), nullptr,
                         SF_ADDR_UNSPEC, 5, 0, nullptr),
                0);
      EXPECT_EQ(sf_tsend(f.peers[from].ep, out.data(), out.size(), nullptr,
                         f.peers[from].addr[to], 5, nullptr),
                0)
          << sf_last_error();
      sf_cq_tagged_entry e{};
      EXPECT_EQ(f.ReadOne(to, &e), 1);
      EXPECT_EQ(f.ReadOne(from, &e), 1);
      EXPECT_EQ(in, out);
    }
  }
  EXPECT_TRUE((*capture)->Close().ok());
  EXPECT_GT((*capture)->packets(), 8u);
  return TosOfEveryFrame(path);
}

TEST(ClassOfServiceOnTheWire, EveryPacketOfAnRdmConversationCarriesIt) {
  ScopedEnv unset("SOFTFAB_TRAFFIC_CLASS", nullptr);
  const std::vector<int> tos = TosOfAConversation(kDscp26);
  ASSERT_GT(tos.size(), 8u);
  for (size_t i = 0; i < tos.size(); ++i) EXPECT_EQ(tos[i], kDscp26) << i;
  const std::vector<int> plain = TosOfAConversation(0);
  ASSERT_EQ(plain.size(), tos.size());  // the same conversation
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i], 0) << i;
}

}  // namespace
