/* An RC ping-pong written against raw verbs (rdma-core's ibv_rc_pingpong),
 * ported by renaming ibv_ -> sfv_. It is plain C on purpose: the public header
 * must serve C programs unchanged. Both sides run in this one thread, each on
 * its own context: on a real device the two contexts of one device talk
 * through its loopback (the device comes from sfv_get_device_list, as in the
 * original); on the simulator they are two nodes of a fabric. With use_event
 * it sleeps on completion channels as ibv_rc_pingpong -e does, except that one
 * thread serves both sides, so it waits for either channel with
 * sfv_wait_comp_channels (poll(2) on a device; on the simulator, which raises
 * events only while it runs, by running the fabric) and takes events without
 * blocking. */
#define _POSIX_C_SOURCE 200809L

#include "tests/support/pingpong.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/softfab/verbs.h"

#define PP_RECV_WRID 1
#define PP_SEND_WRID 2

struct pp_context {
  struct sfv_context* context;
  struct sfv_comp_channel* channel;
  struct sfv_pd* pd;
  struct sfv_mr* mr;
  struct sfv_cq* cq;
  struct sfv_qp* qp;
  char* buf;
  int size;
  int rx_depth;
  struct sfv_port_attr portinfo;
};

struct pp_dest {
  int lid;
  int qpn;
  int psn;
  union sfv_gid gid;
};

/* One side's progress through the exchange. */
struct pp_side {
  struct pp_context* ctx;
  int routs;
  int rcnt;
  int scnt;
  int pending;
  unsigned int num_cq_events;
};

static struct pp_context* pp_init_ctx(struct sfv_device* ib_dev, int size,
                                      int rx_depth, int use_event) {
  struct pp_context* ctx = calloc(1, sizeof(*ctx));
  if (!ctx) return NULL;
  ctx->size = size;
  ctx->rx_depth = rx_depth;
  ctx->buf = calloc(1, (size_t)size);
  if (!ctx->buf) goto clean_ctx;
  ctx->context = sfv_open_device(ib_dev);
  if (!ctx->context) {
    fprintf(stderr, "Couldn't get context for %s: %s\n",
            sfv_get_device_name(ib_dev), sfv_last_error());
    goto clean_buffer;
  }
  if (use_event) {
    ctx->channel = sfv_create_comp_channel(ctx->context);
    if (!ctx->channel) goto clean_device;
  }
  ctx->pd = sfv_alloc_pd(ctx->context);
  if (!ctx->pd) goto clean_comp_channel;
  ctx->mr = sfv_reg_mr(ctx->pd, ctx->buf, (size_t)size, SFV_ACCESS_LOCAL_WRITE);
  if (!ctx->mr) goto clean_pd;
  ctx->cq = sfv_create_cq(ctx->context, rx_depth + 1, NULL, ctx->channel, 0);
  if (!ctx->cq) goto clean_mr;
  {
    struct sfv_qp_init_attr init_attr;
    memset(&init_attr, 0, sizeof(init_attr));
    init_attr.send_cq = ctx->cq;
    init_attr.recv_cq = ctx->cq;
    init_attr.cap.max_send_wr = 1;
    init_attr.cap.max_recv_wr = (uint32_t)rx_depth;
    init_attr.cap.max_send_sge = 1;
    init_attr.cap.max_recv_sge = 1;
    init_attr.qp_type = SFV_QPT_RC;
    ctx->qp = sfv_create_qp(ctx->pd, &init_attr);
    if (!ctx->qp) goto clean_cq;
  }
  {
    struct sfv_qp_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = SFV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = 0;
    if (sfv_modify_qp(ctx->qp, &attr,
                      SFV_QP_STATE | SFV_QP_PKEY_INDEX | SFV_QP_PORT |
                          SFV_QP_ACCESS_FLAGS)) {
      goto clean_qp;
    }
  }
  return ctx;

clean_qp:
  sfv_destroy_qp(ctx->qp);
clean_cq:
  sfv_destroy_cq(ctx->cq);
clean_mr:
  sfv_dereg_mr(ctx->mr);
clean_pd:
  sfv_dealloc_pd(ctx->pd);
clean_comp_channel:
  if (ctx->channel) sfv_destroy_comp_channel(ctx->channel);
clean_device:
  sfv_close_device(ctx->context);
clean_buffer:
  free(ctx->buf);
clean_ctx:
  free(ctx);
  return NULL;
}

