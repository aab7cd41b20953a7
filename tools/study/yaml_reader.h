// Reading scenario YAML with located errors: a Reader that checks each
// field's type, range and unit and writes the first problem as
// FILE:LINE:COL: field 'a.b': expected ..., got ...; and exact parsing of
// quantities with units (durations, sizes, rates). Private to tools/study.
#ifndef SOFTFAB_TOOLS_STUDY_YAML_READER_H_
#define SOFTFAB_TOOLS_STUDY_YAML_READER_H_

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

namespace softfab::study::yaml_reader {

// Values in a file are integers with a unit: durations ("250us", "1.5ms"),
// sizes ("4KiB", "20000") and rates ("25Gbps"). Decimals are exact: they are
// read as integers scaled by the unit, never through floating point.
struct Unit {
  const char* suffix;
  uint64_t scale;
};
inline constexpr Unit kDurationUnits[] = {
    {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
inline constexpr Unit kSizeUnits[] = {{"B", 1},
                                      {"KiB", 1024},
                                      {"MiB", 1024 * 1024},
                                      {"GiB", 1024ull * 1024 * 1024},
                                      {"", 1}};
inline constexpr Unit kRateUnits[] = {{"bps", 1},
                                      {"Kbps", 1000},
                                      {"Mbps", 1000000},
                                      {"Gbps", 1000000000},
                                      {"Tbps", 1000000000000ull}};

// "12.5" scaled by `scale` exactly; false if not a number or not a whole
// count of the base unit, or beyond 2^63.
inline bool ScaledDecimal(const std::string& digits, uint64_t scale,
                          uint64_t* out) {
  if (digits.empty()) return false;
  unsigned __int128 whole = 0, frac = 0, frac_div = 1;
  bool dot = false, any = false;
  for (char c : digits) {
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (c < '0' || c > '9') return false;
    any = true;
    if (dot) {
      if (frac_div > 1'000'000'000'000ull) return false;
      frac = frac * 10 + (c - '0');
      frac_div *= 10;
    } else {
      whole = whole * 10 + (c - '0');
      if (whole > (1ull << 63)) return false;
    }
  }
  if (!any) return false;
  const unsigned __int128 scaled_frac = frac * scale;
  if (scaled_frac % frac_div != 0) return false;
  const unsigned __int128 v = whole * scale + scaled_frac / frac_div;
  if (v > (1ull << 63)) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

template <size_t N>
bool WithUnit(const std::string& text, const Unit (&units)[N], bool bare_ok,
              uint64_t* out) {
  // The longest suffix that matches wins ("ms" before "s").
  const Unit* best = nullptr;
  for (const Unit& u : units) {
    const size_t n = std::char_traits<char>::length(u.suffix);
    if (text.size() < n || text.compare(text.size() - n, n, u.suffix) != 0) {
      continue;
    }
    if (best == nullptr || n > std::char_traits<char>::length(best->suffix)) {
      best = &u;
    }
  }
  if (best == nullptr) {
    if (!bare_ok) return false;
    return ScaledDecimal(text, 1, out);
  }
  const size_t n = std::char_traits<char>::length(best->suffix);
  std::string digits = text.substr(0, text.size() - n);
  while (!digits.empty() && digits.back() == ' ') digits.pop_back();
  return ScaledDecimal(digits, best->scale, out);
}

// A reader that stops at the first error, which it writes, located, to
// *error. Every Get* returns false once an error is set.
class Reader {
 public:
  Reader(std::string path, std::string* error)
      : path_(std::move(path)), error_(error) {}

  bool failed() const { return failed_; }

  bool Fail(const YAML::Mark& mark, const std::string& field,
            const std::string& expected, const std::string& got) {
    if (failed_) return false;
    failed_ = true;
    const int line = mark.line >= 0 ? mark.line + 1 : 1;
    const int col = mark.column >= 0 ? mark.column + 1 : 1;
    std::ostringstream os;
    os << path_ << ":" << line << ":" << col << ": field '" << field
       << "': expected " << expected << ", got " << got;
    *error_ = os.str();
    return false;
  }

  void Syntax(const YAML::Mark& mark, const std::string& what) {
    failed_ = true;
    std::ostringstream os;
    os << path_ << ":" << mark.line + 1 << ":" << mark.column + 1
       << ": syntax: " << what;
    *error_ = os.str();
  }

  // A value as an error quotes it: at most its first line, and no more than
  // kQuoteMax characters of that (a file that is not YAML at all parses as
  // one long text, which must not come back whole).
  static constexpr size_t kQuoteMax = 60;
  static std::string Describe(const YAML::Node& n) {
    if (!n.IsDefined() || n.IsNull()) return "nothing";
    if (n.IsMap()) return "a map";
    if (n.IsSequence()) return "a list";
    const std::string& text = n.Scalar();
    const size_t line_end = std::min(text.find('\n'), text.size());
    if (line_end <= kQuoteMax && line_end == text.size()) {
      return "'" + text + "'";
    }
    return "'" + text.substr(0, std::min(line_end, kQuoteMax)) + "...' (" +
           std::to_string(text.size()) + " characters of text)";
  }

  // A map's keys must all be known; `field` names the map.
  bool OnlyKeys(const YAML::Node& map, const std::string& field,
                std::initializer_list<const char*> known) {
    if (!map.IsMap()) {
      return Fail(map.Mark(), field, "a map", Describe(map));
    }
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok) {
        std::string list;
        for (const char* k : known) {
          if (!list.empty()) list += ", ";
          list += k;
        }
        return Fail(kv.first.Mark(), Join(field, key),
                    "one of the known fields (" + list + ")",
                    "an unknown field");
      }
    }
    return true;
  }

  static std::string Join(const std::string& a, const std::string& b) {
    return a.empty() ? b : a + "." + b;
  }

  // The section `key` of `map`, which must be present and a map.
  bool Section(const YAML::Node& map, const std::string& parent,
               const char* key, YAML::Node* out) {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) {
      return Fail(map.Mark(), Join(parent, key), "a section (a map)",
                  "nothing (the section is missing)");
    }
    if (!n.IsMap()) {
      return Fail(n.Mark(), Join(parent, key), "a section (a map)",
                  Describe(n));
    }
    *out = n;
    return true;
  }

  bool String(const YAML::Node& n, const std::string& field, std::string* out) {
    if (!n.IsScalar()) return Fail(n.Mark(), field, "text", Describe(n));
    *out = n.Scalar();
    return true;
  }

  // An integer in [lo, hi].
  bool Int(const YAML::Node& n, const std::string& field, int64_t lo,
           int64_t hi, int64_t* out) {
    const std::string range = "an integer in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "]";
    uint64_t v = 0;
    if (!n.IsScalar()) return Fail(n.Mark(), field, range, Describe(n));
    std::string s = n.Scalar();
    bool negative = !s.empty() && s[0] == '-';
    if (negative) s = s.substr(1);
    if (s.find('.') != std::string::npos || !ScaledDecimal(s, 1, &v)) {
      return Fail(n.Mark(), field, range, Describe(n));
    }
    const int64_t x =
        negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    if (x < lo || x > hi) return Fail(n.Mark(), field, range, Describe(n));
    *out = x;
    return true;
  }

