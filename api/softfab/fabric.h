/* softfab messaging API: libfabric's fi_msg(3) and fi_tagged(3), renamed.
 *
 * Code written against libfabric ports by renaming fi_ -> sf_ and FI_ -> SF_:
 * objects carry a `struct sf_fid fid` first member, flags have libfabric's bit
 * values, and calls return 0 (or a count) on success and a negative SF_E*
 * error number on failure. What differs is how a fabric is opened: instead of
 * fi_getinfo, sf_fabric_open takes the backend (the deterministic simulator or
 * rdma-core verbs), and sf_domain_open names the node (simulator) or device
 * (verbs) to use.
 *
 * Progress is manual: reading a completion queue (sf_cq_read, sf_cq_sread,
 * sf_cq_readerr) drives the protocol of every endpoint bound to it, and
 * reading an event queue that of every endpoint and passive endpoint bound to
 * it. After -SF_EAGAIN from a post, read the CQs, then retry.
 *
 * Threading: objects of one fabric are not thread-safe; use one thread per
 * fabric (the simulator is single-threaded by design).
 *
 * Every call validates its arguments: a NULL or foreign object, a bad length,
 * flag, address or descriptor gives -SF_EINVAL (or the code listed) and
 * changes nothing. Descriptors are checked against the domain's live
 * registrations without being read; an object handle is recognised by its
 * fid header, so a pointer that is not a softfab object (or a closed one) is
 * as undefined as it would be in libfabric.
 */
#ifndef SOFTFAB_API_SOFTFAB_FABRIC_H_
#define SOFTFAB_API_SOFTFAB_FABRIC_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t sf_addr_t;
#define SF_ADDR_UNSPEC ((sf_addr_t)-1)
#define SF_ADDR_NOTAVAIL ((sf_addr_t)-1)

/* ---- Errors (positive values; calls return their negation) ---- */
#define SF_EPERM 1
#define SF_ENOENT 2
#define SF_EIO 5
#define SF_EAGAIN 11
#define SF_ENOMEM 12
#define SF_EBUSY 16
#define SF_ENODEV 19 /* verbs: no RDMA device (of that name) */
#define SF_EINVAL 22
#define SF_ENOSYS 38
#define SF_ENOMSG 42
#define SF_EADDRNOTAVAIL 99 /* an endpoint's name no longer fits its port */
#define SF_ECONNRESET 104
#define SF_ENETDOWN 100 /* verbs: the port is not active */
#define SF_ENOTCONN 107
#define SF_ETIMEDOUT 110
#define SF_ECONNREFUSED 111
#define SF_EHOSTUNREACH 113
#define SF_ECANCELED 125
#define SF_ETOOSMALL 257   /* a buffer is too small (size written back) */
#define SF_EOPBADSTATE 258 /* the object is not in a state for this call */
#define SF_EAVAIL 259      /* an error completion is next: sf_cq_readerr */
#define SF_ETRUNC 265      /* message truncated */
const char* sf_strerror(int errnum);
/* Why the last failing call on this thread failed, in words ("destination is
 * not in the address vector", ...); "" if none failed yet. */
const char* sf_last_error(void);

/* ---- Flags (libfabric 1.x bit values) ---- */
#define SF_MSG (1ULL << 1)
#define SF_TAGGED (1ULL << 3)
#define SF_MULTICAST (1ULL << 5)
#define SF_RECV (1ULL << 10)
#define SF_SEND (1ULL << 11)
#define SF_TRANSMIT SF_SEND
#define SF_MULTI_RECV (1ULL << 16)
#define SF_REMOTE_CQ_DATA (1ULL << 17)
#define SF_MORE (1ULL << 18)
#define SF_PEEK (1ULL << 19)
#define SF_FENCE (1ULL << 21)
#define SF_COMPLETION (1ULL << 24)
#define SF_INJECT (1ULL << 25)
#define SF_INJECT_COMPLETE (1ULL << 26)
#define SF_TRANSMIT_COMPLETE (1ULL << 27)
#define SF_DELIVERY_COMPLETE (1ULL << 28)
#define SF_MATCH_COMPLETE (1ULL << 31)
#define SF_VARIABLE_MSG (1ULL << 48)         /* capability */
#define SF_BUFFERED_RECV (1ULL << 51)        /* mode bit */
#define SF_DIRECTED_RECV (1ULL << 59)        /* capability */
#define SF_CLAIM (1ULL << 59)                /* receive flag */
#define SF_DISCARD (1ULL << 58)              /* receive flag */
#define SF_SELECTIVE_COMPLETION (1ULL << 59) /* sf_ep_bind flag */

