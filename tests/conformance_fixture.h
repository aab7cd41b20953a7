// The conformance suite's fixture: peers with endpoints on one fabric,
// through the public sf_* API.
#ifndef SOFTFAB_TESTS_CONFORMANCE_FIXTURE_H_
#define SOFTFAB_TESTS_CONFORMANCE_FIXTURE_H_

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/test_pattern.h"

namespace softfab::testing {

struct Backend {
  const char* name;
  sf_backend backend;
  // Simulator fault plan (the suite's scenario 10): per-packet probabilities.
  double drop = 0;
  double duplicate = 0;
  double reorder = 0;
};

struct Peer {
  sf_domain* domain = nullptr;
  sf_cq* cq = nullptr;
  sf_av* av = nullptr;
  sf_ep* ep = nullptr;
  sf_eq* eq = nullptr;  // SF_EP_MSG only.
  std::vector<sf_addr_t> addr;
};

// Peers with RDM endpoints that know each other, on one fabric.
// An sf_msg_tagged of one iovec (`iov`, or none when null) to or from
// `addr`, for sf_tsendmsg / sf_trecvmsg.
inline sf_msg_tagged TaggedMsg(const iovec* iov, sf_addr_t addr, uint64_t tag,
                               void* context) {
  sf_msg_tagged m{};
  m.msg_iov = iov;
  m.iov_count = iov != nullptr ? 1 : 0;
  m.addr = addr;
  m.tag = tag;
  m.context = context;
  return m;
}

// A test run once per backend (TEST_P on a subclass, instantiated with
// SOFTFAB_INSTANTIATE_PER_BACKEND).
// On the verbs backend each case needs an RDMA device (SOFTFAB_VERBS_DEVICE,
// else the first one with an active port): without one it is skipped, saying
// why, and never counted as a pass.
class PerBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (backend().backend != SF_BACKEND_VERBS) return;
    const std::string why = NoVerbsDevice();
    if (!why.empty()) GTEST_SKIP() << "no usable RDMA device: " << why;
  }
  const Backend& backend() const { return GetParam(); }

 private:
  // Empty when a verbs fabric opens; else the reason it does not. Asked once
  // per process.
  static std::string NoVerbsDevice() {
    static const std::string why = [] {
      sf_fabric_attr fa{};
      fa.backend = SF_BACKEND_VERBS;
      sf_fabric* f = nullptr;
      if (sf_fabric_open(&fa, &f, nullptr) != 0) {
        return std::string(sf_last_error());
      }
      sf_close(&f->fid);
      return std::string();
    }();
    return why;
  }
};

// Every backend (the simulator, a real device through verbs), and the
// simulator again under a fault plan (1% of packets lost, 1% duplicated, 2%
// reordered): the suite must hold unchanged.
#define SOFTFAB_INSTANTIATE_PER_BACKEND(suite)                                \
  INSTANTIATE_TEST_SUITE_P(                                                   \
      Backends, suite,                                                        \
      ::testing::Values(                                                      \
          ::softfab::testing::Backend{"sim", SF_BACKEND_SIM},                 \
          ::softfab::testing::Backend{"sim_faults", SF_BACKEND_SIM, 0.01,     \
                                      0.01, 0.02},                            \
          ::softfab::testing::Backend{"verbs", SF_BACKEND_VERBS}),            \
      [](const ::testing::TestParamInfo<::softfab::testing::Backend>& info) { \
        return std::string(info.param.name);                                  \
      })

class Fixture {
 public:
  ~Fixture() { Close(); }

