// The sfv_* entry to real RDMA devices: the device list (ibv_get_device_list
// through backends/verbs' ListVerbsDevices, each entry with a verbs backend
// of its own that sfv_open_device opens it on), and the reason of the last
// failure on this thread (sfv_last_error).
#include <cerrno>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/softfab/verbs.h"
#include "api/verbs/internal/verbs_objects.h"
#include "backends/verbs/verbs_backend.h"
#include "backends/verbs/verbs_device.h"

namespace softfab::verbs_internal {

// The sfv_* calls have C linkage, so defined inside the namespace they are
// still the global functions api/softfab/verbs.h declares.
extern "C" {

const char* sfv_last_error(void) { return last_error.c_str(); }

sfv_device** sfv_get_device_list(int* num_devices) {
  std::string why;
  const std::vector<verbs::VerbsDeviceInfo> found =
      verbs::ListVerbsDevices(&why);
  auto** list = new (std::nothrow) sfv_device*[found.size() + 1];
  if (list == nullptr) return Fail<sfv_device*>(ENOMEM);
  // The entries share one backend, node i being device i (first active
  // port, automatic GID), so one wait can watch channels of any of them.
  std::vector<std::string> names;
  for (const verbs::VerbsDeviceInfo& info : found) names.push_back(info.name);
  std::shared_ptr<tp::Backend> backend =
      verbs::CreateVerbsListBackend(std::move(names));
  for (size_t i = 0; i < found.size(); ++i) {
    list[i] = new sfv_device();
    list[i]->backend = backend;
    list[i]->node = static_cast<int>(i);
    list[i]->name = found[i].name;
    list[i]->guid = found[i].node_guid;
  }
  list[found.size()] = nullptr;
  if (num_devices != nullptr) *num_devices = static_cast<int>(found.size());
  // Not a failure (as with ibv_get_device_list), but the reason a list is
  // empty or short is worth keeping.
  if (!why.empty()) last_error = why;
  return list;
}

}  // extern "C"

}  // namespace softfab::verbs_internal