/* ---- Objects ---- */
enum sf_fclass {
  SF_CLASS_FABRIC = 1,
  SF_CLASS_DOMAIN,
  SF_CLASS_AV,
  SF_CLASS_CQ,
  SF_CLASS_MR,
  SF_CLASS_EP,
  SF_CLASS_SRX_CTX, /* a shared receive context (an sf_ep) */
  SF_CLASS_EQ,
  SF_CLASS_PEP,
};

struct sf_fid {
  uint32_t fclass; /* enum sf_fclass */
  uint32_t magic;  /* set by softfab; checked by every call */
  void* context;   /* the user's, as given at open */
};

struct sf_fabric {
  struct sf_fid fid;
};
struct sf_domain {
  struct sf_fid fid;
};
struct sf_av {
  struct sf_fid fid;
};
struct sf_cq {
  struct sf_fid fid;
};
struct sf_mr {
  struct sf_fid fid;
};
struct sf_ep {
  struct sf_fid fid;
};
struct sf_eq {
  struct sf_fid fid;
};
struct sf_pep {
  struct sf_fid fid;
};
/* A connection request (fi_info's handle), from an SF_CONNREQ event. Pass it
 * in sf_ep_attr.info to create the endpoint that accepts it, or to
 * sf_reject; release it with sf_freeinfo. */
struct sf_info;

/* Closes any object. -SF_EBUSY while other objects use it (an endpoint bound
 * to a CQ, a domain with endpoints, ...). */
int sf_close(struct sf_fid* fid);

/* ---- Fabric and domain ---- */
enum sf_backend {
  SF_BACKEND_SIM = 1, /* deterministic simulated fabric, in process */
  SF_BACKEND_VERBS =
      2, /* rdma-core verbs: rxe, siw, ConnectX, any RoCE/IB HCA */
};

/* sf_fabric_attr.verbs_flags */
#define SF_VERBS_GID_INDEX                          \
  (1u << 0) /* use verbs_gid_index, not the default \
             */
/* The registrations softfab makes of user buffers (rendezvous sends and the
 * buffers they land in) are kept for reuse, up to 256 regions or 1 GiB idle
 * per domain, wherever softfab can watch the buffer's memory for munmap,
 * madvise(DONTNEED) and mremap (Linux userfaultfd): a watched buffer that is
 * unmapped is registered afresh the next time. This is the default. Where
 * userfaultfd is unavailable (a seccomp filter, or a kernel before 5.11 for
 * an unprivileged process) nothing is kept, unless SF_VERBS_MR_CACHE says
 * the application promises not to unmap and remap buffers while softfab may
 * hold them (sf_mr_reg and closing an sf_mr drop what overlaps their range).
 * SF_VERBS_NO_MR_CACHE: keep nothing. Environment: SOFTFAB_MR_CACHE=1 is
 * SF_VERBS_MR_CACHE, SOFTFAB_MR_CACHE=0 is SF_VERBS_NO_MR_CACHE. */
#define SF_VERBS_MR_CACHE (1u << 1)
#define SF_VERBS_NO_MR_CACHE (1u << 2)

/* Which real device the simulated HCA behaves like where devices differ
 * (backends/sim/README.md, "Device personalities"). */
enum sf_sim_personality {
  SF_SIM_PERSONALITY_RXE = 0, /* Soft-RoCE (the default) */
  SF_SIM_PERSONALITY_MLX5 = 1 /* ConnectX-4 and later (mlx5) */
};

struct sf_fabric_attr {
  enum sf_backend backend;
  /* Simulator: nodes, master seed and the link between every pair. */
  int sim_nodes;
  uint64_t sim_seed;
  uint64_t sim_latency_ns;
  uint64_t sim_bandwidth_bps; /* 0: unlimited */
  /* A fault plan on every packet (probabilities in [0, 1]; 0: none): lost,
   * delivered twice (700 ns apart), held back 5 us (reordered). */
  double sim_drop;
  double sim_duplicate;
  double sim_reorder;
  /* Verbs: the device by name (NULL: $SOFTFAB_VERBS_DEVICE, else the first
   * device with an active port), its physical port (0: the first active one)
   * and, with SF_VERBS_GID_INDEX in verbs_flags, the GID table index (else the
   * first RoCEv2 GID, IPv4-mapped preferred; GID 0 on InfiniBand). Every
   * domain opened on the fabric opens its own context on that device, so two
   * domains of one process talk to each other as two nodes would. */
  const char* verbs_device;
  int verbs_port;
  int verbs_gid_index;
  uint32_t verbs_flags;
  /* Simulator: the device personality (0: rxe). */
  enum sf_sim_personality sim_personality;
  /* The class of service of every path the fabric's endpoints make (both
   * backends): traffic_class is the GRH's traffic class, on RoCEv2 the IP
   * header's TOS byte (DSCP << 2 | ECN: 104 is DSCP 26, a common lossless
   * class under PFC); service_level the IB SL in [0, 15] (RoCE devices map it
   * to the Ethernet priority); pkey_index the port's P_Key table index (below
   * the port's table length; the simulator's table has one entry). A field
   * left 0 takes $SOFTFAB_TRAFFIC_CLASS, $SOFTFAB_SERVICE_LEVEL or
   * $SOFTFAB_PKEY_INDEX (decimal or 0x hex) when set, else 0. Out-of-range
   * values, here or in the environment: -SF_EINVAL, nothing opened. */
  uint8_t traffic_class;
  uint8_t service_level;
  uint16_t pkey_index;
};

