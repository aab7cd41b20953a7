// Operation, completion and capability flags of the messaging core. The bit
// values are libfabric 1.x's, so the public sf_* API (api/softfab/fabric.h)
// defines SF_* with the same numbers and passes flags through untouched;
// api/fabric/data_path.cc checks the two agree at compile time.
#ifndef SOFTFAB_CORE_FLAGS_H_
#define SOFTFAB_CORE_FLAGS_H_

#include <cstdint>

namespace softfab::core {

inline constexpr uint64_t kMsg = 1ull << 1;
inline constexpr uint64_t kRma = 1ull << 2;
inline constexpr uint64_t kTagged = 1ull << 3;
inline constexpr uint64_t kMulticast = 1ull << 5;
inline constexpr uint64_t kRead = 1ull << 8;
inline constexpr uint64_t kWrite = 1ull << 9;
inline constexpr uint64_t kRecv = 1ull << 10;
inline constexpr uint64_t kSend = 1ull << 11;
inline constexpr uint64_t kMultiRecv = 1ull << 16;
inline constexpr uint64_t kRemoteCqData = 1ull << 17;
inline constexpr uint64_t kMore = 1ull << 18;
inline constexpr uint64_t kPeek = 1ull << 19;
inline constexpr uint64_t kFence = 1ull << 21;
inline constexpr uint64_t kCompletion = 1ull << 24;
inline constexpr uint64_t kInject = 1ull << 25;
inline constexpr uint64_t kInjectComplete = 1ull << 26;
inline constexpr uint64_t kTransmitComplete = 1ull << 27;
inline constexpr uint64_t kDeliveryComplete = 1ull << 28;
inline constexpr uint64_t kMatchComplete = 1ull << 31;
inline constexpr uint64_t kBufferedRecv = 1ull << 51;  // FI_BUFFERED_RECV mode
inline constexpr uint64_t kVariableMsg = 1ull << 48;
inline constexpr uint64_t kDirectedRecv = 1ull << 59;  // capability
// Receive op flags that share bits with capabilities (as in libfabric).
inline constexpr uint64_t kClaim = 1ull << 59;
inline constexpr uint64_t kDiscard = 1ull << 58;

inline constexpr uint64_t kCompletionLevels =
    kInjectComplete | kTransmitComplete | kDeliveryComplete | kMatchComplete;

// Flags a send may carry (fi_sendmsg / fi_tsendmsg).
inline constexpr uint64_t kSendOpFlags = kRemoteCqData | kCompletion | kMore |
                                         kInject | kCompletionLevels | kFence |
                                         kMulticast;
// Flags a receive may carry (fi_recvmsg / fi_trecvmsg).
inline constexpr uint64_t kRecvOpFlags = kCompletion | kMore | kMultiRecv |
                                         kPeek | kClaim | kDiscard |
                                         kTransmitComplete;

}  // namespace softfab::core

#endif  // SOFTFAB_CORE_FLAGS_H_
