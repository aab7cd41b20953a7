// A real port going down reaches the sf_* user (issue 20, item 4), on a
// device: the network interface under the RDMA device is taken down (`ip
// link set DEV down`), and the event queue bound to an RDM endpoint gets an
// error event (SF_ENETDOWN, SF_PROV_PORT_DOWN) within one second or the RC
// retry time, whichever is longer, of real time; then the interface comes
// back and the test waits for the port to be ACTIVE again. The simulator's
// side of the same is tests/async_events_test.cc.
//
// Taking an interface down is only done inside the throw-away rxe VM
// (tools/rxe-vm: SOFTFAB_IN_VM=1, run as root there); anywhere else the test
// skips, saying why, and is never counted as a pass.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "api/softfab/fabric.h"

namespace {

using Clock = std::chrono::steady_clock;

// The RC retry time the core sets up (core/wireup.cc): 4.096 us * 2^14 per
// try, 7 tries.
constexpr double kRcRetrySeconds = 4.096e-6 * (1 << 14) * 7;
constexpr double kBoundSeconds = std::max(1.0, kRcRetrySeconds);

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The RDMA device the verbs fabric uses: SOFTFAB_VERBS_DEVICE, else
// SOFTFAB_RXE_DEVICE (the VM's), else the only one there is; "" if unsure.
std::string DeviceName() {
  for (const char* env : {"SOFTFAB_VERBS_DEVICE", "SOFTFAB_RXE_DEVICE"}) {
    const char* v = std::getenv(env);
    if (v != nullptr && *v != '\0') return v;
  }
  std::string found;
  int count = 0;
  if (DIR* dir = opendir("/sys/class/infiniband")) {
    while (dirent* d = readdir(dir)) {
      if (d->d_name[0] == '.') continue;
      found = d->d_name;
      ++count;
    }
    closedir(dir);
  }
  return count == 1 ? found : "";
}

// The network interface under port 1 of `device` (its GID table's).
std::string NetdevOf(const std::string& device) {
  const std::string dir =
      "/sys/class/infiniband/" + device + "/ports/1/gid_attrs/ndevs/";
  for (int i = 0; i < 4; ++i) {
    const std::string name = ReadLine(dir + std::to_string(i));
    if (!name.empty()) return name;
  }
  return "";
}

// "4: ACTIVE", "1: DOWN", ... as sysfs says.
std::string PortState(const std::string& device) {
  return ReadLine("/sys/class/infiniband/" + device + "/ports/1/state");
}

bool RunCommand(const std::string& command) {
  return std::system(command.c_str()) == 0;
}

// Brings the interface back up when the test ends, however it ends, and
// waits (up to 60 s) for the port to be ACTIVE again, so the suites after
// this one find the device as it was.
class LinkRestorer {
 public:
  LinkRestorer(std::string device, std::string netdev)
      : device_(std::move(device)), netdev_(std::move(netdev)) {}
  ~LinkRestorer() { EXPECT_TRUE(Restore()); }
  bool Restore() {
    if (restored_) return true;
    restored_ = true;
    if (!RunCommand("ip link set " + netdev_ + " up")) return false;
    const auto end = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < end) {
      if (PortState(device_).find("ACTIVE") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string device_;
  std::string netdev_;
  bool restored_ = false;
};

TEST(AsyncEventsDeviceTest, TakingTheInterfaceDownIsAnEqErrorEvent) {
  const char* in_vm = std::getenv("SOFTFAB_IN_VM");
  if (in_vm == nullptr || std::string(in_vm) != "1") {
    GTEST_SKIP() << "takes a network interface down: only inside the rxe VM "
                    "(tools/rxe-vm/run.sh sets SOFTFAB_IN_VM=1)";
  }
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_VERBS;
  sf_fabric* fabric = nullptr;
  if (sf_fabric_open(&fa, &fabric, nullptr) != 0) {
    GTEST_SKIP() << "no usable RDMA device: " << sf_last_error();
  }
  const std::string device = DeviceName();
  const std::string netdev = device.empty() ? "" : NetdevOf(device);
  ASSERT_FALSE(netdev.empty())
      << "cannot tell the device's network interface (device '" << device
      << "'): set SOFTFAB_VERBS_DEVICE";
  ASSERT_NE(PortState(device).find("ACTIVE"), std::string::npos)
      << PortState(device);
  sf_domain* domain = nullptr;
  sf_cq* cq = nullptr;
  sf_av* av = nullptr;
  sf_eq* eq = nullptr;
  sf_ep* ep = nullptr;
  sf_cq_attr ca{};
  ca.format = SF_CQ_FORMAT_TAGGED;
  sf_ep_attr ea{};
  ea.type = SF_EP_RDM;
  ea.caps = SF_MSG | SF_TAGGED;
  ASSERT_EQ(sf_domain_open(fabric, 0, &domain, nullptr), 0) << sf_last_error();
  ASSERT_EQ(sf_cq_open(domain, &ca, &cq, nullptr), 0);
  ASSERT_EQ(sf_av_open(domain, nullptr, &av, nullptr), 0);
  ASSERT_EQ(sf_eq_open(fabric, nullptr, &eq, nullptr), 0);
  ASSERT_EQ(sf_endpoint(domain, &ea, &ep, nullptr), 0);
  ASSERT_EQ(sf_ep_bind(ep, &cq->fid, SF_TRANSMIT | SF_RECV), 0);
  ASSERT_EQ(sf_ep_bind(ep, &av->fid, 0), 0);
  ASSERT_EQ(sf_ep_bind(ep, &eq->fid, 0), 0) << sf_last_error();
  ASSERT_EQ(sf_enable(ep), 0);
  uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  // Nothing yet.
  ASSERT_EQ(sf_eq_sread(eq, &event, buf, sizeof buf, 50, 0), -SF_ETIMEDOUT);
  {
    LinkRestorer restorer(device, netdev);
    ASSERT_TRUE(RunCommand("ip link set " + netdev + " down"));
    const auto down_at = Clock::now();
    // Error events until the port's; the port's GIDs may change meanwhile
    // (SF_EADDRNOTAVAIL when the one in the name goes), which is reported
    // too and tolerated here.
    sf_eq_err_entry x{};
    bool port_down = false;
    int others = 0;
    while (!port_down && Clock::now() - down_at < std::chrono::seconds(30)) {
      const ssize_t n = sf_eq_sread(eq, &event, buf, sizeof buf, 100, 0);
      if (n == -SF_ETIMEDOUT) continue;
      ASSERT_EQ(n, -SF_EAVAIL) << sf_last_error();
      ASSERT_EQ(sf_eq_readerr(eq, &x, 0), static_cast<ssize_t>(sizeof x));
      EXPECT_EQ(x.fid, &ep->fid);
      if (x.err == SF_ENETDOWN) {
        port_down = true;
      } else {
        EXPECT_EQ(x.err, SF_EADDRNOTAVAIL);
        EXPECT_EQ(x.prov_errno, SF_PROV_ADDRESS_CHANGED);
        ++others;
      }
    }
    const double seconds =
        std::chrono::duration<double>(Clock::now() - down_at).count();
    ASSERT_TRUE(port_down) << "no SF_ENETDOWN event in 30 s; port "
                           << PortState(device);
    EXPECT_EQ(x.prov_errno, SF_PROV_PORT_DOWN);
    EXPECT_LE(seconds, kBoundSeconds);
    std::printf(
        "%s down: the port-down error event was read %.3f s later "
        "(bound %.2f s; %d address-change events before it); port "
        "state %s\n",
        netdev.c_str(), seconds, kBoundSeconds, others,
        PortState(device).c_str());
    ASSERT_TRUE(restorer.Restore()) << "the port did not come back ACTIVE";
    std::printf("%s up: port %s\n", netdev.c_str(), PortState(device).c_str());
  }
  // The port coming back is no event; an address change may be, if the
  // name's GID went and came back.
  while (true) {
    const ssize_t n = sf_eq_sread(eq, &event, buf, sizeof buf, 200, 0);
    if (n == -SF_ETIMEDOUT) break;
    ASSERT_EQ(n, -SF_EAVAIL) << sf_last_error();
    sf_eq_err_entry x{};
    ASSERT_EQ(sf_eq_readerr(eq, &x, 0), static_cast<ssize_t>(sizeof x));
    EXPECT_EQ(x.err, SF_EADDRNOTAVAIL);
  }
  EXPECT_EQ(sf_close(&ep->fid), 0);
  EXPECT_EQ(sf_close(&eq->fid), 0);
  EXPECT_EQ(sf_close(&av->fid), 0);
  EXPECT_EQ(sf_close(&cq->fid), 0);
  EXPECT_EQ(sf_close(&domain->fid), 0);
  EXPECT_EQ(sf_close(&fabric->fid), 0);
}

}  // namespace