int sf_fabric_open(const struct sf_fabric_attr* attr, struct sf_fabric** fabric,
                   void* context);
/* A domain is one node's HCA: `node` in [0, sim_nodes) on the simulator; on
 * verbs any number in [0, 64), each domain a context of its own on the
 * fabric's device (the number only labels it). */
int sf_domain_open(struct sf_fabric* fabric, int node,
                   struct sf_domain** domain, void* context);

/* Simulator only: the 64-bit digest of every event so far (same seed, same
 * calls -> same digest), and the virtual time in nanoseconds. */
int sf_sim_digest(struct sf_fabric* fabric, uint64_t* digest);
int sf_sim_now(struct sf_fabric* fabric, uint64_t* now_ns);

/* ---- Memory registration ---- */
#define SF_READ (1ULL << 8)
#define SF_WRITE (1ULL << 9)
#define SF_REMOTE_READ (1ULL << 12)
#define SF_REMOTE_WRITE (1ULL << 13)
int sf_mr_reg(struct sf_domain* domain, const void* buf, size_t len,
              uint64_t access, uint64_t offset, uint64_t requested_key,
              uint64_t flags, struct sf_mr** mr, void* context);
void* sf_mr_desc(struct sf_mr* mr);

/* The registration cache of a domain (SF_VERBS_MR_CACHE): whether it keeps
 * registrations, whether it watches unmaps, and its counters so far. */
struct sf_mr_cache_stats {
  int enabled;             /* registrations are kept for reuse */
  int watching;            /* ...and unmaps of their memory are watched */
  uint64_t hits;           /* transfers served by a kept registration */
  uint64_t misses;         /* registrations made */
  uint64_t evictions;      /* idle ones given back for room */
  uint64_t invalidations;  /* forgotten: sf_mr_reg, sf_close, unmaps */
  uint64_t unmapped;       /* of those, seen unmapped, released or moved */
  uint64_t unwatched;      /* made for one use: the range can't be watched */
  uint64_t enomem_retries; /* ENOMEM, idle ones given back, tried again */
  uint64_t entries;        /* kept now */
  uint64_t bytes;          /* bytes kept now */
};
int sf_mr_cache_query(struct sf_domain* domain,
                      struct sf_mr_cache_stats* stats);

/* ---- Address vector (FI_AV_TABLE) ---- */
struct sf_av_attr {
  size_t count; /* most addresses it holds; 0: 1024 */
  uint64_t flags;
};
int sf_av_open(struct sf_domain* domain, const struct sf_av_attr* attr,
               struct sf_av** av, void* context);
/* Inserts `count` names (each SF_NAME_BYTES, back to back); returns how many
 * were inserted, filling fi_addr[i] (SF_ADDR_NOTAVAIL for a refused one: a
 * name no endpoint can have, or one that no longer fits the vector). */
int sf_av_insert(struct sf_av* av, const void* addr, size_t count,
                 sf_addr_t* fi_addr, uint64_t flags, void* context);
int sf_av_remove(struct sf_av* av, sf_addr_t* fi_addr, size_t count,
                 uint64_t flags);
/* The name at fi_addr; -SF_EINVAL for an address never inserted, removed or
 * out of range, -SF_ETOOSMALL (size written back) for a short buffer. */
int sf_av_lookup(struct sf_av* av, sf_addr_t fi_addr, void* addr,
                 size_t* addrlen);

