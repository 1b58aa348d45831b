// Typed access to a rule's smdebug-style string parameters, with errors that
// name the rule and the parameter, and detection of parameters no rule read
// (a typo such as "threshhold" is an error, not a silent default).
// Not thread-safe; used while a rule is being constructed.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tstat/status.h"

namespace tstat::rules {

class ParamReader {
 public:
  // Keeps its own copy of `params`, so a temporary map is fine.
  ParamReader(std::string rule_type, std::map<std::string, std::string> params)
      : type_(std::move(rule_type)), params_(std::move(params)) {}

  // Each getter returns the default when the parameter is absent and records
  // the first error (see status()).
  double Double(const std::string& key, double def);
  std::int64_t Int(const std::string& key, std::int64_t def);
  bool Bool(const std::string& key, bool def);
  std::string String(const std::string& key, const std::string& def);
  // One of `options` ("must be a, b or c, got ..." otherwise; `def` then).
  std::string OneOf(const std::string& key, const std::string& def,
                    const std::vector<std::string>& options);
  // "a,b,c" -> {"a","b","c"} (spaces trimmed, empty items dropped).
  std::vector<std::string> List(const std::string& key, const std::vector<std::string>& def);
  std::vector<double> DoubleList(const std::string& key, const std::vector<double>& def);
  bool Has(const std::string& key) const { return params_.count(key) != 0; }

  // Requires lo <= value (and value <= hi), naming the parameter otherwise.
  void CheckRange(const std::string& key, double value, double lo, double hi);

  // The first error, or kInvalidArgument naming every parameter that no getter
  // asked for (with the known ones listed).
  Status Finish() const;

 private:
  void Fail(const std::string& key, const std::string& what);
  const std::string* Raw(const std::string& key);

  std::string type_;
  const std::map<std::string, std::string> params_;
  std::set<std::string> known_;
  Status status_;
};

// Splits "a, b,,c" into {"a","b","c"}.
std::vector<std::string> SplitList(const std::string& s);

}  // namespace tstat::rules
