// Several endpoints on one fixture node, as fabtests' multi_ep and shared_ctx
// open them: each with a CQ and an AV of its own or all sharing one, with or
// without a shared receive context; RDM (every endpoint knows its
// counterpart on the other side) or MSG (each connected to its counterpart
// through one listener). Messages go between counterparts, checked byte for
// byte.
#ifndef SOFTFAB_TESTS_FABTESTS_UNIT_ENDPOINT_SET_H_
#define SOFTFAB_TESTS_FABTESTS_UNIT_ENDPOINT_SET_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fabtests/unit/unit_util.h"

namespace softfab::fabtests {

struct SetOptions {
  sf_ep_type type = SF_EP_RDM;
  bool shared_cq = false;
  bool shared_av = false;
  bool srx = false;  // One shared receive context (implies a shared CQ).
  size_t cq_size = 4096;
  size_t tx_size = 0;  // 0: softfab's default.
  size_t rx_size = 0;
};

class EndpointSet {
 public:
  EndpointSet(Fixture& f, Closer& closer, int node, int count, SetOptions o)
      : f_(f), closer_(closer), node_(node), count_(count), o_(o) {
    if (o_.srx) o_.shared_cq = true;
    eps_.assign(count, nullptr);
    addr_.assign(count, SF_ADDR_UNSPEC);
  }

  // Opens the CQs, AVs, event queue (MSG) and shared context.
  ::testing::AssertionResult Open() {
    sf_domain* d = f_.peers[node_].domain;
    sf_cq_attr ca{};
    ca.format = SF_CQ_FORMAT_TAGGED;
    ca.size = o_.cq_size;
    for (int i = 0; i < (o_.shared_cq ? 1 : count_); ++i) {
      sf_cq* cq = nullptr;
      if (sf_cq_open(d, &ca, &cq, nullptr)) return Failure();
      closer_.Add(&cq->fid);
      cqs_.push_back(cq);
    }
    if (o_.type == SF_EP_MSG) {
      if (sf_eq_open(f_.fabric, nullptr, &eq_, nullptr)) return Failure();
      closer_.Add(&eq_->fid);
    } else {
      for (int i = 0; i < (o_.shared_av ? 1 : count_); ++i) {
        sf_av* av = nullptr;
        if (sf_av_open(d, nullptr, &av, nullptr)) return Failure();
        closer_.Add(&av->fid);
        avs_.push_back(av);
      }
    }
    if (o_.srx) {
      if (sf_srx_context(d, nullptr, &srx_, nullptr)) return Failure();
      closer_.Add(&srx_->fid);
    }
    return ::testing::AssertionSuccess();
  }

  // Opens endpoint i (accepting `info` on MSG, or connecting if null),
  // binds its CQ, AV or event queue and shared context, and enables it.
  ::testing::AssertionResult AddEp(int i, sf_info* info = nullptr) {
    sf_ep_attr ea{};
    ea.type = o_.type;
    ea.caps = SF_MSG | SF_TAGGED;
    ea.info = info;
    ea.tx_size = o_.tx_size;
    ea.rx_size = o_.rx_size;
    if (sf_endpoint(f_.peers[node_].domain, &ea, &eps_[i], nullptr)) {
      return Failure();
    }
    closer_.Add(&eps_[i]->fid);
    sf_fid* bind = o_.type == SF_EP_MSG ? &eq_->fid : &av(i)->fid;
    if (sf_ep_bind(eps_[i], &cq(i)->fid, SF_TRANSMIT | SF_RECV) ||
        sf_ep_bind(eps_[i], bind, 0) ||
        (srx_ && sf_ep_bind(eps_[i], &srx_->fid, 0)) || sf_enable(eps_[i])) {
      return Failure();
    }
    return ::testing::AssertionSuccess();
  }

  // RDM: every endpoint here learns its counterpart in `other`.
  ::testing::AssertionResult Know(const EndpointSet& other) {
    for (int i = 0; i < count_; ++i) {
      uint8_t name[SF_NAME_BYTES];
      size_t len = sizeof name;
      if (sf_getname(&other.eps_[i]->fid, name, &len) ||
          sf_av_insert(av(i), name, 1, &addr_[i], 0, nullptr) != 1) {
        return Failure();
      }
    }
    return ::testing::AssertionSuccess();
  }