/* ---- Completion queue ---- */
enum sf_cq_format {
  SF_CQ_FORMAT_CONTEXT = 1,
  SF_CQ_FORMAT_MSG,
  SF_CQ_FORMAT_DATA,
  SF_CQ_FORMAT_TAGGED,
};
/* Wait objects (libfabric's values). */
enum sf_wait_obj {
  SF_WAIT_NONE = 0,
  SF_WAIT_UNSPEC = 1, /* same as SF_WAIT_FD here */
  SF_WAIT_SET = 2,    /* not supported */
  SF_WAIT_FD = 3,
};
struct sf_cq_attr {
  size_t size; /* entries; 0: 1024 */
  uint64_t flags;
  enum sf_cq_format format;
  enum sf_wait_obj wait_obj; /* SF_WAIT_FD: a file descriptor to poll */
};
struct sf_cq_entry {
  void* op_context;
};
struct sf_cq_msg_entry {
  void* op_context;
  uint64_t flags;
  size_t len;
};
struct sf_cq_data_entry {
  void* op_context;
  uint64_t flags;
  size_t len;
  void* buf;
  uint64_t data;
};
struct sf_cq_tagged_entry {
  void* op_context;
  uint64_t flags;
  size_t len;
  void* buf;
  uint64_t data;
  uint64_t tag;
};
struct sf_cq_err_entry {
  void* op_context;
  uint64_t flags;
  size_t len;
  void* buf;
  uint64_t data;
  uint64_t tag;
  size_t olen;
  int err;
  int prov_errno;
  void* err_data;
  size_t err_data_size;
};
int sf_cq_open(struct sf_domain* domain, const struct sf_cq_attr* attr,
               struct sf_cq** cq, void* context);
/* Returns entries read (>0), -SF_EAGAIN (none), or -SF_EAVAIL (an error entry
 * is next: read it with sf_cq_readerr). count 0 (buf may be NULL) only drives
 * progress and returns 0. */
ssize_t sf_cq_read(struct sf_cq* cq, void* buf, size_t count);
ssize_t sf_cq_readfrom(struct sf_cq* cq, void* buf, size_t count,
                       sf_addr_t* src_addr);
ssize_t sf_cq_readerr(struct sf_cq* cq, struct sf_cq_err_entry* buf,
                      uint64_t flags);

/* sf_cq_err_entry.prov_errno: why the operation failed, beyond `err` (which
 * says what failed: SF_EIO, SF_ETRUNC, SF_ECANCELED, ...). Two ranges that
 * never overlap:
 *  - 1 to SF_PROV_WC_LAST: the status of the work completion that failed it,
 *    numbered as ibv_wc_status (enum sfv_wc_status in softfab/verbs.h), on
 *    both backends: 12 transport retries exceeded (the peer or its link is
 *    gone), 13 receiver not ready retries exceeded, 10 remote access error,
 *    ... An operation the device flushed (5) carries 5, as ibv_wc_status
 *    and libfabric's verbs provider do: the first error completion of that
 *    connection names why it failed. Operations softfab had queued and
 *    never posted carry the connection's first cause. Where the device's
 *    asynchronous events name the cause (SF_PROV_QP_FATAL,
 *    SF_PROV_PORT_DOWN, ... below), every error completion of that
 *    connection carries it, flushed ones included, since no work
 *    completion names it.
 *  - SF_PROV_OWN_BASE + n: causes softfab's protocol finds itself, below.
 * 0: no cause beyond `err`. */
#define SF_PROV_WC_LAST 21
#define SF_PROV_OWN_BASE 0x1000
/* The receive buffer was smaller than the message (err SF_ETRUNC; olen). */
#define SF_PROV_TRUNCATED (SF_PROV_OWN_BASE + 1)
/* sf_cancel took the operation (err SF_ECANCELED). */
#define SF_PROV_CANCELED (SF_PROV_OWN_BASE + 2)
/* An SF_PEEK found no matching message (err SF_ENOMSG). */
#define SF_PROV_NO_MESSAGE (SF_PROV_OWN_BASE + 3)
/* The peer never answered the connection setup within the retries (err
 * SF_EHOSTUNREACH on RDM, SF_ETIMEDOUT on MSG). */
#define SF_PROV_PEER_UNREACHABLE (SF_PROV_OWN_BASE + 4)
/* The peer shut the connection down (SF_EP_MSG; err SF_ECONNRESET). */
#define SF_PROV_PEER_SHUTDOWN (SF_PROV_OWN_BASE + 5)
/* This side shut the connection down (sf_shutdown; err SF_ECONNRESET). */
#define SF_PROV_LOCAL_SHUTDOWN (SF_PROV_OWN_BASE + 6)
/* The peer rejected the connection (sf_reject; err SF_ECONNREFUSED). */
#define SF_PROV_REJECTED (SF_PROV_OWN_BASE + 7)
/* The local device refused to bring the connection's queue pair up. */
#define SF_PROV_CONNECT_FAILED (SF_PROV_OWN_BASE + 8)
/* No memory (or device resources) for the connection's buffers. */
#define SF_PROV_NO_MEMORY (SF_PROV_OWN_BASE + 9)
/* The endpoint a claimed message arrived at was closed before its data was
 * fetched. */
