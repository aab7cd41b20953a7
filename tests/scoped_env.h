// A test's environment variable: set (or unset) for a scope, then what was
// there restored.
#ifndef SOFTFAB_TESTS_SCOPED_ENV_H_
#define SOFTFAB_TESTS_SCOPED_ENV_H_

#include <cstdlib>
#include <string>

namespace softfab::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace softfab::testing

#endif  // SOFTFAB_TESTS_SCOPED_ENV_H_
