// The sf_* API on the verbs backend: opening a fabric and its domains on a real
// device (backends/verbs), and sleeping on the domains' completion channels
// where the simulator would run virtual time (api/fabric/verbs_fabric.cc).
#ifndef SOFTFAB_API_FABRIC_INTERNAL_VERBS_FABRIC_H_
#define SOFTFAB_API_FABRIC_INTERNAL_VERBS_FABRIC_H_

#include <sys/types.h>

#include <functional>
#include <vector>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::fabric_internal {

// sf_fabric_open with SF_BACKEND_VERBS: checks that the device, port and GID
// the attributes select exist and are usable (opening the device once), so a
// wrong setting fails here with a reason naming what was found.
int OpenVerbsFabric(const sf_fabric_attr& attr, sf_fabric** out, void* context);
// sf_domain_open on a verbs fabric: a device context of the domain's own, its
// protection domain and its completion channel. `node` only labels it.
int OpenVerbsDomain(Fabric* f, int node, sf_domain** out, void* context);

// A blocking read on a verbs fabric: calls `try_read` until it returns
// something other than -EAGAIN, sleeping on the completion channels of
// `domains` in between (armed first, then polled once more, so nothing that
// arrived before the arm is missed). `timeout_ms` is real time; -1 waits
// forever. Returns -ETIMEDOUT when the time passes.
ssize_t WaitOnChannels(const std::vector<Domain*>& domains, int timeout_ms,
                       const std::function<ssize_t()>& try_read);
// sf_trywait's last step on verbs, after the CQs were found empty: takes the
// events already pending on the channels of `domains` (those of the CQs
// given), arms their endpoints, and runs progress once more. 0 when it is
// then safe to sleep on the fds, -EAGAIN when something is waiting to be read.
int ArmForSleep(const std::vector<Domain*>& domains,
                const std::function<bool()>& something_waiting);

}  // namespace softfab::fabric_internal

#endif  // SOFTFAB_API_FABRIC_INTERNAL_VERBS_FABRIC_H_
