// A fixed number of messages through the sf_* API on the simulator, for
// instruction counting (bench/instructions_per_message.sh runs it under
// callgrind at two counts and divides the difference):
//   fixed_count N pingpong [SIZE [tagged|untagged [rdm|msg]]]
//       N half round trips (an inject when SIZE fits inject_size, as
//       fabric_benchmark does; else a send, whose completion is read too)
//   fixed_count N stream [SIZE [tagged|untagged [rdm|msg]]]
//       N messages streamed to posted receives (send)
// SIZE defaults to 8, the rest to tagged on RDM endpoints. Above 8 KiB a
// message goes by rendezvous (an RDMA READ by the receiver).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/softfab/fabric.h"

namespace {

bool Check(int rc, const char* what) {
  if (rc != 0) std::fprintf(stderr, "%s: %s\n", what, sf_last_error());
  return rc == 0;
}

struct Options {
  long n = 0;
  bool stream = false;
  size_t size = 8;
  bool tagged = true;
  bool msg_ep = false;
};

bool Parse(int argc, char** argv, Options* o) {
  if (argc < 3 || argc > 6) return false;
  o->n = std::atol(argv[1]);
  const std::string mode = argv[2];
  if (mode != "pingpong" && mode != "stream") return false;
  o->stream = mode == "stream";
  if (argc > 3) o->size = std::strtoul(argv[3], nullptr, 10);
  if (argc > 4) {
    const std::string t = argv[4];
    if (t != "tagged" && t != "untagged") return false;
    o->tagged = t == "tagged";
  }
  if (argc > 5) {
    const std::string e = argv[5];
    if (e != "rdm" && e != "msg") return false;
    o->msg_ep = e == "msg";
  }
  return o->n > 0 && o->size > 0;
}

// The two endpoints of node 0 and node 1, each with its CQ; `peer[i]` is
// where endpoint i sends (unused on SF_EP_MSG, which is connected).
struct Pair {
  sf_fabric* fabric = nullptr;
  sf_domain* d[2] = {};
  sf_cq* cq[2] = {};
  sf_av* av[2] = {};
  sf_eq* eq[2] = {};
  sf_ep* ep[2] = {};
  sf_pep* pep = nullptr;
  sf_addr_t peer[2] = {};
};

int WaitEvent(sf_eq* eq, uint32_t expected) {
  uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  if (sf_eq_sread(eq, &event, buf, sizeof buf, 1000, 0) <= 0 ||
      event != expected) {
    std::fprintf(stderr, "event %u, expected %u: %s\n", event, expected,
                 sf_last_error());
    return -1;
  }
  if (event == SF_CONNREQ) {
    return reinterpret_cast<sf_eq_cm_entry*>(buf)->info != nullptr ? 0 : -1;
  }
  return 0;
}

bool Open(const Options& o, Pair* p) {
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_SIM;
  fa.sim_nodes = 2;
  fa.sim_seed = 1;
  if (!Check(sf_fabric_open(&fa, &p->fabric, nullptr), "fabric")) return false;
  sf_ep_attr ea{};
  ea.type = o.msg_ep ? SF_EP_MSG : SF_EP_RDM;
  ea.caps = o.tagged ? SF_TAGGED : SF_MSG;
  for (int i = 0; i < 2; ++i) {
    sf_cq_attr ca{};
    ca.size = 4096;
    ca.format = SF_CQ_FORMAT_TAGGED;
    if (!Check(sf_domain_open(p->fabric, i, &p->d[i], nullptr) ||
                   sf_cq_open(p->d[i], &ca, &p->cq[i], nullptr),
               "domain")) {
      return false;
    }
  }
  if (!o.msg_ep) {
    uint8_t names[2][SF_NAME_BYTES];
    for (int i = 0; i < 2; ++i) {
      size_t len = SF_NAME_BYTES;
      if (!Check(
              sf_av_open(p->d[i], nullptr, &p->av[i], nullptr) ||
                  sf_endpoint(p->d[i], &ea, &p->ep[i], nullptr) ||
                  sf_ep_bind(p->ep[i], &p->cq[i]->fid, SF_TRANSMIT | SF_RECV) ||
                  sf_ep_bind(p->ep[i], &p->av[i]->fid, 0) ||
                  sf_enable(p->ep[i]) ||
                  sf_getname(&p->ep[i]->fid, names[i], &len),
              "rdm endpoint")) {
        return false;
      }
    }
    for (int i = 0; i < 2; ++i) {
      if (sf_av_insert(p->av[i], names[1 - i], 1, &p->peer[i], 0, nullptr) !=
          1) {
        return false;
      }
    }
    return true;
  }
  // SF_EP_MSG: node 1 connects to a listener on node 0, which accepts.
  uint8_t pep_name[SF_NAME_BYTES];
  size_t len = sizeof pep_name;
  for (int i = 0; i < 2; ++i) {
    if (!Check(sf_eq_open(p->fabric, nullptr, &p->eq[i], nullptr), "eq")) {
      return false;
    }
  }
  if (!Check(sf_passive_ep(p->d[0], &p->pep, nullptr) ||
                 sf_pep_bind(p->pep, &p->eq[0]->fid, 0) || sf_listen(p->pep) ||
                 sf_getname(&p->pep->fid, pep_name, &len),
             "listener") ||
      !Check(sf_endpoint(p->d[1], &ea, &p->ep[1], nullptr) ||
                 sf_ep_bind(p->ep[1], &p->cq[1]->fid, SF_TRANSMIT | SF_RECV) ||
                 sf_ep_bind(p->ep[1], &p->eq[1]->fid, 0) ||
                 sf_enable(p->ep[1]) ||
                 sf_connect(p->ep[1], pep_name, nullptr, 0),
             "connect")) {
    return false;
  }
  uint8_t buf[sizeof(sf_eq_cm_entry) + 64];
  uint32_t event = 0;
  if (sf_eq_sread(p->eq[0], &event, buf, sizeof buf, 1000, 0) <= 0 ||
      event != SF_CONNREQ) {
    std::fprintf(stderr, "no connection request: %s\n", sf_last_error());
    return false;
  }
  ea.info = reinterpret_cast<sf_eq_cm_entry*>(buf)->info;
  const int rc = sf_endpoint(p->d[0], &ea, &p->ep[0], nullptr) ||
                 sf_ep_bind(p->ep[0], &p->cq[0]->fid, SF_TRANSMIT | SF_RECV) ||
                 sf_ep_bind(p->ep[0], &p->eq[0]->fid, 0) ||
                 sf_enable(p->ep[0]) || sf_accept(p->ep[0], nullptr, 0);
  sf_freeinfo(ea.info);
  if (!Check(rc, "accept")) return false;
  return WaitEvent(p->eq[1], SF_CONNECTED) == 0 &&
         WaitEvent(p->eq[0], SF_CONNECTED) == 0;
}

ssize_t Send(const Options& o, const Pair& p, int i, const void* buf,
             bool inject) {
  const size_t n = o.size;
  if (o.tagged) {
    return inject ? sf_tinject(p.ep[i], buf, n, p.peer[i], 1)
                  : sf_tsend(p.ep[i], buf, n, nullptr, p.peer[i], 1, nullptr);
  }
  return inject ? sf_inject(p.ep[i], buf, n, p.peer[i])
                : sf_send(p.ep[i], buf, n, nullptr, p.peer[i], nullptr);
}

ssize_t Recv(const Options& o, const Pair& p, int i, void* buf) {
  if (o.tagged) {
    return sf_trecv(p.ep[i], buf, o.size, nullptr, SF_ADDR_UNSPEC, 1, 0,
                    nullptr);
  }
  return sf_recv(p.ep[i], buf, o.size, nullptr, SF_ADDR_UNSPEC, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s N pingpong|stream [SIZE [tagged|untagged "
                 "[rdm|msg]]]\n",
                 argv[0]);
    return 2;
  }
  Pair p;
  if (!Open(o, &p)) return 1;
  sf_ep_attr q{};
  if (!Check(sf_ep_query(p.ep[0], &q), "query")) return 1;
  const bool inject = o.size <= q.inject_size;
  std::vector<char> buf[2] = {std::vector<char>(o.size),
                              std::vector<char>(o.size)};
  sf_cq_tagged_entry e[16];
  long done = 0;
  if (!o.stream) {
    for (int i = 0; i < 2; ++i) (void)Recv(o, p, i, buf[i].data());
    int turn = 0;
    for (; done < o.n; ++done) {
      while (Send(o, p, turn, buf[turn].data(), inject) == -SF_EAGAIN) {
        (void)sf_cq_read(p.cq[turn], e, 8);
      }
      bool got = false;
      while (!got) {
        const ssize_t k = sf_cq_read(p.cq[1 - turn], e, 8);
        for (ssize_t j = 0; j < k; ++j) got |= (e[j].flags & SF_RECV) != 0;
        (void)sf_cq_read(p.cq[turn], e, 8);
      }
      (void)Recv(o, p, 1 - turn, buf[1 - turn].data());
      turn = 1 - turn;
    }
  } else {
    constexpr int kWindow = 256;
    std::vector<char> rb(o.size * kWindow);
    long posted = 0, sent = 0;
    for (; posted < kWindow; ++posted) {
      (void)Recv(o, p, 1, &rb[o.size * (posted % kWindow)]);
    }
    while (done < o.n) {
      if (sent < o.n) {
        if (Send(o, p, 0, buf[0].data(), /*inject=*/false) == 0) {
          ++sent;
        } else {
          (void)sf_cq_read(p.cq[0], e, 16);
        }
      }
      const ssize_t k = sf_cq_read(p.cq[1], e, 16);
      for (ssize_t j = 0; j < k; ++j, ++done, ++posted) {
        (void)Recv(o, p, 1, &rb[o.size * (posted % kWindow)]);
      }
      (void)sf_cq_read(p.cq[0], e, 16);
    }
  }
  std::printf("%ld %s\n", done, argv[2]);
  return done == o.n ? 0 : 1;
}
