/* softfab verbs: the transport as a public C API with libibverbs shapes.
 *
 * Code written for libibverbs ports by renaming ibv_ -> sfv_ and IBV_ -> SFV_:
 * structs, field names, enum values and error conventions match
 * (post/modify/destroy calls return an errno value; create calls return NULL
 * and set errno). The sim-specific entry points (sfv_sim_*) create a
 * deterministic simulated fabric and hand out its devices; nothing else differs
 * between backends.
 *
 * Threading: a fabric and everything obtained from it are single-threaded.
 * Blocking: nothing blocks. sfv_get_async_event returns -1 with errno EAGAIN
 * when no event is pending (ibv_get_async_event would block); sfv_poll_cq on
 * the simulator runs pending fabric events until the CQ has a completion, so a
 * busy-poll loop makes progress. Every call validates its arguments: a NULL
 * pointer, unknown flag, bad key or bad state is refused with EINVAL (or the
 * code ibv_* uses) and changes nothing.
 */
#ifndef SOFTFAB_API_VERBS_H_
#define SOFTFAB_API_VERBS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ enums (ibv
 * values) */

enum sfv_qp_state {
  SFV_QPS_RESET,
  SFV_QPS_INIT,
  SFV_QPS_RTR,
  SFV_QPS_RTS,
  SFV_QPS_SQD,
  SFV_QPS_SQE,
  SFV_QPS_ERR,
  SFV_QPS_UNKNOWN
};

enum sfv_qp_type { SFV_QPT_RC = 2, SFV_QPT_UC = 3, SFV_QPT_UD = 4 };

enum sfv_mtu {
  SFV_MTU_256 = 1,
  SFV_MTU_512 = 2,
  SFV_MTU_1024 = 3,
  SFV_MTU_2048 = 4,
  SFV_MTU_4096 = 5
};

enum sfv_port_state {
  SFV_PORT_NOP = 0,
  SFV_PORT_DOWN = 1,
  SFV_PORT_INIT = 2,
  SFV_PORT_ARMED = 3,
  SFV_PORT_ACTIVE = 4,
  SFV_PORT_ACTIVE_DEFER = 5
};

enum sfv_access_flags {
  SFV_ACCESS_LOCAL_WRITE = 1,
  SFV_ACCESS_REMOTE_WRITE = (1 << 1),
  SFV_ACCESS_REMOTE_READ = (1 << 2),
  SFV_ACCESS_REMOTE_ATOMIC = (1 << 3)
};

enum sfv_wr_opcode {
  SFV_WR_RDMA_WRITE,
  SFV_WR_RDMA_WRITE_WITH_IMM,
  SFV_WR_SEND,
  SFV_WR_SEND_WITH_IMM,
  SFV_WR_RDMA_READ
};

enum sfv_send_flags {
  SFV_SEND_FENCE = 1 << 0,
  SFV_SEND_SIGNALED = 1 << 1,
  SFV_SEND_SOLICITED = 1 << 2,
  SFV_SEND_INLINE = 1 << 3
};

enum sfv_wc_status {
  SFV_WC_SUCCESS,
  SFV_WC_LOC_LEN_ERR,
  SFV_WC_LOC_QP_OP_ERR,
  SFV_WC_LOC_EEC_OP_ERR,
  SFV_WC_LOC_PROT_ERR,
  SFV_WC_WR_FLUSH_ERR,
  SFV_WC_MW_BIND_ERR,
  SFV_WC_BAD_RESP_ERR,
  SFV_WC_LOC_ACCESS_ERR,
  SFV_WC_REM_INV_REQ_ERR,
  SFV_WC_REM_ACCESS_ERR,
  SFV_WC_REM_OP_ERR,
  SFV_WC_RETRY_EXC_ERR,
  SFV_WC_RNR_RETRY_EXC_ERR,
  SFV_WC_LOC_RDD_VIOL_ERR,
  SFV_WC_REM_INV_RD_REQ_ERR,
  SFV_WC_REM_ABORT_ERR,
  SFV_WC_INV_EECN_ERR,
  SFV_WC_INV_EEC_STATE_ERR,
  SFV_WC_FATAL_ERR,
  SFV_WC_RESP_TIMEOUT_ERR,
  SFV_WC_GENERAL_ERR
};

enum sfv_wc_opcode {
  SFV_WC_SEND,
  SFV_WC_RDMA_WRITE,
  SFV_WC_RDMA_READ,
  SFV_WC_COMP_SWAP,
  SFV_WC_FETCH_ADD,
  SFV_WC_BIND_MW,
  SFV_WC_RECV = 1 << 7,
  SFV_WC_RECV_RDMA_WITH_IMM
};

enum sfv_wc_flags { SFV_WC_GRH = 1 << 0, SFV_WC_WITH_IMM = 1 << 1 };

