// A fabric's class of service: the traffic class, service level and P_Key
// index every path of its endpoints carries, from sf_fabric_attr or, for a
// field left 0, the environment (as UCX reads UCX_IB_TRAFFIC_CLASS), so a
// program that cannot change its code, a libfabric one among them, can be put
// in a RoCE fabric's lossless class from outside.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "api/fabric/internal/backends.h"
#include "api/fabric/internal/fabric_objects.h"
#include "api/softfab/fabric.h"

namespace softfab::fabric_internal {

int AttrOrEnv(uint32_t field, const char* label, const char* name, uint32_t max,
              uint32_t* out) {
  if (field != 0) {
    if (field > max) {
      return FailWith(EINVAL, std::string(label) + " " + std::to_string(field) +
                                  " is above " + std::to_string(max));
    }
    *out = field;
    return 0;
  }
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') {
    *out = 0;
    return 0;
  }
  char* end = nullptr;
  errno = 0;
  const bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  const unsigned long long v = std::strtoull(text, &end, hex ? 16 : 10);
  if (errno != 0 || *end != '\0' || text[0] == '-' || v > max) {
    return FailWith(EINVAL, std::string("$") + name + "=\"" + text +
                                "\": expected an integer in [0, " +
                                std::to_string(max) + "]");
  }
  *out = static_cast<uint32_t>(v);
  return 0;
}

int ResolveClassOfService(const sf_fabric_attr* attr, ClassOfService* out) {
  uint32_t tc = 0, sl = 0, pkey = 0;
  int rc = AttrOrEnv(attr != nullptr ? attr->traffic_class : 0, "traffic_class",
                     "SOFTFAB_TRAFFIC_CLASS", 255, &tc);
  if (rc == 0) {
    rc = AttrOrEnv(attr != nullptr ? attr->service_level : 0, "service_level",
                   "SOFTFAB_SERVICE_LEVEL", 15, &sl);
  }
  if (rc == 0) {
    rc = AttrOrEnv(attr != nullptr ? attr->pkey_index : 0, "pkey_index",
                   "SOFTFAB_PKEY_INDEX", UINT16_MAX, &pkey);
  }
  if (rc != 0) return rc;
  out->traffic_class = static_cast<uint8_t>(tc);
  out->service_level = static_cast<uint8_t>(sl);
  out->pkey_index = static_cast<uint16_t>(pkey);
  return 0;
}

}  // namespace softfab::fabric_internal