  template <size_t N>
  bool Quantity(const YAML::Node& n, const std::string& field,
                const Unit (&units)[N], bool bare_ok, const char* kind,
                uint64_t lo, uint64_t hi, uint64_t* out) {
    const std::string what = std::string(kind) + " in [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "]";
    uint64_t v = 0;
    if (!n.IsScalar() || !WithUnit(n.Scalar(), units, bare_ok, &v)) {
      return Fail(n.Mark(), field, what, Describe(n));
    }
    if (v < lo || v > hi) return Fail(n.Mark(), field, what, Describe(n));
    *out = v;
    return true;
  }

  bool Duration(const YAML::Node& n, const std::string& field, uint64_t lo,
                uint64_t hi, uint64_t* out) {
    if (n.IsScalar() && n.Scalar() == "0" && lo == 0) {  // needs no unit
      *out = 0;
      return true;
    }
    return Quantity(n, field, kDurationUnits, false,
                    "a duration with a unit (ns, us, ms, s) in ns", lo, hi,
                    out);
  }
  bool Bytes(const YAML::Node& n, const std::string& field, uint64_t lo,
             uint64_t hi, uint64_t* out) {
    return Quantity(n, field, kSizeUnits, true,
                    "a size in bytes (B, KiB, MiB, GiB)", lo, hi, out);
  }
  bool Rate(const YAML::Node& n, const std::string& field, uint64_t* out) {
    if (n.IsScalar() && (n.Scalar() == "0" || n.Scalar() == "unlimited")) {
      *out = 0;
      return true;
    }
    return Quantity(n, field, kRateUnits, false,
                    "a rate (bps, Kbps, Mbps, Gbps, Tbps) or 'unlimited', "
                    "in bps",
                    1000, 1'000'000'000'000'000ull, out);
  }
  bool Probability(const YAML::Node& n, const std::string& field, double* out) {
    const char* what = "a probability in [0, 1]";
    if (!n.IsScalar()) return Fail(n.Mark(), field, what, Describe(n));
    double v = 0;
    try {
      v = n.as<double>();
    } catch (const YAML::Exception&) {
      return Fail(n.Mark(), field, what, Describe(n));
    }
    if (!(v >= 0.0 && v <= 1.0)) {
      return Fail(n.Mark(), field, what, Describe(n));
    }
    *out = v;
    return true;
  }

  // One of `names` (index into it).
  bool Enum(const YAML::Node& n, const std::string& field,
            std::initializer_list<const char*> names, int* out) {
    std::string list;
    for (const char* k : names) {
      if (!list.empty()) list += '|';
      list += k;
    }
    if (n.IsScalar()) {
      int i = 0;
      for (const char* k : names) {
        if (n.Scalar() == k) {
          *out = i;
          return true;
        }
        ++i;
      }
    }
    return Fail(n.Mark(), field, "one of " + list, Describe(n));
  }

 private:
  std::string path_;
  std::string* error_;
  bool failed_ = false;
};

// Optional field helpers: run `read` only when `key` is present.
template <typename F>
bool Optional(const YAML::Node& map, const char* key, F read) {
  const YAML::Node n = map[key];
  if (!n.IsDefined()) return true;
  return read(n);
}

}  // namespace softfab::study::yaml_reader

#endif  // SOFTFAB_TOOLS_STUDY_YAML_READER_H_