#define SF_PROV_ENDPOINT_CLOSED (SF_PROV_OWN_BASE + 10)
/* The device refused the RDMA READ that fetches a large message. */
#define SF_PROV_POST_REFUSED (SF_PROV_OWN_BASE + 11)
/* The peer speaks another version of softfab's connection protocol (it runs
 * another softfab release) and refused the connection (err
 * SF_ECONNREFUSED). */
#define SF_PROV_CM_VERSION (SF_PROV_OWN_BASE + 12)
/* Causes named by the device's asynchronous events. softfab reads them for
 * every endpoint while the program drives progress (reads a CQ or EQ, or
 * waits in sf_cq_sread / sf_eq_sread): on the simulator at the first
 * progress after the event, on a device at least once per millisecond of
 * progress (sf_cq_sread wakes every 10 ms to run it), so each is reported
 * well within one second or the RC retry time, whichever is longer.
 * Endpoint-wide ones and port events are also error events (sf_eq_readerr)
 * on the event queue bound to the endpoint, of any type (sf_ep_bind(ep,
 * &eq->fid, 0)), with the endpoint's fid. */
/* The device put the connection's queue pair in error (QP fatal, request or
 * access error, path migration failure): the connection's operations fail
 * (err SF_EIO), and sends to that peer are refused (-SF_EHOSTUNREACH). On a
 * connection manager's queue pair the whole endpoint is unusable: an error
 * event, every connection failed, every later post -SF_EIO. */
#define SF_PROV_QP_FATAL (SF_PROV_OWN_BASE + 13)
/* The local port went down (link lost). An error event with err
 * SF_ENETDOWN; nothing is refused, and a link back within the RC retry
 * budget loses nothing. A connection that fails for want of answers while
 * the port is down, or within an RC retry time of its return, names this
 * instead of its retries (12) or SF_PROV_PEER_UNREACHABLE. The port coming
 * back up is not an event. */
#define SF_PROV_PORT_DOWN (SF_PROV_OWN_BASE + 14)
/* One of the endpoint's completion queues in the device failed (overrun):
 * the endpoint is unusable (an error event with err SF_EIO, every
 * connection failed, every later post -SF_EIO); close it. */
#define SF_PROV_CQ_ERROR (SF_PROV_OWN_BASE + 15)
/* The endpoint's shared receive queue in the device failed: as
 * SF_PROV_CQ_ERROR. */
#define SF_PROV_SRQ_ERROR (SF_PROV_OWN_BASE + 16)
/* The device failed as a whole: every endpoint on it is unusable, as
 * SF_PROV_CQ_ERROR; close the domain. */
#define SF_PROV_DEVICE_FATAL (SF_PROV_OWN_BASE + 17)
/* The port's LID, or the GID in the endpoint's name, changed: an error event
 * with err SF_EADDRNOTAVAIL. Connections made go on; peers that insert the
 * old name (sf_getname before the change) reach nothing: open a new
 * endpoint and exchange names again. Other port events (P_Key table, subnet
 * manager) change nothing and are not reported. */
#define SF_PROV_ADDRESS_CHANGED (SF_PROV_OWN_BASE + 18)
/* An SF_EP_RDM peer whose side of a connection failed connected again while
 * ours still looked up: operations of the old connection fail with
 * SF_ECONNRESET; later sends go on the new connection. */
#define SF_PROV_PEER_RECONNECTED (SF_PROV_OWN_BASE + 19)
/* A receive took a large (rendezvous) message kept as unexpected whose
 * connection failed, and was made anew, before the receive came: its data
 * was the sender's, whose send failed with that connection, and cannot be
 * fetched. The receive fails with SF_EIO; an eager message kept so is
 * delivered (its data is here). */
#define SF_PROV_CONNECTION_RESET (SF_PROV_OWN_BASE + 20)
#define SF_PROV_OWN_LAST SF_PROV_CONNECTION_RESET

/* fi_cq_strerror(3): a sentence for an error entry's prov_errno that names
 * the cause and what to check (for 13: the receiver had no receive posted
 * ...; post receives or raise rnr_retry). Returns `buf`, holding the sentence
 * cut to `len` - 1 bytes and NUL-terminated, when `buf` is not NULL and `len`
 * > 0; else a constant string that lives as long as the program. err_data is
 * not read (softfab's error entries carry none). Never returns NULL: a `cq`
 * that is not a completion queue, a prov_errno of neither range or 0 each get
 * a sentence saying so. Thread-safe; it neither drives progress nor changes
 * the queue. */
const char* sf_cq_strerror(struct sf_cq* cq, int prov_errno,
                           const void* err_data, char* buf, size_t len);
