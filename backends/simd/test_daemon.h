// For tests: the fabric daemon on a thread of the test's own process,
// serving a private socket until the test ends.
#ifndef SOFTFAB_BACKENDS_SIMD_TEST_DAEMON_H_
#define SOFTFAB_BACKENDS_SIMD_TEST_DAEMON_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "backends/sim/sim_fabric.h"
#include "backends/simd/server.h"
#include "gtest/gtest.h"

namespace softfab::simd {

// A daemon of four nodes (and `faults`) serving on a private socket until
// the test ends; `watchdog_ms` as ServerOptions::watchdog_ms.
class TestDaemon {
 public:
  explicit TestDaemon(const sim::FaultPlan& faults = {},
                      uint64_t watchdog_ms = 10'000) {
    char dir[] = "/tmp/softfab-server-test-XXXXXX";
    dir_ = mkdtemp(dir);
    log_ = tmpfile();
    ServerOptions o;
    o.config.nodes = 4;
    o.config.faults = faults;
    o.socket_path = dir_ + "/fabric";
    o.log = log_;
    o.watchdog_ms = watchdog_ms;
    std::string why;
    auto server = CreateFabricServer(o, &why);
    if (!server.ok()) {
      ADD_FAILURE() << why;
      return;
    }
    server_ = std::move(*server);
    if (pipe(stop_) != 0) std::abort();
    thread_ = std::thread([this] { server_->Run(stop_[0]); });
  }
  ~TestDaemon() {
    if (server_ != nullptr) {
      (void)!write(stop_[1], "x", 1);
      thread_.join();
      close(stop_[0]);
      close(stop_[1]);
    }
    server_.reset();
    std::remove((dir_ + "/fabric").c_str());
    rmdir(dir_.c_str());
    if (log_ != nullptr) fclose(log_);
  }
  std::string path() const { return dir_ + "/fabric"; }
  // What the daemon logged so far.
  std::string Log() {
    fflush(log_);
    std::string out;
    rewind(log_);
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, log_)) > 0) out.append(buf, n);
    return out;
  }

 private:
  std::string dir_;
  FILE* log_ = nullptr;
  std::unique_ptr<FabricServer> server_;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace softfab::simd

#endif  // SOFTFAB_BACKENDS_SIMD_TEST_DAEMON_H_