static int pp_close_ctx(struct pp_context* ctx) {
  int rc = 0;
  if (sfv_destroy_qp(ctx->qp)) rc = 1;
  if (sfv_destroy_cq(ctx->cq)) rc = 1;
  if (sfv_dereg_mr(ctx->mr)) rc = 1;
  if (sfv_dealloc_pd(ctx->pd)) rc = 1;
  if (ctx->channel && sfv_destroy_comp_channel(ctx->channel)) rc = 1;
  if (sfv_close_device(ctx->context)) rc = 1;
  free(ctx->buf);
  free(ctx);
  return rc;
}

static int pp_post_recv(struct pp_context* ctx, int n) {
  struct sfv_sge list = {(uintptr_t)ctx->buf, (uint32_t)ctx->size,
                         ctx->mr->lkey};
  struct sfv_recv_wr wr;
  struct sfv_recv_wr* bad_wr;
  int i;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = PP_RECV_WRID;
  wr.sg_list = &list;
  wr.num_sge = 1;
  for (i = 0; i < n; ++i) {
    if (sfv_post_recv(ctx->qp, &wr, &bad_wr)) break;
  }
  return i;
}

static int pp_post_send(struct pp_context* ctx) {
  struct sfv_sge list = {(uintptr_t)ctx->buf, (uint32_t)ctx->size,
                         ctx->mr->lkey};
  struct sfv_send_wr wr;
  struct sfv_send_wr* bad_wr;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = PP_SEND_WRID;
  wr.sg_list = &list;
  wr.num_sge = 1;
  wr.opcode = SFV_WR_SEND;
  wr.send_flags = SFV_SEND_SIGNALED;
  return sfv_post_send(ctx->qp, &wr, &bad_wr);
}

static int pp_connect_ctx(struct pp_context* ctx, int my_psn,
                          struct pp_dest* dest) {
  struct sfv_qp_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.qp_state = SFV_QPS_RTR;
  attr.path_mtu = SFV_MTU_1024;
  attr.dest_qp_num = (uint32_t)dest->qpn;
  attr.rq_psn = (uint32_t)dest->psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.is_global = 0;
  attr.ah_attr.dlid = (uint16_t)dest->lid;
  attr.ah_attr.sl = 0;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.port_num = 1;
  if (dest->gid.global.interface_id) {
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.hop_limit = 1;
    attr.ah_attr.grh.dgid = dest->gid;
    attr.ah_attr.grh.sgid_index = 0; /* the context's GID (see verbs.h) */
  }
  if (sfv_modify_qp(ctx->qp, &attr,
                    SFV_QP_STATE | SFV_QP_AV | SFV_QP_PATH_MTU |
                        SFV_QP_DEST_QPN | SFV_QP_RQ_PSN |
                        SFV_QP_MAX_DEST_RD_ATOMIC | SFV_QP_MIN_RNR_TIMER)) {
    fprintf(stderr, "Failed to modify QP to RTR\n");
    return 1;
  }
  attr.qp_state = SFV_QPS_RTS;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.sq_psn = (uint32_t)my_psn;
  attr.max_rd_atomic = 1;
  if (sfv_modify_qp(ctx->qp, &attr,
                    SFV_QP_STATE | SFV_QP_TIMEOUT | SFV_QP_RETRY_CNT |
                        SFV_QP_RNR_RETRY | SFV_QP_SQ_PSN |
                        SFV_QP_MAX_QP_RD_ATOMIC)) {
    fprintf(stderr, "Failed to modify QP to RTS\n");
    return 1;
  }
  return 0;
}

/* Polls one batch from the side's CQ and acts on it, as the original's loop
 * body does: a side posts its next send only once both its previous send and
 * the awaited receive have completed. Returns the number of completions, or
 * -1 on failure. */