/* Blocking read: drives progress until an entry arrives or `timeout_ms`
 * passes (-SF_ETIMEDOUT; 0 looks once). On verbs the timeout is real time,
 * slept on the domains' completion channels. On the simulator it is virtual
 * time: the wait runs the fabric's events up to the deadline and no further,
 * so with nothing arriving by then it returns -SF_ETIMEDOUT with the virtual
 * clock at exactly its start + timeout_ms (also on an idle fabric). -1 waits
 * while anything is pending in the fabric: on an idle one it returns
 * -SF_ETIMEDOUT at once, the clock unmoved (nothing can arrive). */
ssize_t sf_cq_sread(struct sf_cq* cq, void* buf, size_t count, const void* cond,
                    int timeout_ms);

/* Wait fd (SF_WAIT_FD): sf_control(&cq->fid, SF_GETWAIT, &fd) gives a file
 * descriptor for poll/epoll/libuv. The descriptor is never read or closed by
 * the application. sf_trywait returns 0 when it is safe to block on the
 * descriptors of the given CQs and -SF_EAGAIN when the caller should read
 * them first (fi_trywait(3)); call it before every sleep.
 * - Simulator: the descriptor of the CQ's own, readable while sf_cq_read has
 *   something to do (entries are waiting, or the fabric has events pending
 *   that progress would run).
 * - Verbs: the completion channel of the CQ's domain, shared by that domain's
 *   CQs. sf_trywait arms it (for the domains of the CQs given, and no
 *   others); it then becomes readable when one of their endpoints gets a
 *   completion. The protocol's own timers (connection-request retries) do not
 *   wake it: a loop that sleeps only on the descriptor should also wake every
 *   few milliseconds while connections are being made (sf_cq_sread does). */
#define SF_GETWAIT 5
int sf_control(struct sf_fid* fid, int command, void* arg);
int sf_trywait(struct sf_fabric* fabric, struct sf_fid** fids, int count);

/* ---- Endpoint ---- */
enum sf_ep_type {
  SF_EP_MSG = 1,
  SF_EP_DGRAM = 2,
  SF_EP_RDM = 3,
};
struct sf_ep_attr {
  enum sf_ep_type type;
  /* SF_MSG | SF_TAGGED | SF_DIRECTED_RECV ...; sf_ep_query reports the
   * primary ones asked for (SF_MSG and SF_TAGGED when neither was). */
  uint64_t caps;
  uint64_t op_flags;      /* default completion level (0: transmit-complete) */
  size_t tx_size;         /* 0: 256 */
  size_t rx_size;         /* 0: 256 */
  size_t max_msg_size;    /* query only */
  size_t inject_size;     /* query only */
  size_t msg_prefix_size; /* query only: 40 on DGRAM (the GRH) */
  /* SF_BUFFERED_RECV: messages land in softfab's buffers and are reported
   * without a posted receive (fi_msg(3) "Buffered Receives"); SF_VARIABLE_MSG
   * in caps implies it and lifts max_msg_size to 2^32 - 1 bytes. */
  uint64_t mode;
  /* SF_EP_MSG: the SF_CONNREQ's request this endpoint will sf_accept (copied;
   * the caller still frees it). NULL for a connecting endpoint. */
  struct sf_info* info;
  /* SF_BUFFERED_RECV: the handle an untagged message's sf_recv_context.ep
   * holds. NULL: this sf_ep. For a face over sf_* that hands out handles of
   * its own (softfab's libfabric provider puts the application's fid_ep). */
  void* recv_context_ep;
};
/* An endpoint's name, for peers' AVs (an RDM endpoint may also insert its
 * own and send to itself). */
#define SF_NAME_BYTES 28
int sf_endpoint(struct sf_domain* domain, const struct sf_ep_attr* attr,
                struct sf_ep** ep, void* context);
/* flags: SF_TRANSMIT and/or SF_RECV (with SF_SELECTIVE_COMPLETION) for a CQ;
 * 0 for an AV or an EQ. An EQ takes an SF_EP_MSG endpoint's connection
 * events, and the asynchronous errors of an endpoint of any type
 * (SF_PROV_PORT_DOWN and the other causes the device's events name). */
int sf_ep_bind(struct sf_ep* ep, struct sf_fid* bfid, uint64_t flags);

/* A shared receive context (fi_srx_context): receives posted to it (sf_recv*,
 * sf_trecv* on the returned sf_ep) are matched by messages arriving at any
 * endpoint bound to it with sf_ep_bind(ep, &srx->fid, 0), in any order
 * (rpma_srq_recv semantics). Its completions go to the receive CQ, which every
 * endpoint sharing it must bind; receives can be posted once one of them is
 * enabled (before: -SF_EOPBADSTATE). Not for DGRAM endpoints. */
