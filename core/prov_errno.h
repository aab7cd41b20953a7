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
inline constexpr int kProvOwnLast = kProvCmVersion;

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
