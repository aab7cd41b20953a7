// A fixed number of 8-byte tagged messages through the sf_* API on the
// simulator, for instruction counting (bench/instructions_per_message.sh runs
// it under callgrind at two counts and divides the difference):
//   fixed_count N pingpong   N half round trips (tinject, as fabric_benchmark)
//   fixed_count N stream     N messages streamed to posted receives (tsend)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "api/softfab/fabric.h"

namespace {

bool Check(int rc, const char* what) {
  if (rc != 0) std::fprintf(stderr, "%s: %s\n", what, sf_last_error());
  return rc == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[2], "pingpong") != 0 &&
                    std::strcmp(argv[2], "stream") != 0)) {
    std::fprintf(stderr, "usage: %s N pingpong|stream\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[1]);
  const bool stream = std::strcmp(argv[2], "stream") == 0;
  sf_fabric_attr fa{};
  fa.backend = SF_BACKEND_SIM;
  fa.sim_nodes = 2;
  fa.sim_seed = 1;
  sf_fabric* fabric = nullptr;
  if (!Check(sf_fabric_open(&fa, &fabric, nullptr), "fabric")) return 1;
  sf_domain* d[2];
  sf_cq* cq[2];
  sf_av* av[2];
  sf_ep* ep[2];
  sf_addr_t peer[2];
  uint8_t names[2][SF_NAME_BYTES];
  for (int i = 0; i < 2; ++i) {
    sf_cq_attr ca{};
    ca.size = 4096;
    ca.format = SF_CQ_FORMAT_TAGGED;
    sf_ep_attr ea{};
    ea.type = SF_EP_RDM;
    ea.caps = SF_TAGGED;
    size_t len = SF_NAME_BYTES;
    if (!Check(sf_domain_open(fabric, i, &d[i], nullptr) ||
                   sf_cq_open(d[i], &ca, &cq[i], nullptr) ||
                   sf_av_open(d[i], nullptr, &av[i], nullptr) ||
                   sf_endpoint(d[i], &ea, &ep[i], nullptr) ||
                   sf_ep_bind(ep[i], &cq[i]->fid, SF_TRANSMIT | SF_RECV) ||
                   sf_ep_bind(ep[i], &av[i]->fid, 0) || sf_enable(ep[i]) ||
                   sf_getname(&ep[i]->fid, names[i], &len),
               "setup")) {
      return 1;
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (sf_av_insert(av[i], names[1 - i], 1, &peer[i], 0, nullptr) != 1) {
      return 1;
    }
  }
  char buf[2][8] = {};
  sf_cq_tagged_entry e[16];
  long done = 0;
  if (!stream) {
    for (int i = 0; i < 2; ++i) {
      (void)sf_trecv(ep[i], buf[i], 8, nullptr, SF_ADDR_UNSPEC, 1, 0, nullptr);
    }
    int turn = 0;
    for (; done < n; ++done) {
      while (sf_tinject(ep[turn], buf[turn], 8, peer[turn], 1) == -SF_EAGAIN) {
        (void)sf_cq_read(cq[turn], e, 8);
      }
      bool got = false;
      while (!got) {
        const ssize_t k = sf_cq_read(cq[1 - turn], e, 8);
        for (ssize_t j = 0; j < k; ++j) got |= (e[j].flags & SF_RECV) != 0;
        (void)sf_cq_read(cq[turn], e, 8);
      }
      (void)sf_trecv(ep[1 - turn], buf[1 - turn], 8, nullptr, SF_ADDR_UNSPEC, 1,
                     0, nullptr);
      turn = 1 - turn;
    }
  } else {
    constexpr int kWindow = 256;
    std::vector<char> rb(8 * kWindow);
    long posted = 0, sent = 0;
    for (; posted < kWindow; ++posted) {
      (void)sf_trecv(ep[1], &rb[8 * (posted % kWindow)], 8, nullptr,
                     SF_ADDR_UNSPEC, 1, 0, nullptr);
    }
    while (done < n) {
      if (sent < n) {
        if (sf_tsend(ep[0], buf[0], 8, nullptr, peer[0], 1, nullptr) == 0) {
          ++sent;
        } else {
          (void)sf_cq_read(cq[0], e, 16);
        }
      }
      const ssize_t k = sf_cq_read(cq[1], e, 16);
      for (ssize_t j = 0; j < k; ++j, ++done, ++posted) {
        (void)sf_trecv(ep[1], &rb[8 * (posted % kWindow)], 8, nullptr,
                       SF_ADDR_UNSPEC, 1, 0, nullptr);
      }
      (void)sf_cq_read(cq[0], e, 16);
    }
  }
  std::printf("%ld %s\n", done, argv[2]);
  return done == n ? 0 : 1;
}
