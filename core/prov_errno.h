// prov_errno values of error completions (fi_cq_err_entry.prov_errno): why an
// operation failed, in more detail than its FI_E* error number.
//
// Two ranges that never overlap. 1 to kProvWcLast: the transport's
// work-completion status that failed the operation (transport::WcStatus,
// numbered as ibv_wc_status on both backends). From kProvOwnBase up: causes
// softfab's protocol finds itself (truncation, cancel, a peer gone, ...). The
// public names and their meanings are in api/softfab/fabric.h (SF_PROV_*),
// which checks that the numbers agree.
#ifndef SOFTFAB_CORE_PROV_ERRNO_H_
#define SOFTFAB_CORE_PROV_ERRNO_H_

#include <cerrno>

#include "transport/status.h"

namespace softfab::core {

// The last work-completion status (IBV_WC_GENERAL_ERR).
inline constexpr int kProvWcLast = 21;

inline constexpr int kProvOwnBase = 0x1000;
inline constexpr int kProvTruncated = kProvOwnBase + 1;
inline constexpr int kProvCanceled = kProvOwnBase + 2;
inline constexpr int kProvNoMessage = kProvOwnBase + 3;
// Connection setup was not answered within the retries.
inline constexpr int kProvPeerUnreachable = kProvOwnBase + 4;
inline constexpr int kProvPeerShutdown = kProvOwnBase + 5;
inline constexpr int kProvLocalShutdown = kProvOwnBase + 6;
inline constexpr int kProvRejected = kProvOwnBase + 7;
// The local device refused to bring a QP to the connected state.
inline constexpr int kProvConnectFailed = kProvOwnBase + 8;
inline constexpr int kProvNoMemory = kProvOwnBase + 9;
// The endpoint a message arrived at closed before its data was fetched.
inline constexpr int kProvEndpointClosed = kProvOwnBase + 10;
// The device refused to post the READ that fetches a large message.
inline constexpr int kProvPostRefused = kProvOwnBase + 11;
// The peer speaks another version of softfab's connection protocol.
inline constexpr int kProvCmVersion = kProvOwnBase + 12;
// Causes the device's asynchronous events name (core/async_events.h).
// The connection's queue pair was put in the error state by the device
// (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, PATH_MIG_ERR).
inline constexpr int kProvQpFatal = kProvOwnBase + 13;
// The local port is down (PORT_ERR), or came back up less than an RC retry
// time before the connection failed for want of answers.
inline constexpr int kProvPortDown = kProvOwnBase + 14;
// A completion queue of the endpoint failed (CQ_ERR: overrun).
inline constexpr int kProvCqError = kProvOwnBase + 15;
// The endpoint's shared receive queue failed (SRQ_ERR).
inline constexpr int kProvSrqError = kProvOwnBase + 16;
// The device failed as a whole (DEVICE_FATAL).
inline constexpr int kProvDeviceFatal = kProvOwnBase + 17;
// The port's LID or the GID the endpoint's name carries changed (LID_CHANGE,
// GID_CHANGE): peers holding the old name no longer reach it.
inline constexpr int kProvAddressChanged = kProvOwnBase + 18;
// An RDM peer whose side of the connection failed made a new connection
// to us while ours still looked up: the old one's operations fail with
// ECONNRESET and the new connection takes later sends.
inline constexpr int kProvPeerReconnected = kProvOwnBase + 19;
// A large message kept as unexpected came on a connection that failed and
// was made anew before a receive took it: its data, the sender's failed
// send's, can no longer be fetched.
inline constexpr int kProvConnectionReset = kProvOwnBase + 20;
inline constexpr int kProvOwnLast = kProvConnectionReset;

// Whether `prov_errno` is one of the causes above that the device's
// asynchronous events name (kept as a connection's cause once set).
constexpr bool IsAsyncCause(int prov_errno) {
  return prov_errno >= kProvQpFatal && prov_errno <= kProvAddressChanged;
}

// The cause an error number most often has, for an error entry whose
// caller named none (0: no such default). ECONNREFUSED has two causes
// (a listener's rejection, another CM version); the core names the second
// itself.
constexpr int ProvErrnoOf(int err) {
  switch (err) {
    case kErrTruncated:
      return kProvTruncated;
    case ECANCELED:
      return kProvCanceled;
    case kErrNoMessage:
      return kProvNoMessage;
    case ECONNREFUSED:
      return kProvRejected;
    case ENOMEM:
      return kProvNoMemory;
    default:
      return 0;
  }
}

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_PROV_ERRNO_H_