  ::testing::AssertionResult Open(sf_backend backend, int nodes,
                                  uint64_t bind_flags = 0, uint64_t caps = 0,
                                  uint64_t seed = 7,
                                  sf_ep_type type = SF_EP_RDM,
                                  uint64_t mode = 0) {
    return Open(Backend{"", backend}, nodes, bind_flags, caps, seed, type,
                mode);
  }
  ::testing::AssertionResult Open(const Backend& b, int nodes,
                                  uint64_t bind_flags = 0, uint64_t caps = 0,
                                  uint64_t seed = 7,
                                  sf_ep_type type = SF_EP_RDM,
                                  uint64_t mode = 0) {
    sf_fabric_attr fa{};
    fa.backend = b.backend;
    fa.sim_drop = b.drop;
    fa.sim_duplicate = b.duplicate;
    fa.sim_reorder = b.reorder;
    fa.sim_nodes = nodes;
    fa.sim_seed = seed;
    if (adjust_fabric) adjust_fabric(&fa);
    if (int rc = sf_fabric_open(&fa, &fabric, nullptr); rc != 0) {
      return ::testing::AssertionFailure()
             << "sf_fabric_open: " << sf_last_error();
    }
    peers.resize(nodes);
    const bool msg = type == SF_EP_MSG;
    if (msg && nodes != 2) {
      return ::testing::AssertionFailure() << "SF_EP_MSG pairs: 2 nodes";
    }
    std::vector<uint8_t> names(nodes * SF_NAME_BYTES);
    sf_ep_attr ea{};
    ea.type = type;
    ea.caps = SF_MSG | SF_TAGGED | caps;
    ea.mode = mode;
    auto make_ep = [&](int i) {
      Peer& p = peers[i];
      size_t len = SF_NAME_BYTES;
      sf_ep_attr mine = ea;
      if (adjust_ep) adjust_ep(i, &mine);
      return sf_endpoint(p.domain, &mine, &p.ep, nullptr) ||
             sf_ep_bind(p.ep, &p.cq->fid, SF_TRANSMIT | SF_RECV | bind_flags) ||
             sf_ep_bind(p.ep, &p.av->fid, 0) ||
             (p.eq && sf_ep_bind(p.ep, &p.eq->fid, 0)) ||
             (before_enable && before_enable(i, p.ep)) || sf_enable(p.ep) ||
             sf_getname(&p.ep->fid, &names[i * SF_NAME_BYTES], &len);
    };
    for (int i = 0; i < nodes; ++i) {
      Peer& p = peers[i];
      sf_cq_attr ca{};
      ca.size = cq_size;
      ca.format = SF_CQ_FORMAT_TAGGED;
      if (sf_domain_open(fabric, i, &p.domain, nullptr) ||
          sf_cq_open(p.domain, &ca, &p.cq, nullptr) ||
          sf_av_open(p.domain, nullptr, &p.av, nullptr) ||
          (msg && sf_eq_open(fabric, nullptr, &p.eq, nullptr)) ||
          // FI_EP_MSG: node 0's endpoint comes from the accepted request.
          (!(msg && i == 0) && make_ep(i))) {
        return ::testing::AssertionFailure() << "setup: " << sf_last_error();
      }
    }
    if (msg) {
      // Node 1 connects to a listener on node 0, which accepts.
      uint8_t pep_name[SF_NAME_BYTES];
      size_t len = sizeof pep_name;
      uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
      auto* entry = reinterpret_cast<sf_eq_cm_entry*>(buf);
      uint32_t event = 0;
      if (sf_passive_ep(peers[0].domain, &pep, nullptr) ||
          sf_pep_bind(pep, &peers[0].eq->fid, 0) || sf_listen(pep) ||
          sf_getname(&pep->fid, pep_name, &len) ||
          sf_connect(peers[1].ep, pep_name, nullptr, 0) ||
          sf_eq_sread(peers[0].eq, &event, buf, sizeof buf, 1000, 0) <= 0 ||
          event != SF_CONNREQ) {
        return ::testing::AssertionFailure() << "connect: " << sf_last_error();
      }
      ea.info = entry->info;
      const int rc = make_ep(0);
      sf_freeinfo(entry->info);
      ea.info = nullptr;
      if (rc || sf_accept(peers[0].ep, nullptr, 0)) {
        return ::testing::AssertionFailure() << "accept: " << sf_last_error();
      }
      for (int i : {1, 0}) {
        if (WaitEvent(i, &event) <= 0 || event != SF_CONNECTED) {
          return ::testing::AssertionFailure()
                 << "connected " << i << ": " << sf_last_error();
        }
      }
    }
    for (Peer& p : peers) {
      p.addr.resize(nodes);
      if (sf_av_insert(p.av, names.data(), nodes, p.addr.data(), 0, nullptr) !=
          nodes) {
        return ::testing::AssertionFailure() << "av insert";
      }
    }
    return ::testing::AssertionSuccess();
  }

