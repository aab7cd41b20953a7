// sf_cq_strerror (fi_cq_strerror(3)): the sentence for an error completion's
// prov_errno, naming the cause and what to check. The numbers are the
// transport's work-completion statuses and softfab's own causes
// (core/prov_errno.h, SF_PROV_* in softfab/fabric.h).
#include <cstdio>
#include <cstring>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"
#include "core/prov_errno.h"
#include "transport/transport.h"

namespace softfab::fabric_internal {
namespace {

namespace tp = ::softfab::transport;

static_assert(SF_PROV_WC_LAST == core::kProvWcLast);
static_assert(SF_PROV_WC_LAST == static_cast<int>(tp::WcStatus::kGeneralErr));
static_assert(SF_PROV_OWN_BASE == core::kProvOwnBase);
static_assert(SF_PROV_TRUNCATED == core::kProvTruncated);
static_assert(SF_PROV_CANCELED == core::kProvCanceled);
static_assert(SF_PROV_NO_MESSAGE == core::kProvNoMessage);
static_assert(SF_PROV_PEER_UNREACHABLE == core::kProvPeerUnreachable);
static_assert(SF_PROV_PEER_SHUTDOWN == core::kProvPeerShutdown);
static_assert(SF_PROV_LOCAL_SHUTDOWN == core::kProvLocalShutdown);
static_assert(SF_PROV_REJECTED == core::kProvRejected);
static_assert(SF_PROV_CONNECT_FAILED == core::kProvConnectFailed);
static_assert(SF_PROV_NO_MEMORY == core::kProvNoMemory);
static_assert(SF_PROV_ENDPOINT_CLOSED == core::kProvEndpointClosed);
static_assert(SF_PROV_POST_REFUSED == core::kProvPostRefused);
static_assert(SF_PROV_CM_VERSION == core::kProvCmVersion);
static_assert(SF_PROV_QP_FATAL == core::kProvQpFatal);
static_assert(SF_PROV_PORT_DOWN == core::kProvPortDown);
static_assert(SF_PROV_CQ_ERROR == core::kProvCqError);
static_assert(SF_PROV_SRQ_ERROR == core::kProvSrqError);
static_assert(SF_PROV_DEVICE_FATAL == core::kProvDeviceFatal);
static_assert(SF_PROV_ADDRESS_CHANGED == core::kProvAddressChanged);
static_assert(SF_PROV_PEER_RECONNECTED == core::kProvPeerReconnected);
static_assert(SF_PROV_CONNECTION_RESET == core::kProvConnectionReset);
static_assert(SF_PROV_OWN_LAST == core::kProvOwnLast);

// Indexed by work-completion status (ibv_wc_status numbering); [0] unused.
constexpr const char* kWcSentences[SF_PROV_WC_LAST + 1] = {
    nullptr,
    // 1 LOC_LEN_ERR
    "local length error: a message did not fit the buffer it was received "
    "into, or a send was longer than the device or the path MTU allows; "
    "check the receive buffer sizes and, for datagrams, the MTU",
    // 2 LOC_QP_OP_ERR
    "local queue pair operation error: the device could not carry out the "
    "work request on this queue pair (more scatter/gather entries or inline "
    "bytes than it was created with, or a buffer the device could not use); "
    "check the queue pair's capabilities and the buffers' registrations",
    // 3 LOC_EEC_OP_ERR
    "local EE context operation error (reliable datagram only, which softfab "
    "does not use); report it with the device's name",
    // 4 LOC_PROT_ERR
    "local protection error: a buffer is not covered by the memory "
    "registration it was given with (a wrong descriptor, a range outside the "
    "region, or a region already closed); check the desc passed with each "
    "buffer",
    // 5 WR_FLUSH_ERR
    "work request flushed: the connection had already failed when the device "
    "reached this operation; the first error completion on that connection "
    "names the cause",
    // 6 MW_BIND_ERR
    "memory window bind error: the device refused a memory window bind "
    "(softfab binds none); report it with the device's name",
    // 7 BAD_RESP_ERR
    "bad response: the peer answered with an unexpected transport packet; "
    "check that both sides run compatible devices and drivers",
    // 8 LOC_ACCESS_ERR
    "local access error: data arriving here hit a region registered without "
    "local write access; check the access flags of the receive buffers' "
    "registrations",
    // 9 REM_INV_REQ_ERR
    "remote invalid request: the peer refused the request (a message longer "
    "than its receive buffer, or an operation its queue pair does not "
    "allow); check the receive sizes and the peer's access flags",
    // 10 REM_ACCESS_ERR
    "remote access error: the peer's memory refused the RDMA access (a wrong "
    "key, a range outside its region, missing remote access flags, or a "
    "region already closed); check the address and key the peer advertised",
    // 11 REM_OP_ERR
    "remote operation error: the peer could not complete the request (its "
    "receive side failed); look at the peer's own errors",
    // 12 RETRY_EXC_ERR
    "transport retry counter exceeded: the peer acknowledged nothing within "
    "the reliable connection's retries (its process or endpoint is gone, "
    "its link is down, or the path between you is broken); check that the "
    "peer is alive and the link up, or raise retry_cnt and timeout",
    // 13 RNR_RETRY_EXC_ERR
    "receiver not ready retries exceeded: the receiver had no receive posted "
    "when the message arrived, and still none after every retry; post "
    "receives before the sender sends, or raise rnr_retry (7: retry for "
    "ever) or min_rnr_timer",
    // 14 LOC_RDD_VIOL_ERR
    "local RDD violation (reliable datagram only, which softfab does not "
    "use); report it with the device's name",
    // 15 REM_INV_RD_REQ_ERR
    "remote invalid RD request (reliable datagram only, which softfab does "
    "not use); report it with the device's name",
    // 16 REM_ABORT_ERR
    "remote abort: the peer aborted the operation; look at the peer's own "
    "errors",
    // 17 INV_EECN_ERR
    "invalid EE context number (reliable datagram only, which softfab does "
    "not use); report it with the device's name",
    // 18 INV_EEC_STATE_ERR
    "invalid EE context state (reliable datagram only, which softfab does "
    "not use); report it with the device's name",
    // 19 FATAL_ERR
    "fatal device error: the device hit an error it cannot recover from; "
    "check the kernel log and reset the device",
    // 20 RESP_TIMEOUT_ERR
    "response timeout: the peer's response did not come in time; check that "
    "the peer is alive and the link up",
    // 21 GENERAL_ERR
    "general error: the device failed the operation without a specific "
    "status (or with one softfab does not know); check the kernel log",
};

// Indexed by prov_errno - SF_PROV_OWN_BASE; [0] unused.
constexpr const char* kOwnSentences[SF_PROV_OWN_LAST - SF_PROV_OWN_BASE + 1] = {
    nullptr,
    // SF_PROV_TRUNCATED
    "message truncated: the receive buffer was smaller than the message; "
    "what fit was received and the rest (olen bytes) dropped; post "
    "larger receives or agree on a largest message",
    // SF_PROV_CANCELED
    "canceled: sf_cancel took the operation before a message completed "
    "it; nothing more will arrive in its buffer",
    // SF_PROV_NO_MESSAGE
    "no message: an SF_PEEK found no message matching the tag; peek "
    "again after driving progress",
    // SF_PROV_PEER_UNREACHABLE
    "peer unreachable: the peer never answered the connection setup "
    "within the retries (it is not running, its address is stale, or "
    "the path is down); check the address and that the peer's endpoint "
    "is enabled",
    // SF_PROV_PEER_SHUTDOWN
    "the peer shut the connection down (sf_shutdown or close) before the "
    "operation completed; reconnect to go on",
    // SF_PROV_LOCAL_SHUTDOWN
    "this endpoint shut the connection down (sf_shutdown) before the "
    "operation completed",
    // SF_PROV_REJECTED
    "connection rejected: the peer's listener refused the request "
    "(sf_reject); its private data, if any, says why",
    // SF_PROV_CONNECT_FAILED
    "connect failed: the local device refused to bring the connection's "
    "queue pair up; check the port's state and the GID in use",
    // SF_PROV_NO_MEMORY
    "out of memory: no memory or device resources for the connection's "
    "receive buffers; close idle connections or raise the device limits",
    // SF_PROV_ENDPOINT_CLOSED
    "endpoint closed: the endpoint the message arrived at was closed "
    "before its data could be fetched; keep endpoints open while their "
    "messages are claimed",
    // SF_PROV_POST_REFUSED
    "post refused: the device refused the RDMA READ that fetches a large "
    "message (a limit of the queue pair); check the device's "
    "scatter/gather and read limits",
    // SF_PROV_CM_VERSION
    "connection protocol version: the peer runs a softfab release that "
    "speaks another version of the connection protocol and refused the "
    "connection; run the same release on both ends",
    // SF_PROV_QP_FATAL
    "queue pair fatal: the device put the connection's queue pair in the "
    "error state on its own (an asynchronous QP fatal, request or access "
    "error); the connection is gone; check the kernel log and the peer's "
    "errors, then send again on a new endpoint",
    // SF_PROV_PORT_DOWN
    "port down: the local port lost its link while the connection waited "
    "for answers; check the cable, the switch port and the network "
    "interface (ip link), then send again once the port is active",
    // SF_PROV_CQ_ERROR
    "completion queue error: a completion queue of the endpoint in the "
    "device failed (overrun); the endpoint is unusable: close it and open "
    "another",
    // SF_PROV_SRQ_ERROR
    "shared receive queue error: the endpoint's receive queue in the device "
    "failed; the endpoint is unusable: close it and open another",
    // SF_PROV_DEVICE_FATAL
    "device fatal: the RDMA device failed as a whole (a firmware or driver "
    "reset); every endpoint on it is unusable: check the kernel log, close "
    "the domain and open it again",
    // SF_PROV_ADDRESS_CHANGED
    "address changed: the port's LID or the GID in the endpoint's name "
    "changed, so peers holding the old name cannot reach it; open a new "
    "endpoint and exchange names again",
    // SF_PROV_PEER_RECONNECTED
    "peer reconnected: the peer's side of the connection failed (lost "
    "packets past the RC retry time, a link or port down) and it connected "
    "again; operations of the old connection are lost, later sends use "
    "the new one",
    // SF_PROV_CONNECTION_RESET
    "connection reset: the large message this receive took arrived on a "
    "connection that failed and was made anew before the receive was "
    "posted; its sender's send failed with that connection, so the data "
    "cannot be fetched; the sender may send it again",
};

constexpr const char kNotCq[] =
    "invalid argument: sf_cq_strerror's cq is not an open completion queue";
constexpr const char kNoCause[] =
    "no provider error: the entry's err alone says what failed "
    "(sf_strerror(err))";
constexpr const char kUnknown[] =
    "unknown provider error: neither a work-completion status (1 to "
    "SF_PROV_WC_LAST) nor one of softfab's SF_PROV_* causes";

const char* Sentence(int prov_errno) {
  if (prov_errno == 0) return kNoCause;
  if (prov_errno > 0 && prov_errno <= SF_PROV_WC_LAST) {
    return kWcSentences[prov_errno];
  }
  if (prov_errno > SF_PROV_OWN_BASE && prov_errno <= SF_PROV_OWN_LAST) {
    return kOwnSentences[prov_errno - SF_PROV_OWN_BASE];
  }
  return nullptr;
}

}  // namespace

extern "C" const char* sf_cq_strerror(sf_cq* cq, int prov_errno,
                                      const void* /*err_data*/, char* buf,
                                      size_t len) {
  const char* s = AsCq(cq) == nullptr ? kNotCq : Sentence(prov_errno);
  const bool to_buf = buf != nullptr && len > 0;
  if (s == nullptr) {
    if (!to_buf) return kUnknown;
    std::snprintf(buf, len, "%s (%d)", kUnknown, prov_errno);
    return buf;
  }
  if (!to_buf) return s;
  std::snprintf(buf, len, "%s", s);
  return buf;
}

}  // namespace softfab::fabric_internal
