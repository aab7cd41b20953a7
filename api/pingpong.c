/* An RC ping-pong written against raw verbs, ported by renaming ibv_ -> sfv_
 * (and getting the devices from a simulated fabric instead of
 * ibv_get_device_list). It is plain C on purpose: the public header must serve
 * C programs unchanged. */
#include "api/pingpong.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/softfab/verbs.h"

#define PP_RECV_WRID 1
#define PP_SEND_WRID 2

struct pp_context {
  struct sfv_context* context;
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
};

static struct pp_context* pp_init_ctx(struct sfv_device* ib_dev, int size,
                                      int rx_depth) {
  struct pp_context* ctx = calloc(1, sizeof(*ctx));
  if (!ctx) return NULL;
  ctx->size = size;
  ctx->rx_depth = rx_depth;
  ctx->buf = calloc(1, (size_t)size);
  if (!ctx->buf) goto clean_ctx;
  ctx->context = sfv_open_device(ib_dev);
  if (!ctx->context) goto clean_buffer;
  ctx->pd = sfv_alloc_pd(ctx->context);
  if (!ctx->pd) goto clean_device;
  ctx->mr = sfv_reg_mr(ctx->pd, ctx->buf, (size_t)size, SFV_ACCESS_LOCAL_WRITE);
  if (!ctx->mr) goto clean_pd;
  ctx->cq = sfv_create_cq(ctx->context, rx_depth + 1, NULL, NULL, 0);
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
  if (sfv_modify_qp(ctx->qp, &attr,
                    SFV_QP_STATE | SFV_QP_AV | SFV_QP_PATH_MTU |
                        SFV_QP_DEST_QPN | SFV_QP_RQ_PSN |
                        SFV_QP_MAX_DEST_RD_ATOMIC | SFV_QP_MIN_RNR_TIMER)) {
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
    return 1;
  }
  return 0;
}

int sfv_pingpong_run(struct sfv_sim_fabric* fabric, int iters, int size,
                     struct pp_result* result) {
  struct sfv_device** dev_list;
  struct pp_context* ctx[2] = {NULL, NULL};
  struct pp_dest dest[2];
  int routs[2], rcnt[2] = {0, 0}, scnt[2] = {0, 0}, pending[2];
  int num_devices, side, rc = 1;
  const int rx_depth = 100;

  memset(result, 0, sizeof(*result));
  dev_list = sfv_sim_get_device_list(fabric, &num_devices);
  if (!dev_list || num_devices < 2) return 1;
  for (side = 0; side < 2; ++side) {
    ctx[side] = pp_init_ctx(dev_list[side], size, rx_depth);
    if (!ctx[side]) goto out;
    routs[side] = pp_post_recv(ctx[side], ctx[side]->rx_depth);
    if (routs[side] < ctx[side]->rx_depth) goto out;
    if (sfv_query_port(ctx[side]->context, 1, &ctx[side]->portinfo)) goto out;
    dest[side].lid = ctx[side]->portinfo.lid;
    dest[side].qpn = (int)ctx[side]->qp->qp_num;
    dest[side].psn = 0x1000 * (side + 1);
  }
  /* "Exchange" destinations and connect each side to the other. */
  for (side = 0; side < 2; ++side) {
    if (pp_connect_ctx(ctx[side], dest[side].psn, &dest[1 - side])) goto out;
  }
  /* Side 0 is the client: it sends first. As in the classic ping-pong, a side
   * posts its next send only once both its previous send and the awaited
   * receive have completed. */
  memset(ctx[0]->buf, 0x5a, (size_t)size);
  if (pp_post_send(ctx[0])) goto out;
  pending[0] = PP_RECV_WRID | PP_SEND_WRID;
  pending[1] = PP_RECV_WRID;
  while (rcnt[0] < iters || scnt[0] < iters || rcnt[1] < iters ||
         scnt[1] < iters) {
    for (side = 0; side < 2; ++side) {
      struct sfv_wc wc[2];
      int ne, i;
      ne = sfv_poll_cq(ctx[side]->cq, 2, wc);
      if (ne < 0) goto out;
      for (i = 0; i < ne; ++i) {
        if (wc[i].status != SFV_WC_SUCCESS) {
          fprintf(stderr, "failed status %s (%d) for wr_id %d\n",
                  sfv_wc_status_str(wc[i].status), wc[i].status,
                  (int)wc[i].wr_id);
          goto out;
        }
        switch ((int)wc[i].wr_id) {
          case PP_SEND_WRID:
            ++scnt[side];
            break;
          case PP_RECV_WRID:
            if (--routs[side] <= 1) {
              routs[side] +=
                  pp_post_recv(ctx[side], ctx[side]->rx_depth - routs[side]);
            }
            ++rcnt[side];
            if (wc[i].byte_len != (uint32_t)size) goto out;
            break;
          default:
            goto out;
        }
        pending[side] &= ~(int)wc[i].wr_id;
        if (!pending[side] && rcnt[side] < iters + side && scnt[side] < iters) {
          if (pp_post_send(ctx[side])) goto out;
          pending[side] = PP_RECV_WRID | PP_SEND_WRID;
        }
      }
    }
  }
  result->round_trips = rcnt[0];
  result->bytes_ok = ctx[1]->buf[size - 1] == 0x5a && ctx[0]->buf[0] == 0x5a;
  result->virtual_ns = sfv_sim_now_ns(fabric);
  rc = 0;
out:
  for (side = 0; side < 2; ++side) {
    if (ctx[side] && pp_close_ctx(ctx[side])) rc = 1;
  }
  sfv_free_device_list(dev_list);
  return rc;
}
