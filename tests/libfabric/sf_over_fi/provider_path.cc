// Points libfabric at the provider built beside the shim's tests (their
// runfiles) before main runs, unless FI_PROVIDER_PATH is set already: the
// suites compiled against the shim do not know they run through libfabric.
#include <cstdlib>
#include <string>

namespace softfab::sf_over_fi {
namespace {

const bool provider_path_set = [] {
  if (getenv("FI_PROVIDER_PATH") != nullptr) return true;
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  const std::string dir = srcdir ? std::string(srcdir) + "/" +
                                       (workspace ? workspace : "softfab") +
                                       "/api/libfabric"
                                 : "bazel-bin/api/libfabric";
  setenv("FI_PROVIDER_PATH", dir.c_str(), 1);
  return true;
}();

}  // namespace
}  // namespace softfab::sf_over_fi
