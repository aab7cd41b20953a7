// The sf_* API on the verbs backend (see api/fabric/internal/verbs_fabric.h).
#include "api/fabric/internal/verbs_fabric.h"

#include <poll.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "backends/verbs/verbs_device.h"

namespace softfab::fabric_internal {
namespace {

// Domains of one verbs fabric are numbered by the application; this bounds
// how many contexts one fabric opens.
constexpr int kVerbsDomainsMax = 64;
// A sleeper wakes at least this often to run the protocol's own timers
// (connection-request retries), which no completion announces.
constexpr int kTimerSliceMs = 10;

// Nanoseconds: a deadline kept in whole milliseconds would let a wait that
// starts late in a millisecond end up to a millisecond before its timeout.
int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

verbs::VerbsOptions OptionsFrom(const sf_fabric_attr& attr) {
  verbs::VerbsOptions o;
  if (attr.verbs_device != nullptr) {
    o.device_name = attr.verbs_device;
  } else if (const char* env = std::getenv("SOFTFAB_VERBS_DEVICE")) {
    o.device_name = env;
  }
  o.port = static_cast<uint8_t>(attr.verbs_port);
  if (attr.verbs_flags & SF_VERBS_GID_INDEX) o.gid_index = attr.verbs_gid_index;
  return o;
}

// Takes every event pending on the domain's channel and acks it: the fd is
// then quiet until an armed CQ gets a completion.
void DrainChannel(Domain* d) {
  tp::CompletionQueue* cq = nullptr;
  while (d->channel->GetEvent(&cq).ok()) cq->AckEvents(1);
}

// Arms every endpoint of the given domains, after taking their channels'
// pending events (other domains' channels keep theirs: another waiter may be
// sleeping on them). False if one refused (it then cannot wake a sleeper, so
// the caller must not sleep long).
bool ArmAll(const std::vector<Domain*>& domains) {
  bool ok = true;
  for (Domain* d : domains) {
    DrainChannel(d);
    for (core::Endpoint* ep : d->endpoints) ok &= ep->ArmCompletions().ok();
  }
  return ok;
}

}  // namespace

int OpenVerbsFabric(const sf_fabric_attr& attr, sf_fabric** out,
                    void* context) {
  if (attr.verbs_port < 0 || attr.verbs_port > 255) {
    return Fail(EINVAL, "verbs_port must be in [0, 255] (0: first active)");
  }
  if ((attr.verbs_flags & ~(SF_VERBS_GID_INDEX | SF_VERBS_MR_CACHE)) != 0) {
    return Fail(EINVAL,
                "verbs_flags: SF_VERBS_GID_INDEX and SF_VERBS_MR_CACHE only");
  }
  if ((attr.verbs_flags & SF_VERBS_GID_INDEX) && attr.verbs_gid_index < 0) {
    return Fail(EINVAL, "verbs_gid_index must be >= 0");
  }
  const verbs::VerbsOptions options = OptionsFrom(attr);
  std::string why;
  auto probe = verbs::OpenVerbsDevice(options, &why);
  if (!probe.ok()) {
    return FailWith(probe.status().code(),
                    why.empty() ? probe.status().message() : why);
  }
  auto* f = NewObject<Fabric>(SF_CLASS_FABRIC, context, nullptr);
  f->verbs = true;
  f->verbs_options = options;
  const char* env_cache = std::getenv("SOFTFAB_MR_CACHE");
  f->verbs_mr_cache = (attr.verbs_flags & SF_VERBS_MR_CACHE) ||
                      (env_cache != nullptr && std::string(env_cache) == "1");
  // Domains open the device the probe found, even if the list changes.
  f->verbs_options.device_name = (*probe)->name();
  f->verbs_options.port = (*probe)->physical_port();
  f->verbs_options.gid_index = (*probe)->gid_index();
  *out = f;
  return 0;
}

int OpenVerbsDomain(Fabric* f, int node, sf_domain** out, void* context) {
  if (node < 0 || node >= kVerbsDomainsMax) {
    return Fail(EINVAL, "node must be in [0, 64) on verbs");
  }
  std::string why;
  auto device = verbs::OpenVerbsDevice(f->verbs_options, &why);
  if (!device.ok()) {
    return FailWith(device.status().code(),
                    why.empty() ? device.status().message() : why);
  }
  auto channel = (*device)->CreateCompChannel();
  if (!channel.ok()) return Fail(channel.status());
  auto pd = (*device)->AllocPd();
  if (!pd.ok()) return Fail(pd.status());
  auto* d = NewObject<Domain>(SF_CLASS_DOMAIN, context, &f->children);
  d->fabric = f;
  d->device = device->get();
  d->pd = *pd;
  d->channel = *channel;
  d->verbs_device = std::move(*device);
  core::MrCache::Options cache;
  cache.enabled = f->verbs_mr_cache;
  d->mr_cache = std::make_unique<core::MrCache>(d->pd, cache);
  f->domains.push_back(d);
  *out = d;
  return 0;
}

ssize_t WaitOnChannels(const std::vector<Domain*>& domains, int timeout_ms,
                       const std::function<ssize_t()>& try_read) {
  const int64_t deadline =
      timeout_ms < 0 ? INT64_MAX
                     : MonotonicNs() + int64_t{timeout_ms} * 1'000'000;
  std::vector<pollfd> fds;
  while (true) {
    ssize_t n = try_read();
    if (n != -EAGAIN) return n;
    const bool armed = ArmAll(domains);
    n = try_read();  // what came before the arm raised no event
    if (n != -EAGAIN) return n;
    const int64_t now = MonotonicNs();
    if (now >= deadline) return Fail(ETIMEDOUT, "timed out");
    // poll() sleeps whole milliseconds: round what is left up, so the wait
    // never ends before its deadline.
    const int64_t left = (deadline - now + 999'999) / 1'000'000;
    const int slice = armed ? kTimerSliceMs : 1;
    fds.clear();
    for (Domain* d : domains) fds.push_back({d->channel->fd(), POLLIN, 0});
    const int r = poll(fds.data(), fds.size(),
                       static_cast<int>(left < slice ? left : slice));
    if (r < 0 && errno != EINTR) {
      return Fail(EIO, "poll on a completion channel failed");
    }
  }
}

int ArmForSleep(const std::vector<Domain*>& domains,
                const std::function<bool()>& something_waiting) {
  if (!ArmAll(domains)) return Fail(EAGAIN, "an endpoint could not be armed");
  if (something_waiting()) {
    return Fail(EAGAIN, "completions are waiting: read the CQ");
  }
  return 0;
}

}  // namespace softfab::fabric_internal
