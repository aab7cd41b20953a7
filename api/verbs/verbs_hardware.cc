// The sfv_* entry to real RDMA devices: the device list (ibv_get_device_list
// through backends/verbs' ListVerbsDevices), opening a listed device as a
// context that owns its backends/verbs device, and the reason of the last
// failure on this thread (sfv_last_error).
#include <cerrno>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "api/verbs/internal/verbs_objects.h"
#include "api/softfab/verbs.h"
#include "backends/verbs/verbs_device.h"

namespace softfab::verbs_internal {

sfv_context* OpenHardwareContext(const sfv_device& entry) {
  verbs::VerbsOptions options;
  options.device_name = entry.name;  // first ACTIVE port, automatic GID
  std::string why;
  auto device = verbs::OpenVerbsDevice(options, &why);
  if (!device.ok()) {
    // The diagnostic names what was found; the status message is the fallback.
    last_error = why.empty() ? device.status().message() : why;
    errno = device.status().code();
    return nullptr;
  }
  auto ctx = std::make_unique<SfvContext>();
  ctx->hardware_entry = entry;
  ctx->device = &ctx->hardware_entry;
  ctx->num_comp_vectors = 1;
  ctx->dev = device->get();
  ctx->hardware = std::move(*device);
  return ctx.release();  // deleted by sfv_close_device
}

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
  for (size_t i = 0; i < found.size(); ++i) {
    list[i] = new sfv_device();
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