  // MSG: every endpoint here (count of them, opened on demand) connects to
  // `l`, and `server` accepts each on its endpoint of the same number (the
  // request's private data).
  ::testing::AssertionResult ConnectTo(Listener& l, EndpointSet& server) {
    for (int i = 0; i < count_; ++i) {
      if (auto r = AddEp(i); !r) return r;
      const uint8_t n = static_cast<uint8_t>(i);
      if (sf_connect(eps_[i], l.name, &n, 1)) return Failure();
    }
    std::vector<sf_cq*> all = Cqs(server);
    for (int k = 0; k < count_; ++k) {
      CmEvent ev;
      uint32_t event = 0;
      if (ReadEq(f_, l.eq, &event, ev.bytes, sizeof ev.bytes, 0, all) <= 0 ||
          event != SF_CONNREQ) {
        return Failure();
      }
      const int j = ev.entry()->data[0];
      auto added = server.AddEp(j, ev.entry()->info);
      sf_freeinfo(ev.entry()->info);
      if (!added) return added;
      if (sf_accept(server.eps_[j], nullptr, 0)) return Failure();
    }
    for (EndpointSet* side : {this, &server}) {
      for (int k = 0; k < count_; ++k) {
        CmEvent ev;
        uint32_t event = 0;
        if (ReadEq(f_, side->eq_, &event, ev.bytes, sizeof ev.bytes, 0, all) <=
                0 ||
            event != SF_CONNECTED) {
          return Failure();
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

  // Opens this set (node 0, the server) and `client`, and makes every
  // endpoint reach its counterpart: RDM, each knows the other's name; MSG,
  // the client's connect through `l` (opened here) and this set accepts.
  ::testing::AssertionResult PairWith(EndpointSet& client, Listener& l) {
    if (auto r = Open(); !r) return r;
    if (auto r = client.Open(); !r) return r;
    if (o_.type == SF_EP_MSG) {
      if (auto r = l.Open(f_, closer_); !r) return r;
      return client.ConnectTo(l, *this);
    }
    for (int i = 0; i < count_; ++i) {
      if (auto r = AddEp(i); !r) return r;
      if (auto r = client.AddEp(i); !r) return r;
    }
    if (auto r = Know(client); !r) return r;
    return client.Know(*this);
  }

  // A message of `len` bytes from each endpoint here to its counterpart in
  // `to`, receives posted first (on the shared context if there is one),
  // all in flight at once; each arrives whole and every send completes.
  // `desc` (if given) holds a registration per endpoint for its sends.
  void SendToCounterparts(EndpointSet& to, size_t len, uint32_t seed,
                          const std::vector<uint8_t*>& bufs = {},
                          const std::vector<void*>& desc = {}) {
    // The vectors' addresses are the operations' contexts: no reallocation.
    std::vector<std::vector<uint8_t>> msg, in;
    msg.reserve(count_);
    in.reserve(count_);
    for (int i = 0; i < count_; ++i) {
      msg.push_back(Pattern(len, seed + i));
      in.emplace_back(len + 1, 0xEE);
      sf_ep* rx = to.srx_ ? to.srx_ : to.eps_[i];
      ASSERT_EQ(
          sf_recv(rx, in[i].data(), len + 1, nullptr, SF_ADDR_UNSPEC, &in[i]),
          0)
          << sf_last_error();
    }
    for (int i = 0; i < count_; ++i) {
      const uint8_t* src = msg[i].data();
      if (!bufs.empty()) {
        std::memcpy(bufs[i], src, len);
        src = bufs[i];
      }
      ASSERT_EQ(sf_send(eps_[i], src, len, desc.empty() ? nullptr : desc[i],
                        addr_[i], &msg[i]),
                0)
          << sf_last_error();
    }
    const std::vector<sf_cq*> all = Cqs(to);
    std::vector<int> got_rx(count_, 0), got_tx(count_, 0);
    std::vector<bool> landed(count_, false);
    for (int k = 0; k < count_; ++k) {
      for (EndpointSet* side : {&to, this}) {
        // A completion from one of the side's CQs.
        sf_cq_tagged_entry e{};
        ssize_t n = -SF_EAGAIN;
        ::softfab::testing::WaitUntil(
            [&] {
              for (sf_cq* cq : side->cqs_) {
                n = sf_cq_read(cq, &e, 1);
                if (n != -SF_EAGAIN) return true;
              }
              return false;
            },
            [&] { DriveAll(f_, all); });
        ASSERT_EQ(n, 1) << sf_last_error();
        for (int i = 0; i < count_; ++i) {
          if (e.op_context == &in[i]) {
            ++got_rx[i];
            EXPECT_EQ(e.len, len);
            // Through a shared context any receive may take any message:
            // it holds one of them whole, each message landing once.
            int j = to.srx_ ? 0 : i;
            for (; to.srx_ && j < count_; ++j) {
              if (!landed[j] &&
                  (len == 0 ||
                   std::memcmp(in[i].data(), msg[j].data(), len) == 0)) {
                break;
              }
            }
            ASSERT_LT(j, count_) << "receive " << i << " holds no message";
            EXPECT_TRUE(len == 0 ||
                        std::memcmp(in[i].data(), msg[j].data(), len) == 0)
                << i;
            EXPECT_EQ(in[i][len], 0xEE) << "written past the message";
            landed[j] = true;
          } else if (e.op_context == &msg[i]) {
            ++got_tx[i];
          }
        }
      }
    }
    for (int i = 0; i < count_; ++i) {
      EXPECT_EQ(got_rx[i], 1) << "receive at endpoint " << i;
      EXPECT_EQ(got_tx[i], 1) << "send from endpoint " << i;
    }
  }

  sf_ep* ep(int i) const { return eps_[i]; }
  sf_cq* cq(int i) const { return cqs_[o_.shared_cq ? 0 : i]; }
  sf_av* av(int i) const { return avs_[o_.shared_av ? 0 : i]; }
  sf_addr_t addr(int i) const { return addr_[i]; }
  sf_ep* srx() const { return srx_; }
  sf_eq* eq() const { return eq_; }

 private:
  static ::testing::AssertionResult Failure() {
    return ::testing::AssertionFailure() << sf_last_error();
  }
  std::vector<sf_cq*> Cqs(const EndpointSet& other) const {
    std::vector<sf_cq*> all = cqs_;
    all.insert(all.end(), other.cqs_.begin(), other.cqs_.end());
    return all;
  }

  Fixture& f_;
  Closer& closer_;
  int node_;
  int count_;
  SetOptions o_;
  std::vector<sf_ep*> eps_;
  std::vector<sf_cq*> cqs_;
  std::vector<sf_av*> avs_;
  std::vector<sf_addr_t> addr_;
  sf_eq* eq_ = nullptr;
  sf_ep* srx_ = nullptr;
};

}  // namespace softfab::fabtests

#endif  // SOFTFAB_TESTS_FABTESTS_UNIT_ENDPOINT_SET_H_
