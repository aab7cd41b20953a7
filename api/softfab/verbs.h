/* softfab verbs: the transport as a public C API with libibverbs shapes.
 *
 * Code written for libibverbs ports by renaming ibv_ -> sfv_ and IBV_ -> SFV_:
 * structs, field names, enum values and error conventions match
 * (post/modify/destroy calls return an errno value; create calls return NULL
 * and set errno, and sfv_last_error says why). Two backends sit behind the
 * same calls:
 * - real RDMA devices (rxe, siw, ConnectX ...) through libibverbs:
 *   sfv_get_device_list lists them and every call forwards to the real verb;
 * - the deterministic simulator: sfv_sim_fabric_create builds a fabric and
 *   sfv_sim_get_device_list hands out its devices.
 * Nothing else differs between backends except where a call says so; where
 * Soft-RoCE (rxe) answers differently from the simulator, the call lists the
 * quirk ("rxe quirk") and api/verbs_quirks_test.cc checks each side.
 *
 * Ports and GIDs on a real device: a context stands for one physical port and
 * one GID, chosen when it opens (the first ACTIVE port; on Ethernet the first
 * RoCEv2 GID, an IPv4-mapped one preferred). Port 1 and GID index 0 name
 * them, as on the simulator: sfv_query_port(ctx, 1, ...) answers for the
 * chosen port, gid_tbl_len reads 1, phys_port_cnt 1, and a path's
 * ah_attr.grh.sgid_index must be 0 (ibv code that passes a GID index such as
 * rxe's 1 passes 0 here). On RoCE every address gets a GRH (is_global is
 * forced to 1 with the caller's dgid), so set grh.dgid to the peer's GID.
 *
 * Threading: a simulated fabric and everything obtained from it are
 * single-threaded. On a real device posting, polling and the completion
 * channel calls may run on different threads (as libibverbs allows), but
 * creating or destroying objects of a context must not run concurrently with
 * other calls on that context.
 *
 * Blocking: only sfv_get_cq_event blocks, and only while its channel's fd is
 * not O_NONBLOCK (see there). sfv_get_async_event returns -1 with errno EAGAIN
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

struct sfv_device;     /* opaque */
struct sfv_sim_fabric; /* opaque */

struct sfv_context {
  struct sfv_device* device; /* valid until sfv_close_device */
  int num_comp_vectors;      /* 1: sfv_create_cq takes comp_vector 0 only */
};

/* A completion channel (ibv_comp_channel). `fd` becomes readable while an
 * event is pending; watch it with poll(2), select(2) or epoll, and set
 * O_NONBLOCK on it (fcntl) to make sfv_get_cq_event return at once. It is not
 * the kernel's event file itself (reading it gives nothing): it is an epoll fd
 * watching that file, so its O_NONBLOCK flag is the caller's own. */
