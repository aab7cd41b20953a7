// Opening an sf_fabric on a real device (SF_BACKEND_VERBS): the verbs_*
// attributes become the options of a verbs backend (backends/verbs), checked
// against the devices present so a wrong setting fails here with a reason.
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>

#include "api/fabric/internal/backends.h"
#include "api/fabric/internal/fabric_objects.h"
#include "backends/verbs/verbs_backend.h"
#include "backends/verbs/verbs_device.h"

namespace softfab::fabric_internal {
namespace {

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

// The registration cache's mode from the flags, else the environment; none
// for a contradiction or an unknown value.
std::optional<Fabric::MrCacheMode> MrCacheModeFrom(uint32_t flags) {
  using Mode = Fabric::MrCacheMode;
  const bool on = flags & SF_VERBS_MR_CACHE;
  const bool off = flags & SF_VERBS_NO_MR_CACHE;
  if (on && off) return std::nullopt;
  if (on) return Mode::kTrusted;
  if (off) return Mode::kOff;
  const char* env = std::getenv("SOFTFAB_MR_CACHE");
  if (env == nullptr) return Mode::kWatched;
  if (std::string(env) == "1") return Mode::kTrusted;
  if (std::string(env) == "0") return Mode::kOff;
  return std::nullopt;
}

constexpr uint32_t kSreadSpinUsDefault = 20;
constexpr uint32_t kSreadSpinUsMax = 1'000'000;

}  // namespace

int OpenVerbsBackend(const sf_fabric_attr& attr, Fabric* f) {
  if (attr.verbs_port < 0 || attr.verbs_port > 255) {
    return Fail(EINVAL, "verbs_port must be in [0, 255] (0: first active)");
  }
  constexpr uint32_t kFlags =
      SF_VERBS_GID_INDEX | SF_VERBS_MR_CACHE | SF_VERBS_NO_MR_CACHE;
  if ((attr.verbs_flags & ~kFlags) != 0) {
    return Fail(EINVAL,
                "verbs_flags: SF_VERBS_GID_INDEX, SF_VERBS_MR_CACHE and "
                "SF_VERBS_NO_MR_CACHE only");
  }
  auto cache = MrCacheModeFrom(attr.verbs_flags);
  if (!cache.has_value()) {
    return Fail(EINVAL,
                "SF_VERBS_MR_CACHE and SF_VERBS_NO_MR_CACHE together, or "
                "SOFTFAB_MR_CACHE neither 0 nor 1");
  }
  if ((attr.verbs_flags & SF_VERBS_GID_INDEX) && attr.verbs_gid_index < 0) {
    return Fail(EINVAL, "verbs_gid_index must be >= 0");
  }
  // Spinning before a sleep, as UCX and libfabric's verbs provider do: a
  // device's round trip is a few microseconds, a sleep and its wake-up
  // several system calls.
  uint32_t spin_us = kSreadSpinUsDefault;
  if (std::getenv("SOFTFAB_SREAD_SPIN_US") != nullptr &&
      AttrOrEnv(0, "SOFTFAB_SREAD_SPIN_US", "SOFTFAB_SREAD_SPIN_US",
                kSreadSpinUsMax, &spin_us) != 0) {
    return -SF_EINVAL;
  }
  verbs::VerbsOptions options = OptionsFrom(attr);
  // Opened once to check the choice; domains then open the device the probe
  // found, even if the list changes.
  std::string why;
  auto probe = verbs::OpenVerbsDevice(options, &why);
  if (!probe.ok()) {
    return FailWith(probe.status().code(),
                    why.empty() ? probe.status().message() : why);
  }
  options.device_name = (*probe)->name();
  options.port = (*probe)->physical_port();
  options.gid_index = (*probe)->gid_index();
  f->mr_cache = *cache;
  f->sread_spin_ns = uint64_t{spin_us} * 1000;
  f->backend = verbs::CreateVerbsBackend(options);
  return 0;
}

}  // namespace softfab::fabric_internal