static int pp_poll_side(struct pp_side* s, int side, int iters, int size) {
  struct sfv_wc wc[2];
  int ne, i;
  ne = sfv_poll_cq(s->ctx->cq, 2, wc);
  if (ne < 0) {
    fprintf(stderr, "poll CQ failed %d\n", ne);
    return -1;
  }
  for (i = 0; i < ne; ++i) {
    if (wc[i].status != SFV_WC_SUCCESS) {
      fprintf(stderr, "Failed status %s (%d) for wr_id %d\n",
              sfv_wc_status_str(wc[i].status), wc[i].status, (int)wc[i].wr_id);
      return -1;
    }
    switch ((int)wc[i].wr_id) {
      case PP_SEND_WRID:
        ++s->scnt;
        break;
      case PP_RECV_WRID:
        if (--s->routs <= 1) {
          s->routs += pp_post_recv(s->ctx, s->ctx->rx_depth - s->routs);
        }
        ++s->rcnt;
        if (wc[i].byte_len != (uint32_t)size) return -1;
        break;
      default:
        fprintf(stderr, "Completion for unknown wr_id %d\n", (int)wc[i].wr_id);
        return -1;
    }
    s->pending &= ~(int)wc[i].wr_id;
    if (!s->pending && s->rcnt < iters + side && s->scnt < iters) {
      if (pp_post_send(s->ctx)) {
        fprintf(stderr, "Couldn't post send\n");
        return -1;
      }
      s->pending = PP_RECV_WRID | PP_SEND_WRID;
    }
  }
  return ne;
}

/* Takes the side's pending channel event, if any (the fd is O_NONBLOCK), acks
 * it, re-arms the CQ and then empties it, as the channel rules ask. 1 if there
 * was an event, 0 if none, -1 on failure. */
static int pp_take_event(struct pp_side* s, int side, int iters, int size) {
  struct sfv_cq* ev_cq;
  void* ev_ctx;
  int ne;
  if (sfv_get_cq_event(s->ctx->channel, &ev_cq, &ev_ctx)) {
    if (errno == EAGAIN) return 0;
    fprintf(stderr, "Failed to get cq_event: %s\n", sfv_last_error());
    return -1;
  }
  if (ev_cq != s->ctx->cq) {
    fprintf(stderr, "CQ event for unknown CQ %p\n", (void*)ev_cq);
    return -1;
  }
  ++s->num_cq_events;
  sfv_ack_cq_events(s->ctx->cq, 1);
  if (sfv_req_notify_cq(s->ctx->cq, 0)) {
    fprintf(stderr, "Couldn't request CQ notification\n");
    return -1;
  }
  do {
    ne = pp_poll_side(s, side, iters, size);
  } while (ne > 0);
  return ne < 0 ? -1 : 1;
}

static int64_t pp_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for either side's channel, at most slice_ms: sfv_wait_comp_channels
 * sleeps in poll(2) on a device and runs the fabric on the simulator (failing
 * when it runs out of events first: the exchange is stuck). */
static int pp_wait_events(struct pp_side* s, int slice_ms) {
  struct sfv_comp_channel* channels[2];
  channels[0] = s[0].ctx->channel;
  channels[1] = s[1].ctx->channel;
  return sfv_wait_comp_channels(channels, 2, slice_ms) < 0 ? -1 : 0;
}