enum sfv_qp_attr_mask {
  SFV_QP_STATE = 1 << 0,
  SFV_QP_CUR_STATE = 1 << 1,
  SFV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
  SFV_QP_ACCESS_FLAGS = 1 << 3,
  SFV_QP_PKEY_INDEX = 1 << 4,
  SFV_QP_PORT = 1 << 5,
  SFV_QP_QKEY = 1 << 6,
  SFV_QP_AV = 1 << 7,
  SFV_QP_PATH_MTU = 1 << 8,
  SFV_QP_TIMEOUT = 1 << 9,
  SFV_QP_RETRY_CNT = 1 << 10,
  SFV_QP_RNR_RETRY = 1 << 11,
  SFV_QP_RQ_PSN = 1 << 12,
  SFV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
  SFV_QP_ALT_PATH = 1 << 14,
  SFV_QP_MIN_RNR_TIMER = 1 << 15,
  SFV_QP_SQ_PSN = 1 << 16,
  SFV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
  SFV_QP_PATH_MIG_STATE = 1 << 18,
  SFV_QP_CAP = 1 << 19,
  SFV_QP_DEST_QPN = 1 << 20
};

enum sfv_srq_attr_mask { SFV_SRQ_MAX_WR = 1 << 0, SFV_SRQ_LIMIT = 1 << 1 };

enum sfv_event_type {
  SFV_EVENT_CQ_ERR,
  SFV_EVENT_QP_FATAL,
  SFV_EVENT_QP_REQ_ERR,
  SFV_EVENT_QP_ACCESS_ERR,
  SFV_EVENT_COMM_EST,
  SFV_EVENT_SQ_DRAINED,
  SFV_EVENT_PATH_MIG,
  SFV_EVENT_PATH_MIG_ERR,
  SFV_EVENT_DEVICE_FATAL,
  SFV_EVENT_PORT_ACTIVE,
  SFV_EVENT_PORT_ERR,
  SFV_EVENT_LID_CHANGE,
  SFV_EVENT_PKEY_CHANGE,
  SFV_EVENT_SM_CHANGE,
  SFV_EVENT_SRQ_ERR,
  SFV_EVENT_SRQ_LIMIT_REACHED,
  SFV_EVENT_QP_LAST_WQE_REACHED,
  SFV_EVENT_CLIENT_REREGISTER,
  SFV_EVENT_GID_CHANGE
};

enum sfv_mig_state { SFV_MIG_MIGRATED, SFV_MIG_REARM, SFV_MIG_ARMED };

/* ------------------------------------------------------------------ objects */

struct sfv_device;       /* opaque */
struct sfv_comp_channel; /* accepted as NULL only */
struct sfv_sim_fabric;   /* opaque */

struct sfv_context {
  struct sfv_device* device;
};

struct sfv_pd {
  struct sfv_context* context;
  uint32_t handle;
};

struct sfv_mr {
  struct sfv_context* context;
  struct sfv_pd* pd;
  void* addr;
  size_t length;
  uint32_t handle;
  uint32_t lkey;
  uint32_t rkey;
};

struct sfv_cq {
  struct sfv_context* context;
  struct sfv_comp_channel* channel;
  void* cq_context;
  uint32_t handle;
  int cqe;
};

struct sfv_srq {
  struct sfv_context* context;
  void* srq_context;
  struct sfv_pd* pd;
  uint32_t handle;
};

struct sfv_qp {
  struct sfv_context* context;
  void* qp_context;
  struct sfv_pd* pd;
  struct sfv_cq* send_cq;
  struct sfv_cq* recv_cq;
  struct sfv_srq* srq;
  uint32_t handle;
  uint32_t qp_num;
  enum sfv_qp_state state;
  enum sfv_qp_type qp_type;
};

struct sfv_ah {
  struct sfv_context* context;
  struct sfv_pd* pd;
  uint32_t handle;
};

/* ------------------------------------------------------------------ plain data
 */

union sfv_gid {
  uint8_t raw[16];
  struct {
    uint64_t subnet_prefix;
    uint64_t interface_id;
  } global;
};

struct sfv_device_attr {
  char fw_ver[64];
  uint64_t node_guid;
  uint64_t sys_image_guid;
  uint64_t max_mr_size;
  uint64_t page_size_cap;
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;
  int max_qp;
  int max_qp_wr;
  unsigned int device_cap_flags;
  int max_sge;
  int max_sge_rd;
  int max_cq;
  int max_cqe;
  int max_mr;
  int max_pd;
  int max_qp_rd_atom;
  int max_ee_rd_atom;
  int max_res_rd_atom;
  int max_qp_init_rd_atom;
  int max_ee_init_rd_atom;
  int atomic_cap;
  int max_ee;
  int max_rdd;
  int max_mw;
  int max_raw_ipv6_qp;
  int max_raw_ethy_qp;
  int max_mcast_grp;
  int max_mcast_qp_attach;
  int max_total_mcast_qp_attach;
  int max_ah;
  int max_fmr;
  int max_map_per_fmr;
  int max_srq;
  int max_srq_wr;
  int max_srq_sge;
  uint16_t max_pkeys;
  uint8_t local_ca_ack_delay;
  uint8_t phys_port_cnt;
};

