// bench/fixed_count's twin through libfabric: the same 8-byte tagged
// messages, the same calls in the same order, made as fi_* calls on Debian's
// libfabric with softfab's provider (libsoftfab-fi.so from FI_PROVIDER_PATH)
// on a two-node simulator with seed 1, so the difference of the two
// instruction counts is what the provider and libfabric add per message
// (bench/libfabric/instructions_per_message.sh).
//   fi_fixed_count N pingpong   N half round trips (fi_tinject)
//   fi_fixed_count N stream     N messages streamed to posted receives
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

bool Check(int rc, const char* what) {
  if (rc != 0) std::fprintf(stderr, "%s: %s\n", what, fi_strerror(-rc));
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
  // The simulator bench/fixed_count opens: two nodes, seed 1.
  setenv("FI_SOFTFAB_SIM_NODES", "2", 1);
  setenv("FI_SOFTFAB_SIM_SEED", "1", 1);
  fi_info* hints = fi_allocinfo();
  hints->fabric_attr->prov_name = strdup("softfab");
  hints->fabric_attr->name = strdup("sim");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED;
  fi_info* info = nullptr;
  if (!Check(fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &info),
             "fi_getinfo")) {
    return 1;
  }
  fid_fabric* fabric = nullptr;
  if (!Check(fi_fabric(info->fabric_attr, &fabric, nullptr), "fabric")) {
    return 1;
  }
  fid_domain* d[2];
  fid_cq* cq[2];
  fid_av* av[2];
  fid_ep* ep[2];
  fi_addr_t peer[2];
  uint8_t names[2][64];
  for (int i = 0; i < 2; ++i) {
    fi_cq_attr ca{};
    ca.size = 4096;
    ca.format = FI_CQ_FORMAT_TAGGED;
    fi_av_attr aa{};
    size_t len = sizeof names[i];
    if (!Check(fi_domain(fabric, info, &d[i], nullptr) ||
                   fi_cq_open(d[i], &ca, &cq[i], nullptr) ||
                   fi_av_open(d[i], &aa, &av[i], nullptr) ||
                   fi_endpoint(d[i], info, &ep[i], nullptr) ||
                   fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV) ||
                   fi_ep_bind(ep[i], &av[i]->fid, 0) || fi_enable(ep[i]) ||
                   fi_getname(&ep[i]->fid, names[i], &len),
               "setup")) {
      return 1;
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (fi_av_insert(av[i], names[1 - i], 1, &peer[i], 0, nullptr) != 1) {
      return 1;
    }
  }
  char buf[2][8] = {};
  fi_cq_tagged_entry e[16];
  long done = 0;
  if (!stream) {
    for (int i = 0; i < 2; ++i) {
      (void)fi_trecv(ep[i], buf[i], 8, nullptr, FI_ADDR_UNSPEC, 1, 0, nullptr);
    }
    int turn = 0;
    for (; done < n; ++done) {
      while (fi_tinject(ep[turn], buf[turn], 8, peer[turn], 1) == -FI_EAGAIN) {
        (void)fi_cq_read(cq[turn], e, 8);
      }
      bool got = false;
      while (!got) {
        const ssize_t k = fi_cq_read(cq[1 - turn], e, 8);
        for (ssize_t j = 0; j < k; ++j) got |= (e[j].flags & FI_RECV) != 0;
        (void)fi_cq_read(cq[turn], e, 8);
      }
      (void)fi_trecv(ep[1 - turn], buf[1 - turn], 8, nullptr, FI_ADDR_UNSPEC, 1,
                     0, nullptr);
      turn = 1 - turn;
    }
  } else {
    constexpr int kWindow = 256;
    std::vector<char> rb(8 * kWindow);
    long posted = 0, sent = 0;
    for (; posted < kWindow; ++posted) {
      (void)fi_trecv(ep[1], &rb[8 * (posted % kWindow)], 8, nullptr,
                     FI_ADDR_UNSPEC, 1, 0, nullptr);
    }
    while (done < n) {
      if (sent < n) {
        if (fi_tsend(ep[0], buf[0], 8, nullptr, peer[0], 1, nullptr) == 0) {
          ++sent;
        } else {
          (void)fi_cq_read(cq[0], e, 16);
        }
      }
      const ssize_t k = fi_cq_read(cq[1], e, 16);
      for (ssize_t j = 0; j < k; ++j, ++done, ++posted) {
        (void)fi_trecv(ep[1], &rb[8 * (posted % kWindow)], 8, nullptr,
                       FI_ADDR_UNSPEC, 1, 0, nullptr);
      }
      (void)fi_cq_read(cq[0], e, 16);
    }
  }
  std::printf("%ld %s\n", done, argv[2]);
  return done == n ? 0 : 1;
}
