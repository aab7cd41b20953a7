// SeedResult to and from one line of JSON, and to one CSV row.
#include "tools/study/result_json.h"

namespace softfab::study {

std::string ResultToJson(const SeedResult& result) {
  return "{\"seed\": " + std::to_string(result.seed) + "}";
}
StatusOr<SeedResult> ResultFromJson(const std::string&, std::string* error) {
  *error = "not written yet";
  return Status(ENOSYS, "not written yet");
}
std::string CsvHeader() { return "seed"; }
std::string ResultToCsvRow(const SeedResult& result) {
  return std::to_string(result.seed);
}

}  // namespace softfab::study