struct sfv_comp_channel {
  struct sfv_context* context;
  int fd;
  int refcnt; /* the CQs using the channel */
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

/* Why the last failing sfv_* call on this thread failed, in words; "" if
 * none failed yet. Set by calls that return NULL (or -1) with errno; the
 * device list and sfv_open_device name what they found ("no RDMA device named
 * mlx5_0; found: rxe0", "rxe0 port 1 is DOWN ..."). Calls that return an errno
 * value leave it alone. */
const char* sfv_last_error(void);

/* The RDMA devices libibverbs finds (ibv_get_device_list), NULL-terminated, in
 * libibverbs' order; *num_devices (if non-NULL) gets the count. No device is
 * not an error: the list is empty and sfv_last_error says why (no driver
 * loaded, no provider package, no kernel support). Devices that cannot be
 * opened and queried are left out and named in sfv_last_error. NULL + errno
 * ENOMEM only if the list cannot be allocated. Free with sfv_free_device_list;
 * a context opened from an entry stays valid after that. */
struct sfv_device** sfv_get_device_list(int* num_devices);
/* The devices of a simulated fabric, NULL-terminated; *num_devices (if
 * non-NULL) gets the count. Free with sfv_free_device_list (the devices
 * themselves belong to the fabric). */
struct sfv_device** sfv_sim_get_device_list(struct sfv_sim_fabric* fabric,
                                            int* num_devices);
/* Frees either kind of list (NULL is ignored). */
void sfv_free_device_list(struct sfv_device** list);
const char* sfv_get_device_name(struct sfv_device* device);
/* The node GUID in host byte order (ibv_get_device_guid returns it
 * big-endian), as sfv_device_attr::node_guid holds it. */
uint64_t sfv_get_device_guid(struct sfv_device* device);

/* A real device opens its first ACTIVE port and, on Ethernet, its first
 * RoCEv2 GID (an IPv4-mapped one preferred), which become port 1 and GID
 * index 0 (see the top of this file). NULL + errno, with the reason in
 * sfv_last_error: ENODEV (no such device any more), ENETDOWN (no port is
 * ACTIVE), EADDRNOTAVAIL (no usable GID: give the netdev an IP address),
 * EACCES/EPERM (no access to /dev/infiniband). */
struct sfv_context* sfv_open_device(struct sfv_device* device);
/* EBUSY while PDs, CQs or completion channels of this context exist
 * (ibv_close_device does not check). */
int sfv_close_device(struct sfv_context* context);
int sfv_query_device(struct sfv_context* context,
                     struct sfv_device_attr* device_attr);
/* Port 1 only. The values are the device's own: rxe's active_mtu follows its
 * netdev (SFV_MTU_1024 for an Ethernet MTU of 1500), the simulator's is
 * SFV_MTU_4096 unless its config says otherwise: choose a QP's path_mtu
 * from it. */
int sfv_query_port(struct sfv_context* context, uint8_t port_num,
                   struct sfv_port_attr* port_attr);
int sfv_query_gid(struct sfv_context* context, uint8_t port_num, int index,
                  union sfv_gid* gid);

struct sfv_pd* sfv_alloc_pd(struct sfv_context* context);
int sfv_dealloc_pd(struct sfv_pd* pd);

struct sfv_mr* sfv_reg_mr(struct sfv_pd* pd, void* addr, size_t length,
                          int access);
int sfv_dereg_mr(struct sfv_mr* mr);

/* channel (NULL for none) must be of the same context; comp_vector must be in
 * [0, context->num_comp_vectors). cqe is a minimum: cq->cqe holds what was
 * granted.
 * rxe quirk (granted sizes): rxe rounds the CQ, QP and SRQ sizes up (a CQ of
 * 10 gets 15 entries, 2^k - 1); the simulator grants what was asked. Read
 * back cq->cqe, and the QP's and SRQ's sizes with sfv_query_qp/_srq. */
struct sfv_cq* sfv_create_cq(struct sfv_context* context, int cqe,
                             void* cq_context, struct sfv_comp_channel* channel,
                             int comp_vector);
/* EBUSY while a QP uses the CQ, and while events taken for it from its channel
 * are not acked (where ibv_destroy_cq would wait for the acks forever). */
int sfv_destroy_cq(struct sfv_cq* cq);
/* Returns the number of completions written (>= 0) or a negative errno.
 * rxe quirk (RC src_qp): ibv_wc(3) defines src_qp for UD only; for an RC
 * receive the simulator reports the sender's QP number, rxe 0.
 * rxe quirk (unknown lkey): a send whose SGE names an lkey that no region has
 * completes with SFV_WC_LOC_QP_OP_ERR on rxe, SFV_WC_LOC_PROT_ERR on the
 * simulator (and hardware). An SGE past the end of a known region is
 * SFV_WC_LOC_PROT_ERR on both. */
int sfv_poll_cq(struct sfv_cq* cq, int num_entries, struct sfv_wc* wc);

/* ---- completion channels: sleeping until a CQ has a completion ----
 *
 * The cycle, as with libibverbs: create a channel and a CQ on it, arm the CQ
 * (sfv_req_notify_cq), wait for the fd (poll(2)) or block in
 * sfv_get_cq_event, take the event, ack it (sfv_ack_cq_events; acks may be
 * batched), re-arm, then poll the CQ until it is empty before waiting again:
 * completions that arrived before the arm raise nothing, and an event may
 * come with nothing left to poll. One arm gives at most one event.
 *
 * To wait on several channels at once, on any backend, use
 * sfv_wait_comp_channels (the poll(2) of this API). On the simulator the
 * fabric is single-threaded and its clock virtual: events are raised only
 * while a call runs the fabric (sfv_poll_cq, sfv_wait_comp_channels, a
 * blocking sfv_get_cq_event), so sleeping in poll(2) on the fds yourself
 * would wait forever there; sfv_wait_comp_channels works on both. */

/* NULL + errno (EINVAL for a NULL or closed context; EMFILE ...). */
struct sfv_comp_channel* sfv_create_comp_channel(struct sfv_context* context);
/* EBUSY while a CQ uses it. */
int sfv_destroy_comp_channel(struct sfv_comp_channel* channel);
/* Arms the CQ: its next completion (only a solicited one when solicited_only)
 * raises one event on its channel. Returns an errno value. A CQ without a
 * channel can be armed, to no effect, as in rdma-core.
 * rxe's rules, which the simulator follows: a solicited completion is a
 * receive completion whose message had SFV_SEND_SOLICITED; error completions
 * count as solicited only if their message had it (ibv_req_notify_cq(3) says
 * every error completion counts), so code that must wake on errors should arm
 * for any completion. */
int sfv_req_notify_cq(struct sfv_cq* cq, int solicited_only);
/* Takes the oldest event: *cq is the CQ that raised it and *cq_context that
 * CQ's cq_context. 0, or -1 with errno.
 * While the fd is blocking (the default) this waits like ibv_get_cq_event:
 * - on a real device, until an event comes (EINTR if a signal interrupts);
 * - on the simulator, running the fabric's events one at a time until the
 *   event is raised. If the fabric runs out of events first, nothing can ever
 *   raise it (no other thread drives a simulated fabric), so instead of
 *   waiting forever it returns -1 with errno EAGAIN; also after 2^20 events
 *   without one (a QP retrying forever).
 * With O_NONBLOCK set on the fd it never waits (and never runs the fabric):
 * -1 with errno EAGAIN when no event is pending. */
int sfv_get_cq_event(struct sfv_comp_channel* channel, struct sfv_cq** cq,
                     void** cq_context);
/* Acks nevents events taken for cq (at most as many as were taken). */
void sfv_ack_cq_events(struct sfv_cq* cq, unsigned int nevents);
/* Waits until at least one of the `count` channels has an event to take, or
 * `timeout_ms` passes (-1: no limit), on every backend: on a real device by
 * sleeping in poll(2) on their fds, on the simulator by running the fabric
 * (the timeout is then virtual time). Like poll(2) it takes no event (follow
 * with sfv_get_cq_event). The channels must come from contexts of one device
 * list or simulated fabric. Returns how many channels have an event pending
 * (> 0), 0 when the time passed first, or -1 with errno: EINVAL for bad
 * arguments, EINTR when a signal interrupted the sleep, EAGAIN when the
 * simulated fabric ran out of events first (nothing can raise one any more:
 * waiting longer would wait for ever). */
int sfv_wait_comp_channels(struct sfv_comp_channel** channels, int count,
                           int timeout_ms);

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

/* RC and UD (EOPNOTSUPP for UC). qp->state is refreshed, as in libibverbs, by
 * modify and query (and here by posts and async events too), not by polling.
 * rxe quirk (QP state record): what a real device reports there is
 * libibverbs' record, so a QP the device moved to ERROR (retries exhausted, a
 * protection error) reads its old state until sfv_query_qp; the simulator
 * reports its live state at each refresh. */
struct sfv_qp* sfv_create_qp(struct sfv_pd* pd,
                             struct sfv_qp_init_attr* qp_init_attr);
int sfv_modify_qp(struct sfv_qp* qp, struct sfv_qp_attr* attr, int attr_mask);
int sfv_query_qp(struct sfv_qp* qp, struct sfv_qp_attr* attr, int attr_mask,
                 struct sfv_qp_init_attr* init_attr);
int sfv_destroy_qp(struct sfv_qp* qp);
int sfv_post_send(struct sfv_qp* qp, struct sfv_send_wr* wr,
                  struct sfv_send_wr** bad_wr);
/* rxe quirk (receive in ERROR): a receive posted to a QP already in ERROR is
 * accepted but never flushed on rxe (no completion until the QP is destroyed);
 * the simulator flushes it (SFV_WC_WR_FLUSH_ERR), as ibv_post_recv(3)
 * describes. Receives queued before the move to ERROR are flushed on both.
 * rxe quirk (UD GRH bytes): a UD receive gets the 40-byte GRH space before
 * the payload (SFV_WC_GRH set, byte_len counts it). On rxe (RoCEv2 over IPv4)
 * the first 20 bytes are zero and the IPv4 header follows (0x45 ...); the
 * simulator fills the first 20 with 0xa5 ("undefined"). Read the payload at
 * offset 40 and nothing before it. */
int sfv_post_recv(struct sfv_qp* qp, struct sfv_recv_wr* wr,
                  struct sfv_recv_wr** bad_wr);

struct sfv_ah* sfv_create_ah(struct sfv_pd* pd, struct sfv_ah_attr* attr);
int sfv_destroy_ah(struct sfv_ah* ah);

/* 0 and the oldest event, or -1 with errno EAGAIN when none is pending (never
 * blocks).
 * rxe quirk (last WQE): a QP on an SRQ that enters ERROR raises
 * SFV_EVENT_QP_LAST_WQE_REACHED on the simulator (as the IB spec asks); rxe
 * (Linux 6.1) raises nothing. */
int sfv_get_async_event(struct sfv_context* context,
                        struct sfv_async_event* event);
void sfv_ack_async_event(struct sfv_async_event* event);

const char* sfv_wc_status_str(enum sfv_wc_status status);
const char* sfv_event_type_str(enum sfv_event_type event);

/* ------------------------------------------------------------------ the
 * simulator */

/* Where real devices differ from the IB spec or from each other, the simulated
 * HCA behaves as Soft-RoCE (rxe) does, the device the verbs tests run on:
 * - A UD send longer than the path MTU sends nothing and completes
 *   successfully; the QP stays in RTS (IB C10-93.1.1).
 * - An RC SEND into a receive too small for it completes the receive with
 *   SFV_WC_LOC_QP_OP_ERR and the send with SFV_WC_REM_OP_ERR (rxe's NAK, not
 *   the spec's local length error); both QPs go to SFV_QPS_ERR. Packets of the
 *   message before the one that overflows are already in the buffer.
 * - A UD datagram into a receive without room for the 40-byte GRH and the
 *   payload completes the receive with SFV_WC_LOC_QP_OP_ERR and moves the QP
 *   to SFV_QPS_ERR.
 * The C++ SimConfig::personality (backends/sim/sim_fabric.h) offers ConnectX
 * (mlx5) instead: LOC_LEN_ERR and SQE for the UD send; for the RC case, up to
 * 32 bytes only the receive fails (LOC_LEN_ERR, scatter to CQE), larger ones
 * give LOC_LEN_ERR / REM_INV_REQ_ERR and ERROR; the UD receive fails with
 * LOC_LEN_ERR and the QP stays in RTS. See backends/sim/README.md, "Device
 * personalities" (tests: tests/device_personality_test.cc, both sides). */
/* Which real device the simulated HCAs behave like where devices differ. */
enum sfv_sim_personality {
  SFV_SIM_PERSONALITY_RXE = 0, /* Soft-RoCE (the default) */
  SFV_SIM_PERSONALITY_MLX5 = 1 /* ConnectX-4 and later (mlx5) */
};

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
  enum sfv_sim_personality personality; /* 0: rxe */
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
