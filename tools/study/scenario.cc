// Reading a scenario file (YAML, yaml-cpp) into a Scenario, with located
// errors; and the simulator configuration it describes.
#include "tools/study/scenario.h"

namespace softfab::study {

StatusOr<Scenario> ParseScenario(const std::string& text,
                                 const std::string& path, std::string* error) {
  (void)text;
  *error = path + ":1:1: scenario reading is not written yet";
  return Status(ENOSYS, "not written yet");
}

StatusOr<Scenario> LoadScenario(const std::string& path, std::string* error) {
  return ParseScenario("", path, error);
}

sim::SimConfig SimConfigFor(const Scenario& scenario, uint64_t seed) {
  sim::SimConfig c;
  c.nodes = scenario.topology.nodes;
  c.master_seed = seed;
  c.faults = scenario.faults;
  return c;
}

const char* WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kPingPong:
      return "pingpong";
    case WorkloadKind::kStream:
      return "stream";
    case WorkloadKind::kAllToAll:
      return "alltoall";
    case WorkloadKind::kIncast:
      return "incast";
  }
  return "?";
}
const char* ApiKindName(ApiKind kind) {
  return kind == ApiKind::kMsg ? "msg" : "tagged";
}
const char* EndpointKindName(EndpointKind kind) {
  return kind == EndpointKind::kRdm ? "rdm" : "msg";
}

}  // namespace softfab::study