  // Opens an extra endpoint on peer i's domain with a CQ of its own (tagged
  // format, `wait` object), binds it to the CQ and then to each of `binds`
  // (an AV, an EQ, a shared context, ...), and enables it if `enable`. An
  // SF_EP_MSG endpoint that accepts is given its request's `info`.
  ::testing::AssertionResult AddEndpoint(int i, sf_ep_type type,
                                         std::initializer_list<sf_fid*> binds,
                                         bool enable, sf_cq** cq, sf_ep** ep,
                                         sf_wait_obj wait = SF_WAIT_NONE,
                                         sf_info* info = nullptr) {
    sf_cq_attr ca{};
    ca.format = SF_CQ_FORMAT_TAGGED;
    ca.wait_obj = wait;
    sf_ep_attr ea{};
    ea.type = type;
    ea.caps = SF_MSG | SF_TAGGED;
    ea.info = info;
    if (sf_cq_open(peers[i].domain, &ca, cq, nullptr) ||
        sf_endpoint(peers[i].domain, &ea, ep, nullptr) ||
        sf_ep_bind(*ep, &(*cq)->fid, SF_TRANSMIT | SF_RECV)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    for (sf_fid* fid : binds) {
      if (sf_ep_bind(*ep, fid, 0)) {
        return ::testing::AssertionFailure() << sf_last_error();
      }
    }
    if (enable && sf_enable(*ep)) {
      return ::testing::AssertionFailure() << sf_last_error();
    }
    return ::testing::AssertionSuccess();
  }

  // Reads peer i's next event, driving every peer's CQ too.
  ssize_t WaitEvent(int i, uint32_t* event, int rounds = 100000) {
    uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
    for (int r = 0; r < rounds; ++r) {
      const ssize_t n = sf_eq_read(peers[i].eq, event, buf, sizeof buf, 0);
      if (n != -SF_EAGAIN) return n;
      Progress();
    }
    return -SF_EAGAIN;
  }

  void Close() {
    if (pep) {
      EXPECT_EQ(sf_close(&pep->fid), 0) << sf_last_error();
      pep = nullptr;
    }
    for (Peer& p : peers) {
      for (sf_fid* fid :
           {p.ep ? &p.ep->fid : nullptr, p.eq ? &p.eq->fid : nullptr,
            p.cq ? &p.cq->fid : nullptr, p.av ? &p.av->fid : nullptr,
            p.domain ? &p.domain->fid : nullptr}) {
        if (fid) {
          EXPECT_EQ(sf_close(fid), 0) << sf_last_error();
        }
      }
    }
    peers.clear();
    if (fabric) {
      EXPECT_EQ(sf_close(&fabric->fid), 0) << sf_last_error();
    }
    fabric = nullptr;
  }

  void Progress() {
    for (Peer& p : peers) ASSERT_EQ(sf_cq_read(p.cq, nullptr, 0), 0);
  }

  // Reads one entry from peer i while driving every peer. Returns what
  // sf_cq_read returned last: 1, -SF_EAVAIL or -SF_EAGAIN.
  ssize_t ReadOne(int i, sf_cq_tagged_entry* e, int rounds = 200000) {
    for (int r = 0; r < rounds; ++r) {
      const ssize_t n = sf_cq_read(peers[i].cq, e, 1);
      if (n != -SF_EAGAIN) return n;
      Progress();
    }
    return -SF_EAGAIN;
  }

  // Reads `want` completions from peer i (successes and errors).
  void Collect(int i, size_t want, std::vector<sf_cq_tagged_entry>* ok,
               std::vector<sf_cq_err_entry>* err) {
    for (int r = 0; r < 400000 && ok->size() + err->size() < want; ++r) {
      sf_cq_tagged_entry e;
      const ssize_t n = sf_cq_read(peers[i].cq, &e, 1);
      if (n == 1) {
        ok->push_back(e);
      } else if (n == -SF_EAVAIL) {
        sf_cq_err_entry x;
        ASSERT_EQ(sf_cq_readerr(peers[i].cq, &x, 0), 1);
        err->push_back(x);
      } else {
        ASSERT_EQ(n, -SF_EAGAIN);
        Progress();
      }
    }
    ASSERT_EQ(ok->size() + err->size(), want);
  }

  // Expects no completion at peer i after a while of progress.
  ::testing::AssertionResult Quiet(int i) {
    for (int r = 0; r < 500; ++r) Progress();
    sf_cq_tagged_entry e;
    const ssize_t n = sf_cq_read(peers[i].cq, &e, 1);
    if (n == -SF_EAGAIN) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "unexpected completion: " << n;
  }

  sf_fabric* fabric = nullptr;
  sf_pep* pep = nullptr;  // SF_EP_MSG: node 0's listener.
  std::vector<Peer> peers;
  // Runs on each peer's endpoint before sf_enable (options); non-zero fails.
  std::function<int(int, sf_ep*)> before_enable;
  // Adjusts peer i's endpoint attributes (its tx_size or rx_size, say)
  // before sf_endpoint.
  std::function<void(int, sf_ep_attr*)> adjust_ep;
  // Adjusts the fabric's attributes before sf_fabric_open (its class of
  // service, say).
  std::function<void(sf_fabric_attr*)> adjust_fabric;
  // The entries of each peer's CQ (Open).
  size_t cq_size = 8192;
};

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_CONFORMANCE_FIXTURE_H_
