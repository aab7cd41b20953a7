// softfab command line: the report's JSON emitter.
#include "tools/softfab/json_writer.h"

#include <cmath>
#include <cstdio>

namespace softfab::cli {

std::string JsonQuote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          out += esc;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) text_ += newline_ ? "," : ", ";
    first_.back() = false;
  }
  if (newline_) {
    newline_ = false;
    text_ += '\n';
    text_.append(2 * first_.size(), ' ');
  }
}

void JsonWriter::Close(char bracket) {
  first_.pop_back();
  if (newline_) {
    newline_ = false;
    text_ += '\n';
    text_.append(2 * first_.size(), ' ');
  }
  text_ += bracket;
}

JsonWriter& JsonWriter::BeginObject() {
  Separate();
  text_ += '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  Close('}');
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  Separate();
  text_ += '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Close(']');
  return *this;
}

JsonWriter& JsonWriter::Key(const std::string& key) {
  Separate();
  text_ += JsonQuote(key);
  text_ += ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(const std::string& value) {
  Separate();
  text_ += JsonQuote(value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  Separate();
  text_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  Separate();
  text_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  Separate();
  if (!std::isfinite(value)) {
    text_ += "null";
    return *this;
  }
  char number[32];
  std::snprintf(number, sizeof number, "%.6g", value);
  text_ += number;
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  Separate();
  text_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Raw(const std::string& json) {
  Separate();
  text_ += json;
  return *this;
}

JsonWriter& JsonWriter::Newline() {
  newline_ = true;
  return *this;
}

}  // namespace softfab::cli