struct sfv_port_attr {
  enum sfv_port_state state;
  enum sfv_mtu max_mtu;
  enum sfv_mtu active_mtu;
  int gid_tbl_len;
  uint32_t port_cap_flags;
  uint32_t max_msg_sz;
  uint32_t bad_pkey_cntr;
  uint32_t qkey_viol_cntr;
  uint16_t pkey_tbl_len;
  uint16_t lid;
  uint16_t sm_lid;
  uint8_t lmc;
  uint8_t max_vl_num;
  uint8_t sm_sl;
  uint8_t subnet_timeout;
  uint8_t init_type_reply;
  uint8_t active_width;
  uint8_t active_speed;
  uint8_t phys_state;
  uint8_t link_layer;
};

struct sfv_sge {
  uint64_t addr;
  uint32_t length; /* 0 means 2^31 bytes */
  uint32_t lkey;
};

struct sfv_send_wr {
  uint64_t wr_id;
  struct sfv_send_wr* next;
  struct sfv_sge* sg_list;
  int num_sge;
  enum sfv_wr_opcode opcode;
  unsigned int send_flags;
  uint32_t imm_data; /* opaque, passed through unchanged (ibv: __be32) */
  union {
    struct {
      uint64_t remote_addr;
      uint32_t rkey;
    } rdma;
    struct {
      struct sfv_ah* ah;
      uint32_t remote_qpn;
      uint32_t remote_qkey;
    } ud;
  } wr;
};

struct sfv_recv_wr {
  uint64_t wr_id;
  struct sfv_recv_wr* next;
  struct sfv_sge* sg_list;
  int num_sge;
};

struct sfv_wc {
  uint64_t wr_id;
  enum sfv_wc_status status;
  enum sfv_wc_opcode opcode;
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm_data;
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned int wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
};

struct sfv_global_route {
  union sfv_gid dgid;
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
};

struct sfv_ah_attr {
  struct sfv_global_route grh;
  uint16_t dlid;
  uint8_t sl;
  uint8_t src_path_bits;
  uint8_t static_rate;
  uint8_t is_global;
  uint8_t port_num;
};

struct sfv_qp_cap {
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t max_inline_data;
};

struct sfv_qp_init_attr {
  void* qp_context;
  struct sfv_cq* send_cq;
  struct sfv_cq* recv_cq;
  struct sfv_srq* srq;
  struct sfv_qp_cap cap;
  enum sfv_qp_type qp_type;
  int sq_sig_all;
};

struct sfv_qp_attr {
  enum sfv_qp_state qp_state;
  enum sfv_qp_state cur_qp_state;
  enum sfv_mtu path_mtu;
  enum sfv_mig_state path_mig_state;
  uint32_t qkey;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t dest_qp_num;
  unsigned int qp_access_flags;
  struct sfv_qp_cap cap;
  struct sfv_ah_attr ah_attr;
  struct sfv_ah_attr alt_ah_attr;
  uint16_t pkey_index;
  uint16_t alt_pkey_index;
  uint8_t en_sqd_async_notify;
  uint8_t sq_draining;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
  uint8_t min_rnr_timer;
  uint8_t port_num;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t alt_port_num;
  uint8_t alt_timeout;
  uint32_t rate_limit;
};

struct sfv_srq_attr {
  uint32_t max_wr;
  uint32_t max_sge;
  uint32_t srq_limit;
};

struct sfv_srq_init_attr {
  void* srq_context;
  struct sfv_srq_attr attr;
};

struct sfv_async_event {
  union {
    struct sfv_cq* cq;
    struct sfv_qp* qp;
    struct sfv_srq* srq;
    int port_num;
  } element;
  enum sfv_event_type event_type;
};

/* ------------------------------------------------------------------ verbs */

/* The devices of a fabric, NULL-terminated; *num_devices (if non-NULL) gets the
 * count. Free with sfv_free_device_list (the devices themselves belong to the
 * fabric). */
struct sfv_device** sfv_sim_get_device_list(struct sfv_sim_fabric* fabric,
                                            int* num_devices);
void sfv_free_device_list(struct sfv_device** list);
const char* sfv_get_device_name(struct sfv_device* device);
uint64_t sfv_get_device_guid(struct sfv_device* device);

struct sfv_context* sfv_open_device(struct sfv_device* device);
/* EBUSY while PDs or CQs of this context exist. */
int sfv_close_device(struct sfv_context* context);
int sfv_query_device(struct sfv_context* context,
                     struct sfv_device_attr* device_attr);
