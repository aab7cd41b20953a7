// The transport conformance suite's fixture: what transport/transport.h
// promises, checked on every backend behind it. A case is a TEST_P on a
// subclass, instantiated with SOFTFAB_INSTANTIATE_PER_TRANSPORT as `/sim` (two
// nodes of a simulated fabric) and `/verbs` (two sides on one real device,
// talking through its loopback: SOFTFAB_VERBS_DEVICE or SOFTFAB_RXE_DEVICE
// names it, else the first with an active port). Without a device the verbs
// instance skips with the reason, never a pass; with one of those variables
// set, failing to open it fails. A case only one backend can run skips on the
// other saying why.
//
// Each side has a device, a PD, a send and a receive CQ and a 64 KiB buffer
// registered with every access right. Every wait is bounded: on the simulator
// by the fabric running out of events, on a device by kWaitMs.
#ifndef SOFTFAB_TESTS_TRANSPORT_TRANSPORT_FIXTURE_H_
#define SOFTFAB_TESTS_TRANSPORT_TRANSPORT_FIXTURE_H_

#include <gtest/gtest.h>
#include <sched.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/sim/sim_fabric.h"
#include "backends/verbs/verbs_device.h"
#include "tests/support/qp_bringup.h"
#include "tests/support/sim_test_util.h"
#include "transport/status.h"
#include "transport/transport.h"

namespace softfab::transport_testing {

namespace tp = ::softfab::transport;
using ::softfab::sim::testing::Must;
using ::softfab::sim::testing::PostRecv;
using ::softfab::sim::testing::PostSend;
using ::softfab::sim::testing::PostUdSend;
using ::softfab::testing::RcParams;

enum class Backend { kSim, kVerbs };

// Every wait on a real device gives up after this long.
inline constexpr uint64_t kWaitMs = 20'000;

inline uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// The device the verbs instance asks for, or null for the first one.
inline const char* RequestedDevice() {
  if (const char* name = std::getenv("SOFTFAB_VERBS_DEVICE")) return name;
  return std::getenv("SOFTFAB_RXE_DEVICE");
}

class TransportTest : public ::testing::TestWithParam<Backend> {
 protected:
  // A side's objects (Endpoint's device, PD, CQs and registered buffer) and
  // where its port is.
  struct Side : ::softfab::sim::testing::Endpoint {
    tp::PortAttr port;
    tp::Gid gid{};

    uint64_t addr(uint64_t offset = 0) const {
      return reinterpret_cast<uint64_t>(buf.data()) + offset;
    }
  };

  // Two RC QPs in RTS, connected to each other: a on side 0, b on side 1.
  struct RcPair {
    tp::QueuePair* a = nullptr;
    tp::QueuePair* b = nullptr;
  };

  void SetUp() override {
    if (sim()) {
      sim::SimConfig c;
      c.nodes = 2;
      c.master_seed = 7;
      c.personality = sim::DevicePersonality::kRxe;
      fabric_ = sim::CreateSimFabric(c);
      s_[0].dev = fabric_->device(0);
      s_[1].dev = fabric_->device(1);
    } else {
      verbs::VerbsOptions o;
      const char* want = RequestedDevice();
      if (want != nullptr) o.device_name = want;
      std::string diag;
      auto dev = verbs::OpenVerbsDevice(o, &diag);
      if (!dev.ok()) {
        if (want != nullptr) {
          FAIL() << "device " << want << " (from SOFTFAB_VERBS_DEVICE or "
                 << "SOFTFAB_RXE_DEVICE) did not open: "
                 << dev.status().message() << ": " << diag;
        }
        GTEST_SKIP() << "no RDMA device to test on (" << dev.status().message()
                     << ": " << diag << ")";
      }
      device_ = std::move(*dev);
      s_[0].dev = s_[1].dev = device_.get();
    }
    for (Side& s : s_) {
      s.pd = Must(s.dev->AllocPd());
      s.scq = Must(s.dev->CreateCq(1024));
      s.rcq = Must(s.dev->CreateCq(1024));
      s.buf.assign(1 << 16, 0);
      ASSERT_NE(s.pd, nullptr);
      s.mr = Must(s.pd->RegMr(s.buf.data(), s.buf.size(), tp::kAccessAll));
      ASSERT_NE(s.mr, nullptr);
      ASSERT_TRUE(s.dev->QueryPort(1, &s.port).ok());
      ASSERT_TRUE(s.dev->QueryGid(1, 0, &s.gid).ok());
    }
  }

  bool sim() const { return GetParam() == Backend::kSim; }
  // The simulated fabric, or null on a device.
  sim::SimFabric* fabric() const { return fabric_.get(); }
  // Soft-RoCE, whose answers differ from hardware in the quirks listed in
  // backends/verbs/README.md (the simulator's rxe personality follows the
  // hardware there).
  bool IsRxe() const {
    tp::DeviceAttr attr;
    return !sim() && s_[0].dev->QueryDevice(&attr).ok() &&
           attr.vendor_id == 0xffffff;
  }

  // Where side `side` is reached: its port's LID and GID.
  tp::AhAttr Address(int side) const {
    return tp::SelfAddress(s_[side].gid, s_[side].port.lid);
  }

  // The remote access an RC QP grants on a device (as the device tests always
  // did: remote reads and writes).
  static constexpr uint32_t kDeviceRcAccess =
      tp::kAccessRemoteWrite | tp::kAccessRemoteRead;

