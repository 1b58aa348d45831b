// See closed_marker.h. The parser accepts the JSON subset the writer emits:
// nested objects whose values are strings, numbers or objects.
#include "io/format/closed_marker.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace tstat::io {
namespace {

struct CounterField {
  const char* name;
  std::uint64_t PipelineCounters::*member;
};
constexpr CounterField kCounterFields[] = {
    {"steps_captured", &PipelineCounters::steps_captured},
    {"records_written", &PipelineCounters::records_written},
    {"bytes_written", &PipelineCounters::bytes_written},
    {"raw_dropped", &PipelineCounters::raw_dropped},
    {"raw_dropped_bytes", &PipelineCounters::raw_dropped_bytes},
    {"records_lost", &PipelineCounters::records_lost},
    {"write_errors", &PipelineCounters::write_errors},
    {"stats_waits", &PipelineCounters::stats_waits},
    {"queue_high_water", &PipelineCounters::queue_high_water},
    {"queue_high_water_bytes", &PipelineCounters::queue_high_water_bytes},
    {"segments_written", &PipelineCounters::segments_written},
};

// The capture totals (PipelineCounters::capture), named as in the counters
// table. Optional when parsing: a marker without them reads as zero totals.
struct CaptureCountField {
  const char* name;
  std::uint64_t CaptureTotals::*member;
};
constexpr CaptureCountField kCaptureCountFields[] = {
    {"capture_steps", &CaptureTotals::steps},
    {"capture_steps_saved", &CaptureTotals::steps_saved},
};
struct CaptureSecondsField {
  const char* name;
  double CaptureTotals::*member;
};
constexpr CaptureSecondsField kCaptureSecondsFields[] = {
    {"capture_step_seconds", &CaptureTotals::step_seconds},
    {"capture_seconds", &CaptureTotals::capture_seconds},
};

std::string ExactDouble(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Flattens {"a": 1, "b": {"c": "x"}} into {"a": "1", "b.c": "x"}.
class FlatParser {
 public:
  explicit FlatParser(const std::string& text) : s_(text) {}
  bool Parse(std::map<std::string, std::string>* out) {
    out_ = out;
    Skip();
    if (!Object("")) return false;
    Skip();
    return pos_ == s_.size();
  }

 private:
  void Skip() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool String(std::string* v) {
    if (!Eat('"')) return false;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) return false;
        char e = s_[pos_++];
        if (e == 'u') {
          if (pos_ + 4 > s_.size()) return false;
          const long code = std::strtol(s_.substr(pos_, 4).c_str(), nullptr, 16);
          if (code >= 0x80) return false;  // the writer escapes only control bytes
          c = static_cast<char>(code);
          pos_ += 4;
        } else if (e == 'n') {
          c = '\n';
        } else {
          c = e;
        }
      }
      v->push_back(c);
    }
    return Eat('"');
  }
  bool Object(const std::string& prefix) {
    if (!Eat('{')) return false;
    if (Eat('}')) return true;
    do {
      std::string key;
      if (!String(&key) || !Eat(':')) return false;
      const std::string full = prefix.empty() ? key : prefix + "." + key;
      Skip();
      if (pos_ >= s_.size()) return false;
      if (s_[pos_] == '{') {
        if (!Object(full)) return false;
      } else if (s_[pos_] == '"') {
        std::string v;
        if (!String(&v)) return false;
        (*out_)[full] = v;
      } else {
        const std::size_t start = pos_;
        while (pos_ < s_.size() &&
               std::string("+-.0123456789eE").find(s_[pos_]) != std::string::npos)
          ++pos_;
        if (pos_ == start) return false;
        (*out_)[full] = s_.substr(start, pos_ - start);
      }
    } while (Eat(','));
    return Eat('}');
  }

  const std::string& s_;
  std::size_t pos_ = 0;
  std::map<std::string, std::string>* out_ = nullptr;
};

}  // namespace

std::string ClosedMarkerToJson(const ClosedMarker& m) {
  std::string json =
      "{\"format\": \"tstat-run\", \"format_version\": " + std::to_string(m.format_version) +
      ", \"rank\": " + std::to_string(m.rank) +
      ", \"world_size\": " + std::to_string(m.world_size) + ", \"host\": " + Quote(m.host) +
      ", \"segments\": " + std::to_string(m.segments) + ", \"counters\": {";
  for (const CounterField& f : kCounterFields) {
    json += Quote(f.name) + ": " + std::to_string(m.counters.*f.member) + ", ";
  }
  for (const CaptureCountField& f : kCaptureCountFields) {
    json += Quote(f.name) + ": " + std::to_string(m.counters.capture.*f.member) + ", ";
  }
  for (const CaptureSecondsField& f : kCaptureSecondsFields) {
    json += Quote(f.name) + ": " + ExactDouble(m.counters.capture.*f.member) + ", ";
  }
  json += "\"stats_wait_seconds\": " + ExactDouble(m.counters.stats_wait_seconds) + "}}\n";
  return json;
}

Result<ClosedMarker> ParseClosedMarker(const std::string& json, const std::string& path) {
  std::map<std::string, std::string> v;
  if (!FlatParser(json).Parse(&v) || v["format"] != "tstat-run") {
    return Status::Corruption(path + ": not a tstat CLOSED marker");
  }
  const std::string& version = v["format_version"];
  if (version.size() != 1 || version[0] < '0' + kOldestReadableFormatVersion ||
      version[0] > '0' + kFormatVersion) {
    return Status::NotSupported(path + ": CLOSED marker of format_version '" + version +
                                "' (this reader knows versions " +
                                std::to_string(kOldestReadableFormatVersion) + " to " +
                                std::to_string(kFormatVersion) + ")");
  }
  for (const char* key : {"rank", "world_size", "segments", "counters.stats_wait_seconds"}) {
    if (v.count(key) == 0) {
      return Status::Corruption(path + ": CLOSED marker lacks '" + key + "'");
    }
  }
  ClosedMarker m;
  m.format_version = version[0] - '0';
  m.rank = std::atoi(v["rank"].c_str());
  m.world_size = std::atoi(v["world_size"].c_str());
  m.host = v["host"];
  m.segments = std::strtoll(v["segments"].c_str(), nullptr, 10);
  for (const CounterField& f : kCounterFields) {
    auto it = v.find(std::string("counters.") + f.name);
    if (it == v.end()) {
      return Status::Corruption(path + ": CLOSED marker lacks counter '" + f.name + "'");
    }
    m.counters.*f.member = std::strtoull(it->second.c_str(), nullptr, 10);
  }
  m.counters.stats_wait_seconds = std::strtod(v["counters.stats_wait_seconds"].c_str(), nullptr);
  for (const CaptureCountField& f : kCaptureCountFields) {
    auto it = v.find(std::string("counters.") + f.name);
    if (it != v.end())
      m.counters.capture.*f.member = std::strtoull(it->second.c_str(), nullptr, 10);
  }
  for (const CaptureSecondsField& f : kCaptureSecondsFields) {
    auto it = v.find(std::string("counters.") + f.name);
    if (it != v.end()) m.counters.capture.*f.member = std::strtod(it->second.c_str(), nullptr);
  }
  return m;
}

}  // namespace tstat::io
