// softfab command line: a small JSON emitter for the study report. Output is
// a pure function of the values written (fixed number formats, keys in the
// order written), so the same results always give byte-identical files.
#ifndef SOFTFAB_TOOLS_SOFTFAB_JSON_WRITER_H_
#define SOFTFAB_TOOLS_SOFTFAB_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

namespace softfab::cli {

class JsonWriter {
 public:
  // Objects and arrays; Key() precedes each member of an object.
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(const std::string& key);

  JsonWriter& String(const std::string& value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Int(int64_t value);
  // Finite values with 6 significant digits (a report, not a data exchange);
  // NaN and infinities become null.
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  // `json` must already be one valid JSON value (e.g. a seed's result line).
  JsonWriter& Raw(const std::string& json);
  // The next value or closing bracket starts a new line, indented by depth.
  JsonWriter& Newline();

  const std::string& text() const { return text_; }

 private:
  void Separate();
  void Close(char bracket);

  std::string text_;
  std::vector<bool> first_;  // Per open container: nothing written yet.
  bool after_key_ = false;
  bool newline_ = false;
};

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& text);

}  // namespace softfab::cli

#endif  // SOFTFAB_TOOLS_SOFTFAB_JSON_WRITER_H_
