/* A C program built outside Bazel against an installed softfab
 * (tools/install.sh): cc sim_message.c $(pkg-config --cflags --libs softfab).
 * Two nodes of the simulator exchange a tagged message over RDM endpoints,
 * every byte checked, and the verbs face (sfv_*) answers from the same
 * library. Prints "sim_message: ok" and exits 0 on success. */
#include <softfab/fabric.h>
#include <softfab/verbs.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                          \
  do {                                                                       \
    long rc_ = (long)(call);                                                 \
    if (rc_ < 0) {                                                           \
      fprintf(stderr, "%s failed: %ld (%s)\n", #call, rc_, sf_last_error()); \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main(void) {
  struct sf_fabric_attr fa = {0};
  fa.backend = SF_BACKEND_SIM;
  fa.sim_nodes = 2;
  fa.sim_seed = 7;
  struct sf_fabric* fabric = NULL;
  CHECK(sf_fabric_open(&fa, &fabric, NULL));
  struct sf_domain* dom[2];
  struct sf_cq* cq[2];
  struct sf_av* av[2];
  struct sf_ep* ep[2];
  unsigned char names[2][SF_NAME_BYTES];
  for (int i = 0; i < 2; ++i) {
    CHECK(sf_domain_open(fabric, i, &dom[i], NULL));
    struct sf_cq_attr ca = {0};
    ca.format = SF_CQ_FORMAT_TAGGED;
    CHECK(sf_cq_open(dom[i], &ca, &cq[i], NULL));
    struct sf_av_attr aa = {0};
    CHECK(sf_av_open(dom[i], &aa, &av[i], NULL));
    struct sf_ep_attr ea = {0};
    ea.type = SF_EP_RDM;
    ea.caps = SF_TAGGED;
    CHECK(sf_endpoint(dom[i], &ea, &ep[i], NULL));
    CHECK(sf_ep_bind(ep[i], &av[i]->fid, 0));
    CHECK(sf_ep_bind(ep[i], &cq[i]->fid, SF_TRANSMIT | SF_RECV));
    CHECK(sf_enable(ep[i]));
    size_t len = sizeof names[i];
    CHECK(sf_getname(&ep[i]->fid, names[i], &len));
  }
  sf_addr_t peer;
  if (sf_av_insert(av[0], names[1], 1, &peer, 0, NULL) != 1) return 1;

  char out[4096], in[4096];
  for (size_t i = 0; i < sizeof out; ++i) out[i] = (char)(i * 7 + 3);
  memset(in, 0, sizeof in);
  int rctx, sctx;
  CHECK(sf_trecv(ep[1], in, sizeof in, NULL, SF_ADDR_UNSPEC, 42, 0, &rctx));
  CHECK(sf_tsend(ep[0], out, sizeof out, NULL, peer, 42, &sctx));
  struct sf_cq_tagged_entry e;
  long rc = -SF_EAGAIN;
  for (int tries = 0; tries < 1000000 && rc == -SF_EAGAIN; ++tries) {
    rc = sf_cq_read(cq[1], &e, 1);
    sf_cq_read(cq[0], NULL, 0);
  }
  if (rc != 1 || e.op_context != &rctx || e.tag != 42 || e.len != sizeof out ||
      memcmp(in, out, sizeof out) != 0) {
    fprintf(stderr, "receive: rc %ld\n", rc);
    return 1;
  }
  int devices = -1;
  struct sfv_device** list = sfv_get_device_list(&devices);
  if (list == NULL || devices < 0) return 1;
  sfv_free_device_list(list);
  for (int i = 0; i < 2; ++i) {
    CHECK(sf_close(&ep[i]->fid));
    CHECK(sf_close(&av[i]->fid));
    CHECK(sf_close(&cq[i]->fid));
    CHECK(sf_close(&dom[i]->fid));
  }
  CHECK(sf_close(&fabric->fid));
  printf("sim_message: ok (%d verbs devices seen)\n", devices);
  return 0;
}
