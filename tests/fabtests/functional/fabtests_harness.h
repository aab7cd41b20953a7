// Helpers shared by the re-expressions of libfabric's fabtests functional
// programs and benchmarks on sf_*: a pair of endpoints of each type, posts
// retried on -SF_EAGAIN after progress (fabtests' ft_post_* loops),
// completions checked against their context (ft_cq_read_verify), the
// transfer sizes per backend, and test bytes checked in place (ft_check_buf).
#ifndef SOFTFAB_TESTS_FABTESTS_FUNCTIONAL_FABTESTS_HARNESS_H_
#define SOFTFAB_TESTS_FABTESTS_FUNCTIONAL_FABTESTS_HARNESS_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"
#include "tests/conformance_fixture.h"
#include "tests/test_pattern.h"

namespace softfab::fabtests {

using ::softfab::testing::Backend;
using ::softfab::testing::Fixture;
using ::softfab::testing::Pattern;

inline bool OnVerbs(const Backend& b) { return b.backend == SF_BACKEND_VERBS; }

// The verbs instances run in a VM under TCG: loops there run fewer times.
inline int Count(const Backend& b, int sim, int verbs) {
  return OnVerbs(b) ? verbs : sim;
}

// fabtests' default transfer sizes (powers of two and 3 * 2^k, from 1 B)
// up to `max`, thinned to keep run time small: every size up to 4 KiB, then
// the ones around the eager size (8192) and every fourth beyond.
inline std::vector<size_t> TransferSizes(size_t max) {
  std::vector<size_t> sizes;
  for (size_t p = 1; p <= max; p *= 2) {
    const bool keep = p <= 4096 || p == 8192 || p == 16384 ||
                      (p > 16384 && (p == 65536 || p == (1u << 20)));
    if (!keep) continue;
    sizes.push_back(p);
    if (p >= 2 && p + p / 2 <= max && p <= 4096) sizes.push_back(p + p / 2);
  }
  return sizes;
}

// DGRAM is unreliable by definition (UD): a lost or doubled datagram is not
// an error, so DGRAM programs run without the simulator's fault plan (as the
// conformance suite's datagram test does).
inline Backend WithoutFaults(Backend b) {
  b.drop = b.duplicate = b.reorder = 0;
  return b;
}

// fabtests' -e option: the endpoint types a program runs on.
inline const char* TypeName(sf_ep_type type) {
  switch (type) {
    case SF_EP_MSG:
      return "msg";
    case SF_EP_RDM:
      return "rdm";
    case SF_EP_DGRAM:
      return "dgram";
  }
  return "?";
}

// Two peers with endpoints of `type` (MSG: node 1 connected to node 0).
inline ::testing::AssertionResult OpenPair(Fixture& f, const Backend& b,
                                           sf_ep_type type, uint64_t caps = 0,
                                           uint64_t bind_flags = 0) {
  return f.Open(type == SF_EP_DGRAM ? WithoutFaults(b) : b, 2, bind_flags, caps,
                7, type);
}

// Calls `post` until it returns something other than -SF_EAGAIN, driving
// every peer's progress between tries; returns its last result.
template <typename Post>
ssize_t Retry(Fixture& f, Post post) {
  for (int r = 0; r < 100000; ++r) {
    const ssize_t rc = post();
    if (rc != -SF_EAGAIN) return rc;
    f.Progress();
  }
  return -SF_EAGAIN;
}

// Describes an error completion waiting on `cq` (and consumes it).
inline std::string ErrorEntry(sf_cq* cq) {
  sf_cq_err_entry x{};
  if (sf_cq_readerr(cq, &x, 0) != 1) return "sf_cq_readerr failed";
  return std::string("error completion: ") + sf_strerror(x.err) +
         " (prov_errno " + std::to_string(x.prov_errno) + ", len " +
         std::to_string(x.len) + ")";
}

// Reads peer i's next completion, which must be a success for `context`.
inline ::testing::AssertionResult Completes(Fixture& f, int i, void* context,
                                            sf_cq_tagged_entry* out = nullptr) {
  sf_cq_tagged_entry e{};
  const ssize_t n = f.ReadOne(i, &e);
  if (n == -SF_EAVAIL) {
    return ::testing::AssertionFailure() << ErrorEntry(f.peers[i].cq);
  }
  if (n != 1) {
    return ::testing::AssertionFailure() << "no completion (" << n << ")";
  }
  if (e.op_context != context) {
    return ::testing::AssertionFailure()
           << "completion for context " << e.op_context << ", expected "
           << context;
  }
  if (out) *out = e;
  return ::testing::AssertionSuccess();
}

// Reads `n` successful completions from peer i, in any order
// (ft_get_tx_comp / ft_get_rx_comp of a count).
inline ::testing::AssertionResult CompletesN(
    Fixture& f, int i, size_t n, std::vector<sf_cq_tagged_entry>* out) {
  for (size_t k = 0; k < n; ++k) {
    sf_cq_tagged_entry e{};
    const ssize_t rc = f.ReadOne(i, &e);
    if (rc == -SF_EAVAIL) {
      return ::testing::AssertionFailure()
             << "entry " << k << ": " << ErrorEntry(f.peers[i].cq);
    }
    if (rc != 1) {
      return ::testing::AssertionFailure()
             << "entry " << k << " of " << n << " missing (" << rc << ")";
    }
    if (out) out->push_back(e);
  }
  return ::testing::AssertionSuccess();
}

// The first want.size() bytes at `got` are `want` (ft_check_buf).
inline ::testing::AssertionResult SameBytes(const void* got,
                                            const std::vector<uint8_t>& want) {
  const auto* g = static_cast<const uint8_t*>(got);
  for (size_t i = 0; i < want.size(); ++i) {
    if (g[i] != want[i]) {
      return ::testing::AssertionFailure()
             << "byte " << i << " of " << want.size() << " is " << int{g[i]}
             << ", expected " << int{want[i]};
    }
  }
  return ::testing::AssertionSuccess();
}

// A receive of `len` bytes: tagged (tag, ignore 0) or untagged.
inline ssize_t PostRecv(sf_ep* ep, bool tagged, void* buf, size_t len,
                        sf_addr_t src, uint64_t tag, void* context) {
  return tagged ? sf_trecv(ep, buf, len, nullptr, src, tag, 0, context)
                : sf_recv(ep, buf, len, nullptr, src, context);
}

// A send of `len` bytes: tagged or untagged.
inline ssize_t PostSend(sf_ep* ep, bool tagged, const void* buf, size_t len,
                        sf_addr_t dest, uint64_t tag, void* context) {
  return tagged ? sf_tsend(ep, buf, len, nullptr, dest, tag, context)
                : sf_send(ep, buf, len, nullptr, dest, context);
}

// An inject of `len` bytes: tagged or untagged (no completion).
inline ssize_t PostInject(sf_ep* ep, bool tagged, const void* buf, size_t len,
                          sf_addr_t dest, uint64_t tag) {
  return tagged ? sf_tinject(ep, buf, len, dest, tag)
                : sf_inject(ep, buf, len, dest);
}

// Opens one more RDM or DGRAM endpoint on the domain of f.peers[node], with a
// CQ (of `format`) and an AV of its own, as a new peer at the end of f.peers
// (its domain left null: the node's own peer owns it). Its AV starts empty;
// `name` receives its address. Close it with DropPeer before the fixture
// closes. `op_flags`: the endpoint's default completion level.
inline ::testing::AssertionResult AddPeer(Fixture& f, int node, sf_ep_type type,
                                          uint64_t caps, sf_cq_format format,
                                          std::vector<uint8_t>* name,
                                          uint64_t op_flags = 0) {
  ::softfab::testing::Peer p;
  sf_domain* domain = f.peers[node].domain;
  sf_cq_attr ca{};
  ca.format = format;
  sf_ep_attr ea{};
  ea.type = type;
  ea.caps = caps;
  ea.op_flags = op_flags;
  name->assign(SF_NAME_BYTES, 0);
  size_t len = name->size();
  const bool failed = sf_cq_open(domain, &ca, &p.cq, nullptr) ||
                      sf_av_open(domain, nullptr, &p.av, nullptr) ||
                      sf_endpoint(domain, &ea, &p.ep, nullptr) ||
                      sf_ep_bind(p.ep, &p.cq->fid, SF_TRANSMIT | SF_RECV) ||
                      sf_ep_bind(p.ep, &p.av->fid, 0) || sf_enable(p.ep) ||
                      sf_getname(&p.ep->fid, name->data(), &len);
  const std::string why = failed ? sf_last_error() : "";
  f.peers.push_back(p);
  if (failed) return ::testing::AssertionFailure() << "AddPeer: " << why;
  return ::testing::AssertionSuccess();
}

// Closes the peer AddPeer added last and removes it from f.peers.
inline ::testing::AssertionResult DropPeer(Fixture& f) {
  ::softfab::testing::Peer p = f.peers.back();
  f.peers.pop_back();
  for (sf_fid* fid : {p.ep ? &p.ep->fid : nullptr, p.cq ? &p.cq->fid : nullptr,
                      p.av ? &p.av->fid : nullptr}) {
    if (fid && sf_close(fid) != 0) {
      return ::testing::AssertionFailure() << "close: " << sf_last_error();
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace softfab::fabtests

#endif  // SOFTFAB_TESTS_FABTESTS_FUNCTIONAL_FABTESTS_HARNESS_H_