  // The connection the cases use unless they say otherwise: on the simulator
  // qp_bringup's defaults, on a device its port's MTU, one READ each way and
  // kDeviceRcAccess.
  RcParams Params() const {
    RcParams p;
    if (!sim()) {
      p.mtu = s_[0].port.active_mtu;
      p.max_rd_atomic = p.max_dest_rd_atomic = 1;
      p.access = kDeviceRcAccess;
    }
    return p;
  }

  // An RC QP on side `side`'s CQs: `depth` requests of up to 4 SGEs each way,
  // 64 bytes inline, every send signaled.
  tp::QpInitAttr RcInit(int side, uint32_t depth = 64,
                        tp::SharedReceiveQueue* srq = nullptr) const {
    return ::softfab::testing::RcQpInit(s_[side].scq, s_[side].rcq, depth, srq);
  }

  tp::QueuePair* Qp(int side, const tp::QpInitAttr& init) {
    tp::QueuePair* qp = Must(s_[side].pd->CreateQp(init));
    EXPECT_NE(qp, nullptr);
    return qp;
  }

  // Connects `a` (on side 0) and `b` (on side 1); a fatal failure if not.
  void Connect(tp::QueuePair* a, tp::QueuePair* b, const RcParams& p) {
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    const Status s =
        ::softfab::testing::ConnectRcPair(a, Address(0), b, Address(1), p);
    ASSERT_TRUE(s.ok()) << s.message();
  }

  // Two connected RC QPs, a created from `init_a` and b from RcInit (on
  // `srq_b` if given). On failure the test has a fatal failure and the QPs
  // may be null.
  RcPair ConnectedPair(const tp::QpInitAttr& init_a, const RcParams& p,
                       tp::SharedReceiveQueue* srq_b = nullptr) {
    RcPair pair;
    pair.a = Qp(0, init_a);
    pair.b = Qp(1, RcInit(1, 64, srq_b));
    Connect(pair.a, pair.b, p);
    return pair;
  }
  RcPair ConnectedPair(const RcParams& p,
                       tp::SharedReceiveQueue* srq_b = nullptr) {
    return ConnectedPair(RcInit(0), p, srq_b);
  }
  RcPair ConnectedPair() { return ConnectedPair(Params()); }

  // A UD QP in RTS on side `side`, on its CQs, taking Q_Key kTestQkey.
  tp::QueuePair* UdQp(int side) {
    tp::QpInitAttr init = RcInit(side);
    init.qp_type = tp::QpType::kUd;
    tp::QueuePair* qp = Qp(side, init);
    if (qp == nullptr) return nullptr;
    const Status s = ::softfab::testing::UdToRts(qp);
    EXPECT_TRUE(s.ok()) << s.message();
    return s.ok() ? qp : nullptr;
  }

  // Completions from `cq`, at least `n` unless the wait ran out. On the
  // simulator: everything there once the fabric is idle (so more than `n`
  // shows); on a device: as soon as `n` arrived, or what came in kWaitMs.
  std::vector<tp::WorkCompletion> PollN(tp::CompletionQueue* cq, size_t n) {
    std::vector<tp::WorkCompletion> out;
    if (sim()) fabric_->RunUntilIdle(1u << 24);
    const uint64_t deadline = NowMs() + kWaitMs;
    for (;;) {
      tp::WorkCompletion wc[16];
      const int got = cq->Poll(16, wc);
      EXPECT_GE(got, 0);
      if (got < 0) break;
      out.insert(out.end(), wc, wc + got);
      if (got > 0) continue;
      if (sim() || out.size() >= n || NowMs() >= deadline) break;
      sched_yield();
    }
    return out;
  }

  // The completion for `wr_id` among `wcs`, or nullptr.
  static const tp::WorkCompletion* Find(
      const std::vector<tp::WorkCompletion>& wcs, uint64_t wr_id) {
    for (const tp::WorkCompletion& wc : wcs) {
      if (wc.wr_id == wr_id) return &wc;
    }
    return nullptr;
  }

  // True if `cq` holds nothing: on the simulator once the fabric is idle, on
  // a device right now.
  bool IsEmpty(tp::CompletionQueue* cq) {
    if (sim()) fabric_->RunUntilIdle(1u << 24);
    tp::WorkCompletion wc;
    return cq->Poll(1, &wc) == 0;
  }

  // Lets the fabric (or the device) run until it has nothing left to do: on
  // the simulator the event loop runs dry; a device runs by itself.
  void Settle() {
    if (sim()) fabric_->RunUntilIdle(1u << 24);
  }

  // Declared before the device so that the device (and its MRs) goes first.
  Side s_[2];
  std::unique_ptr<sim::SimFabric> fabric_;
  std::unique_ptr<verbs::VerbsDevice> device_;
};

inline std::string TransportName(const ::testing::TestParamInfo<Backend>& i) {
  return i.param == Backend::kSim ? "sim" : "verbs";
}

// Instantiates `suite` once per backend: `/sim` and `/verbs`.
#define SOFTFAB_INSTANTIATE_PER_TRANSPORT(suite)                        \
  INSTANTIATE_TEST_SUITE_P(                                             \
      Transports, suite,                                                \
      ::testing::Values(::softfab::transport_testing::Backend::kSim,    \
                        ::softfab::transport_testing::Backend::kVerbs), \
      ::softfab::transport_testing::TransportName)

}  // namespace softfab::transport_testing

#endif  // SOFTFAB_TESTS_TRANSPORT_TRANSPORT_FIXTURE_H_
