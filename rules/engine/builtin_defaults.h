// The defaults of each built-in rule type that are not parameters: its
// severity, how many judged steps in a row its condition must hold before an
// episode opens, and whether it belongs to the default rule set (the rules
// that run when no rules config is given), with the reason when it does not.
// Thread safety: constant data.
#pragma once

#include <string>
#include <vector>

#include "tstat/rule.h"

namespace tstat::rules {

struct BuiltinDefaults {
  const char* type;
  Severity severity;
  int confirm_steps;
  bool in_default_set;
  const char* note;  // out of the default set: why
};

// Every built-in type, default-set members first (in the order they run).
const std::vector<BuiltinDefaults>& AllBuiltinDefaults();
// The entry of `type`, or null for a type that is not built in.
const BuiltinDefaults* FindBuiltinDefaults(const std::string& type);

}  // namespace tstat::rules
