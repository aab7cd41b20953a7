// The backends an sf_fabric can be opened on, and how the sf_* layer waits on
// whichever it holds. sf_fabric_open chooses the backend in one place
// (api/fabric/fabric_domain.cc); each backend's opener translates the
// attributes that concern it (the sim_* fields: api/sim/fabric_sim.cc; the
// verbs_* fields: api/fabric/verbs_fabric.cc). Everything after that goes
// through transport::Backend and never asks which backend it is.
#ifndef SOFTFAB_API_FABRIC_INTERNAL_BACKENDS_H_
#define SOFTFAB_API_FABRIC_INTERNAL_BACKENDS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <vector>

#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::fabric_internal {

// Fill `f`'s backend from `attr` (sf_fabric_open has checked `backend`);
// 0, or -SF_E* with the reason for sf_last_error and `f` untouched.
int OpenSimBackend(const sf_fabric_attr& attr, Fabric* f);
// The simulator shared by several processes (backends/simd): the daemon at
// $SOFTFAB_FABRIC, this process's node from the environment; the sim_*
// fields are the daemon's to set and must be left at their defaults.
int OpenSharedSimBackend(const sf_fabric_attr& attr, Fabric* f);
int OpenVerbsBackend(const sf_fabric_attr& attr, Fabric* f);

// The attribute `label` as given, or when 0 the environment variable `name`
// parsed as an integer in [0, max] (decimal, or hex with 0x; unset: 0); 0, or
// -SF_EINVAL with the reason for sf_last_error.
int AttrOrEnv(uint32_t field, const char* label, const char* name, uint32_t max,
              uint32_t* out);

// The class of service `attr` asks for (null: none), each field left 0
// taken from the environment ($SOFTFAB_TRAFFIC_CLASS, $SOFTFAB_SERVICE_LEVEL,
// $SOFTFAB_PKEY_INDEX); 0, or -SF_EINVAL with the reason for sf_last_error.
int ResolveClassOfService(const sf_fabric_attr* attr, ClassOfService* out);

// A new fabric object over `backend`, its endpoints' paths in class `cos`;
// `sim_extension` is the in-process simulator behind it, if any
// (api/sim/sim_api.h).
sf_fabric* NewFabric(std::unique_ptr<tp::Backend> backend,
                     softfab::sim::SimFabric* sim_extension,
                     const ClassOfService& cos, void* context);

// Gives `cq` (of a domain) its wait fd (SF_WAIT_FD, SF_WAIT_UNSPEC) and
// keeps it in step from now on; 0, or -SF_E* (the fds it made close with it).
int OpenWaitFd(Cq* cq);

// A blocking read (sf_cq_sread, sf_eq_sread): calls `try_read` until it
// returns something other than -EAGAIN, waiting on the fabric's backend in
// between, until `timeout_ms` (-1: none) of the backend's clock has passed.
// `domains` are those whose endpoints' completions can end the wait: armed
// before the backend sleeps (a real device) and their channels slept on.
// A finite wait on a simulated fabric ends with the clock at exactly its
// deadline when nothing came; an unbounded one ends early (-SF_ETIMEDOUT)
// only when the fabric is idle, as nothing can arrive any more.
ssize_t WaitFor(Fabric* f, const std::vector<Domain*>& domains, int timeout_ms,
                const std::function<ssize_t()>& try_read);

// sf_trywait's last step, after the CQs were found empty: takes the events
// already pending on the channels of `domains`, arms their endpoints, and
// runs `something_waiting` once more. 0 when it is then safe to sleep on the
// wait fds, -SF_EAGAIN when something is waiting to be read.
int ArmForSleep(Fabric* f, const std::vector<Domain*>& domains,
                const std::function<bool()>& something_waiting);

}  // namespace softfab::fabric_internal

#endif  // SOFTFAB_API_FABRIC_INTERNAL_BACKENDS_H_