struct sf_rx_attr {
  uint64_t caps;     /* SF_DIRECTED_RECV */
  uint64_t mode;     /* SF_BUFFERED_RECV */
  uint64_t op_flags; /* 0 */
  size_t size;       /* receives posted at once; 0: 256 */
};
int sf_srx_context(struct sf_domain* domain, const struct sf_rx_attr* attr,
                   struct sf_ep** rx_ep, void* context);
int sf_enable(struct sf_ep* ep);
int sf_ep_query(struct sf_ep* ep, struct sf_ep_attr* attr);
int sf_getname(struct sf_fid* fid, void* addr, size_t* addrlen);
ssize_t sf_cancel(struct sf_fid* fid, void* context);

/* Option names and values are libfabric's (fi_endpoint(3)). */
#define SF_OPT_ENDPOINT 0
#define SF_OPT_MIN_MULTI_RECV 0 /* size_t */
/* Private data a connection carries (56): getopt only, on an endpoint or a
 * passive endpoint (whose only option it is). */
#define SF_OPT_CM_DATA_SIZE 1 /* size_t */
/* A buffered receive's SF_MORE entry shows at least this many leading bytes
 * (<= the eager size, 8192): each endpoint announces its value to its peers,
 * and rendezvous requests carry the larger of both sides' values. */
#define SF_OPT_BUFFERED_MIN 2 /* size_t, before sf_enable */
/* Largest message reported whole by a buffered receive (<= 8192). */
#define SF_OPT_BUFFERED_LIMIT 3 /* size_t, before sf_enable */
int sf_setopt(struct sf_fid* fid, int level, int optname, const void* optval,
              size_t optlen);
int sf_getopt(struct sf_fid* fid, int level, int optname, void* optval,
              size_t* optlen);

/* ---- Connections (fi_cm(3)) and event queues (fi_eq(3)), SF_EP_MSG ---- */
/* Event numbers and entry layouts are libfabric's. */
enum {
  SF_NOTIFY = 0,
  SF_CONNREQ = 1,   /* to a passive endpoint: sf_eq_cm_entry with info */
  SF_CONNECTED = 2, /* sf_eq_cm_entry, data: the peer's private data */
  SF_SHUTDOWN = 3,  /* the peer shut down or the connection failed */
};
struct sf_eq_attr {
  size_t size; /* events; 0: 64 */
  uint64_t flags;
};
struct sf_eq_cm_entry {
  struct sf_fid* fid;
  /* SF_CONNREQ: the request, for sf_endpoint (sf_ep_attr.info) or
   * sf_reject. A consuming read's is the caller's: free it with sf_freeinfo.
   * Reads with SF_PEEK all return another one, owned by the event queue
   * until it is closed (sf_freeinfo releases it sooner; not after the
   * close). */
  struct sf_info* info;
  uint8_t data[]; /* private data, as much as the buffer holds */
};
struct sf_eq_err_entry {
  struct sf_fid* fid;
  void* context;
  uint64_t data;
  int err;        /* SF_ECONNREFUSED (rejected), SF_ETIMEDOUT, SF_EHOSTUNREACH,
                   * and for asynchronous errors SF_ENETDOWN (port down), SF_EIO
                   * (the endpoint is unusable), SF_EADDRNOTAVAIL (name changed) */
  int prov_errno; /* its cause, numbered as sf_cq_err_entry's (SF_PROV_*):
                   * sf_cq_strerror gives the sentence */
  void* err_data; /* a rejection's private data; valid until the next read */
  size_t err_data_size;
};
int sf_eq_open(struct sf_fabric* fabric, const struct sf_eq_attr* attr,
               struct sf_eq** eq, void* context);
/* Returns the bytes written to buf (an sf_eq_cm_entry and its data), or
 * -SF_EAGAIN, or -SF_EAVAIL (an error event is next: sf_eq_readerr). flags:
 * 0 or SF_PEEK. Drives the progress of everything bound to the queue. */
ssize_t sf_eq_read(struct sf_eq* eq, uint32_t* event, void* buf, size_t len,
                   uint64_t flags);
ssize_t sf_eq_readerr(struct sf_eq* eq, struct sf_eq_err_entry* buf,
                      uint64_t flags);
/* Blocking read, timed as sf_cq_sread: real time on verbs; on the simulator
 * virtual time, ending at exactly start + timeout_ms when no event comes by
 * then, and -1 ending at once on an idle fabric. */
ssize_t sf_eq_sread(struct sf_eq* eq, uint32_t* event, void* buf, size_t len,
                    int timeout_ms, uint64_t flags);
/* A passive endpoint listens for connection requests (fi_passive_ep takes an
 * fi_info; here it takes the domain, i.e. the node, it listens on). */