static int pp_run(struct sfv_device* dev0, struct sfv_device* dev1,
                  struct sfv_sim_fabric* fabric, const struct pp_options* opt,
                  struct pp_result* result) {
  struct sfv_device* devs[2] = {dev0, dev1};
  struct pp_side s[2];
  struct pp_dest dest[2];
  int side, rc = 1;
  const int rx_depth = 100;
  const int size = opt->size;
  const int iters = opt->iters;
  const int64_t deadline = opt->timeout_ms ? pp_now_ms() + opt->timeout_ms : 0;

  memset(s, 0, sizeof(s));
  for (side = 0; side < 2; ++side) {
    int flags;
    s[side].ctx = pp_init_ctx(devs[side], size, rx_depth, opt->use_event);
    if (!s[side].ctx) goto out;
    if (opt->use_event) {
      /* One thread serves both sides, so neither may block on its own. */
      flags = fcntl(s[side].ctx->channel->fd, F_GETFL);
      if (fcntl(s[side].ctx->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        goto out;
      }
      if (sfv_req_notify_cq(s[side].ctx->cq, 0)) {
        fprintf(stderr, "Couldn't request CQ notification\n");
        goto out;
      }
    }
    s[side].routs = pp_post_recv(s[side].ctx, s[side].ctx->rx_depth);
    if (s[side].routs < s[side].ctx->rx_depth) goto out;
    if (sfv_query_port(s[side].ctx->context, 1, &s[side].ctx->portinfo)) {
      goto out;
    }
    dest[side].lid = s[side].ctx->portinfo.lid;
    dest[side].qpn = (int)s[side].ctx->qp->qp_num;
    dest[side].psn = 0x1000 * (side + 1);
    if (sfv_query_gid(s[side].ctx->context, 1, 0, &dest[side].gid)) {
      fprintf(stderr, "can't read sgid of index 0\n");
      goto out;
    }
  }
  /* "Exchange" destinations and connect each side to the other. */
  for (side = 0; side < 2; ++side) {
    if (pp_connect_ctx(s[side].ctx, dest[side].psn, &dest[1 - side])) goto out;
  }
  /* Side 0 is the client: it sends first. */
  memset(s[0].ctx->buf, 0x5a, (size_t)size);
  if (pp_post_send(s[0].ctx)) goto out;
  s[0].pending = PP_RECV_WRID | PP_SEND_WRID;
  s[1].pending = PP_RECV_WRID;
  while (s[0].rcnt < iters || s[0].scnt < iters || s[1].rcnt < iters ||
         s[1].scnt < iters) {
    if (deadline && pp_now_ms() > deadline) {
      fprintf(stderr, "timed out after %d round trips\n", s[0].rcnt);
      goto out;
    }
    if (opt->use_event) {
      int got = 0, r;
      for (side = 0; side < 2; ++side) {
        r = pp_take_event(&s[side], side, iters, size);
        if (r < 0) goto out;
        got += r;
      }
      if (!got && pp_wait_events(s, 100)) goto out;
    } else {
      for (side = 0; side < 2; ++side) {
        if (pp_poll_side(&s[side], side, iters, size) < 0) goto out;
      }
    }
  }
  result->round_trips = s[0].rcnt;
  result->bytes_ok =
      s[1].ctx->buf[size - 1] == 0x5a && s[0].ctx->buf[0] == 0x5a;
  result->cq_events = s[0].num_cq_events + s[1].num_cq_events;
  result->virtual_ns = fabric ? sfv_sim_now_ns(fabric) : 0;
  rc = 0;
out:
  for (side = 0; side < 2; ++side) {
    if (s[side].ctx && pp_close_ctx(s[side].ctx)) rc = 1;
  }
  return rc;
}

int sfv_pingpong_run(struct sfv_sim_fabric* fabric, int iters, int size,
                     struct pp_result* result) {
  struct pp_options opt;
  memset(&opt, 0, sizeof(opt));
  opt.iters = iters;
  opt.size = size;
  return sfv_pingpong_run_sim(fabric, &opt, result);
}

int sfv_pingpong_run_sim(struct sfv_sim_fabric* fabric,
                         const struct pp_options* opt,
                         struct pp_result* result) {
  struct sfv_device** dev_list;
  int num_devices, rc = 1;
  memset(result, 0, sizeof(*result));
  dev_list = sfv_sim_get_device_list(fabric, &num_devices);
  if (!dev_list) return 1;
  if (num_devices >= 2)
    rc = pp_run(dev_list[0], dev_list[1], fabric, opt, result);
  sfv_free_device_list(dev_list);
  return rc;
}

int sfv_pingpong_run_device(const char* ib_devname,
                            const struct pp_options* opt,
                            struct pp_result* result) {
  struct sfv_device** dev_list;
  struct sfv_device* ib_dev;
  int i, rc;
  memset(result, 0, sizeof(*result));
  dev_list = sfv_get_device_list(NULL);
  if (!dev_list) {
    perror("Failed to get IB devices list");
    return 1;
  }
  if (!ib_devname) {
    ib_dev = *dev_list;
    if (!ib_dev) {
      fprintf(stderr, "No IB devices found: %s\n", sfv_last_error());
      sfv_free_device_list(dev_list);
      return 1;
    }
  } else {
    for (i = 0; dev_list[i]; ++i) {
      if (!strcmp(sfv_get_device_name(dev_list[i]), ib_devname)) break;
    }
    ib_dev = dev_list[i];
    if (!ib_dev) {
      fprintf(stderr, "IB device %s not found\n", ib_devname);
      sfv_free_device_list(dev_list);
      return 1;
    }
  }
  /* Both sides on the one device, each with its own context. */
  rc = pp_run(ib_dev, ib_dev, NULL, opt, result);
  sfv_free_device_list(dev_list);
  return rc;
}
