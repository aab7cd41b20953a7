// softfab command line: finding tools/report/plot_study.py at run time.
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "tools/softfab/commands.h"

namespace softfab::cli {

std::string FindPlotScript() {
  if (const char* env = std::getenv("SOFTFAB_PLOT_SCRIPT")) {
    return access(env, R_OK) == 0 ? env : "";
  }
  // Inside another target's runfiles (a test running this binary).
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    const char* dir = std::getenv(var);
    if (dir == nullptr) continue;
    const std::string candidate =
        std::string(dir) + "/softfab/tools/report/plot_study.py";
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  const std::string exe(self);
  // Bazel puts data files in BINARY.runfiles/WORKSPACE/...; beside the source
  // tree (a copied binary) try the workspace's own tools/report.
  for (const std::string& candidate :
       {exe + ".runfiles/softfab/tools/report/plot_study.py",
        exe.substr(0, exe.rfind('/')) + "/report/plot_study.py"}) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace softfab::cli
