// JSON output of the benchmarks: one flat object per line, built key by key.
// Numbers print in their shortest round-trippable form; NaN and Inf (not
// JSON) print as null.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tstat::bench {

inline std::string JsonNumber(double v, const char* fmt = "%.17g") {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

inline std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

class JsonObject {
 public:
  JsonObject& Add(const char* key, const std::string& raw) {
    text_ += (text_.empty() ? "{" : ",") + JsonQuote(key) + ":" + raw;
    return *this;
  }
  JsonObject& Add(const char* key, std::uint64_t v) { return Add(key, std::to_string(v)); }
  JsonObject& Int(const char* key, long long v) { return Add(key, std::to_string(v)); }
  JsonObject& Num(const char* key, double v) { return Add(key, JsonNumber(v)); }
  JsonObject& Bool(const char* key, bool v) { return Add(key, v ? "true" : "false"); }
  JsonObject& Str(const char* key, const std::string& v) { return Add(key, JsonQuote(v)); }
  std::string Close() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

}  // namespace tstat::bench