int sfv_query_port(struct sfv_context* context, uint8_t port_num,
                   struct sfv_port_attr* port_attr);
int sfv_query_gid(struct sfv_context* context, uint8_t port_num, int index,
                  union sfv_gid* gid);

struct sfv_pd* sfv_alloc_pd(struct sfv_context* context);
int sfv_dealloc_pd(struct sfv_pd* pd);

struct sfv_mr* sfv_reg_mr(struct sfv_pd* pd, void* addr, size_t length,
                          int access);
int sfv_dereg_mr(struct sfv_mr* mr);

/* channel must be NULL (completion channels are not modelled); comp_vector is
 * ignored. */
struct sfv_cq* sfv_create_cq(struct sfv_context* context, int cqe,
                             void* cq_context, struct sfv_comp_channel* channel,
                             int comp_vector);
int sfv_destroy_cq(struct sfv_cq* cq);
/* Returns the number of completions written (>= 0) or a negative errno. */
int sfv_poll_cq(struct sfv_cq* cq, int num_entries, struct sfv_wc* wc);

struct sfv_srq* sfv_create_srq(struct sfv_pd* pd,
                               struct sfv_srq_init_attr* srq_init_attr);
int sfv_modify_srq(struct sfv_srq* srq, struct sfv_srq_attr* srq_attr,
                   int srq_attr_mask);
int sfv_query_srq(struct sfv_srq* srq, struct sfv_srq_attr* srq_attr);
int sfv_destroy_srq(struct sfv_srq* srq);
/* Stops at the first bad WR: *bad_wr points at it; the WRs before it stay
 * posted. */
int sfv_post_srq_recv(struct sfv_srq* srq, struct sfv_recv_wr* recv_wr,
                      struct sfv_recv_wr** bad_recv_wr);

struct sfv_qp* sfv_create_qp(struct sfv_pd* pd,
                             struct sfv_qp_init_attr* qp_init_attr);
int sfv_modify_qp(struct sfv_qp* qp, struct sfv_qp_attr* attr, int attr_mask);
int sfv_query_qp(struct sfv_qp* qp, struct sfv_qp_attr* attr, int attr_mask,
                 struct sfv_qp_init_attr* init_attr);
int sfv_destroy_qp(struct sfv_qp* qp);
int sfv_post_send(struct sfv_qp* qp, struct sfv_send_wr* wr,
                  struct sfv_send_wr** bad_wr);
int sfv_post_recv(struct sfv_qp* qp, struct sfv_recv_wr* wr,
                  struct sfv_recv_wr** bad_wr);

struct sfv_ah* sfv_create_ah(struct sfv_pd* pd, struct sfv_ah_attr* attr);
int sfv_destroy_ah(struct sfv_ah* ah);

/* 0 and the oldest event, or -1 with errno EAGAIN when none is pending (never
 * blocks). */
int sfv_get_async_event(struct sfv_context* context,
                        struct sfv_async_event* event);
void sfv_ack_async_event(struct sfv_async_event* event);

const char* sfv_wc_status_str(enum sfv_wc_status status);
const char* sfv_event_type_str(enum sfv_event_type event);

/* ------------------------------------------------------------------ the
 * simulator */

struct sfv_sim_config {
  int nodes; /* one HCA with one port each */
  uint64_t master_seed;
  uint64_t latency_ns;     /* every path; 0 takes the default (1000) */
  uint64_t bandwidth_bps;  /* 0 takes the default (100 Gb/s) */
  enum sfv_mtu mtu;        /* link and active MTU; 0 takes SFV_MTU_4096 */
  double drop_probability; /* per packet, every node and opcode */
  double duplicate_probability;
  double reorder_probability; /* reordered packets are held back by
                                 reorder_delay_ns */
  uint64_t reorder_delay_ns;
};

/* NULL + errno EINVAL for a bad config. */
struct sfv_sim_fabric* sfv_sim_fabric_create(
    const struct sfv_sim_config* config);
/* Releases the fabric and every object obtained from it. */
void sfv_sim_fabric_destroy(struct sfv_sim_fabric* fabric);
/* Runs events until none is pending or max_events ran; returns how many ran. */
uint64_t sfv_sim_run_until_idle(struct sfv_sim_fabric* fabric,
                                uint64_t max_events);
/* Runs every event up to virtual time t_ns; returns how many ran. */
uint64_t sfv_sim_run_until(struct sfv_sim_fabric* fabric, uint64_t t_ns);
uint64_t sfv_sim_now_ns(const struct sfv_sim_fabric* fabric);
/* The 64-bit digest of every event run so far (0 for NULL). */
uint64_t sfv_sim_digest(const struct sfv_sim_fabric* fabric);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SOFTFAB_API_VERBS_H_ */