int sf_passive_ep(struct sf_domain* domain, struct sf_pep** pep, void* context);
/* Binds an event queue (flags 0). */
int sf_pep_bind(struct sf_pep* pep, struct sf_fid* bfid, uint64_t flags);
int sf_listen(struct sf_pep* pep);
/* addr: a passive endpoint's name (sf_getname on it); param: up to
 * SF_OPT_CM_DATA_SIZE (56) bytes of private data. The endpoint must be
 * enabled with an event queue bound (sf_ep_bind(ep, &eq->fid, 0)). */
int sf_connect(struct sf_ep* ep, const void* addr, const void* param,
               size_t paramlen);
int sf_accept(struct sf_ep* ep, const void* param, size_t paramlen);
int sf_reject(struct sf_pep* pep, struct sf_info* info, const void* param,
              size_t paramlen);
int sf_shutdown(struct sf_ep* ep, uint64_t flags);
void sf_freeinfo(struct sf_info* info);

/* ---- fi_msg ---- */
/* Most iovecs one call takes (fi_tx_attr/fi_rx_attr iov_limit), on every
 * backend and endpoint type; more give -SF_EINVAL. A message above the eager
 * size is read into all of a receive's iovecs, in as many RDMA READs as the
 * device's max_sge requires. */
#define SF_IOV_LIMIT 4
struct sf_msg {
  const struct iovec* msg_iov;
  void** desc;
  size_t iov_count;
  sf_addr_t addr;
  void* context;
  uint64_t data;
};
struct sf_context {
  void* internal[4];
};
struct sf_recv_context {
  struct sf_ep* ep;
  void* context;
};

ssize_t sf_recv(struct sf_ep* ep, void* buf, size_t len, void* desc,
                sf_addr_t src_addr, void* context);
ssize_t sf_recvv(struct sf_ep* ep, const struct iovec* iov, void** desc,
                 size_t count, sf_addr_t src_addr, void* context);
ssize_t sf_recvmsg(struct sf_ep* ep, const struct sf_msg* msg, uint64_t flags);
ssize_t sf_send(struct sf_ep* ep, const void* buf, size_t len, void* desc,
                sf_addr_t dest_addr, void* context);
ssize_t sf_sendv(struct sf_ep* ep, const struct iovec* iov, void** desc,
                 size_t count, sf_addr_t dest_addr, void* context);
ssize_t sf_sendmsg(struct sf_ep* ep, const struct sf_msg* msg, uint64_t flags);
ssize_t sf_inject(struct sf_ep* ep, const void* buf, size_t len,
                  sf_addr_t dest_addr);
ssize_t sf_senddata(struct sf_ep* ep, const void* buf, size_t len, void* desc,
                    uint64_t data, sf_addr_t dest_addr, void* context);
ssize_t sf_injectdata(struct sf_ep* ep, const void* buf, size_t len,
                      uint64_t data, sf_addr_t dest_addr);

/* ---- fi_tagged ---- */
struct sf_msg_tagged {
  const struct iovec* msg_iov;
  void** desc;
  size_t iov_count;
  sf_addr_t addr;
  uint64_t tag;
  uint64_t ignore;
  void* context;
  uint64_t data;
};

ssize_t sf_trecv(struct sf_ep* ep, void* buf, size_t len, void* desc,
                 sf_addr_t src_addr, uint64_t tag, uint64_t ignore,
                 void* context);
ssize_t sf_trecvv(struct sf_ep* ep, const struct iovec* iov, void** desc,
                  size_t count, sf_addr_t src_addr, uint64_t tag,
                  uint64_t ignore, void* context);
ssize_t sf_trecvmsg(struct sf_ep* ep, const struct sf_msg_tagged* msg,
                    uint64_t flags);
ssize_t sf_tsend(struct sf_ep* ep, const void* buf, size_t len, void* desc,
                 sf_addr_t dest_addr, uint64_t tag, void* context);
ssize_t sf_tsendv(struct sf_ep* ep, const struct iovec* iov, void** desc,
                  size_t count, sf_addr_t dest_addr, uint64_t tag,
                  void* context);
ssize_t sf_tsendmsg(struct sf_ep* ep, const struct sf_msg_tagged* msg,
                    uint64_t flags);
ssize_t sf_tinject(struct sf_ep* ep, const void* buf, size_t len,
                   sf_addr_t dest_addr, uint64_t tag);
ssize_t sf_tsenddata(struct sf_ep* ep, const void* buf, size_t len, void* desc,
                     uint64_t data, sf_addr_t dest_addr, uint64_t tag,
                     void* context);
ssize_t sf_tinjectdata(struct sf_ep* ep, const void* buf, size_t len,
                       uint64_t data, sf_addr_t dest_addr, uint64_t tag);

#ifdef __cplusplus
}
#endif

#endif /* SOFTFAB_API_SOFTFAB_FABRIC_H_ */
