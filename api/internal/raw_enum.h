// The integer in a C enum field of a public struct. A C caller may store any
// int there; reading an out-of-range value through the C++ enum type is
// undefined (UBSan: "not a valid value for type"), so the API copies the bits
// and validates the int before it ever reads the field as its enum.
#ifndef SOFTFAB_API_INTERNAL_RAW_ENUM_H_
#define SOFTFAB_API_INTERNAL_RAW_ENUM_H_

#include <cstring>

namespace softfab {

template <typename E>
int Raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

}  // namespace softfab

#endif  // SOFTFAB_API_INTERNAL_RAW_ENUM_H_
