#include "rules/engine/param_reader.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "rules/engine/rule_base.h"

namespace tstat::rules {

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    const auto b = cur.find_first_not_of(" \t");
    if (b != std::string::npos) {
      const auto e = cur.find_last_not_of(" \t");
      out.push_back(cur.substr(b, e - b + 1));
    }
    cur.clear();
  };
  for (char c : s) {
    if (c == ',') {
      flush();
    } else {
      cur += c;
    }
  }
  flush();
  return out;
}

void ParamReader::Fail(const std::string& key, const std::string& what) {
  if (status_.ok()) {
    status_ = Status::InvalidArgument("rule " + type_ + ": parameter " + key + " " + what);
  }
}

const std::string* ParamReader::Raw(const std::string& key) {
  known_.insert(key);
  auto it = params_.find(key);
  return it == params_.end() ? nullptr : &it->second;
}

double ParamReader::Double(const std::string& key, double def) {
  const std::string* v = Raw(key);
  if (v == nullptr) return def;
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(v->c_str(), &end);
  if (v->empty() || end == v->c_str() || *end != '\0' || errno == ERANGE || std::isnan(d)) {
    Fail(key, "must be a number, got \"" + *v + "\"");
    return def;
  }
  return d;
}

std::int64_t ParamReader::Int(const std::string& key, std::int64_t def) {
  const std::string* v = Raw(key);
  if (v == nullptr) return def;
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || end == v->c_str() || *end != '\0' || errno == ERANGE) {
    Fail(key, "must be an integer, got \"" + *v + "\"");
    return def;
  }
  return i;
}

bool ParamReader::Bool(const std::string& key, bool def) {
  const std::string* v = Raw(key);
  if (v == nullptr) return def;
  const std::string l = AsciiLower(*v);
  if (l == "true" || l == "1") return true;
  if (l == "false" || l == "0") return false;
  Fail(key, "must be true or false, got \"" + *v + "\"");
  return def;
}

std::string ParamReader::String(const std::string& key, const std::string& def) {
  const std::string* v = Raw(key);
  return v == nullptr ? def : *v;
}

std::string ParamReader::OneOf(const std::string& key, const std::string& def,
                               const std::vector<std::string>& options) {
  const std::string* v = Raw(key);
  if (v == nullptr) return def;
  std::string names;
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (*v == options[i]) return *v;
    names += (i == 0 ? "" : i + 1 == options.size() ? " or " : ", ") + options[i];
  }
  Fail(key, "must be " + names + ", got \"" + *v + "\"");
  return def;
}

std::vector<std::string> ParamReader::List(const std::string& key,
                                           const std::vector<std::string>& def) {
  const std::string* v = Raw(key);
  return v == nullptr ? def : SplitList(*v);
}

std::vector<double> ParamReader::DoubleList(const std::string& key,
                                            const std::vector<double>& def) {
  const std::string* v = Raw(key);
  if (v == nullptr) return def;
  std::vector<double> out;
  for (const std::string& item : SplitList(*v)) {
    char* end = nullptr;
    const double d = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0' || std::isnan(d)) {
      Fail(key, "must be a comma-separated list of numbers, got \"" + *v + "\"");
      return def;
    }
    out.push_back(d);
  }
  return out;
}

void ParamReader::CheckRange(const std::string& key, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "must be in [%g, %g], got %g", lo, hi, value);
    Fail(key, buf);
  }
}

Status ParamReader::Finish() const {
  if (!status_.ok()) return status_;
  std::string unknown;
  for (const auto& kv : params_) {
    if (!known_.count(kv.first)) unknown += (unknown.empty() ? "" : ", ") + kv.first;
  }
  if (unknown.empty()) return Status::OK();
  std::string known;
  for (const std::string& k : known_) known += (known.empty() ? "" : ", ") + k;
  return Status::InvalidArgument("rule " + type_ + ": unknown parameter(s) " + unknown +
                                 " (known: " + known + ")");
}

}  // namespace tstat::rules
