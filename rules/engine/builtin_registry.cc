// RegisterBuiltinRules: adds both groups of built-in rules to a registry.
#include "rules/engine/builtin_groups.h"
#include "tstat/rule.h"

namespace tstat {

Status RegisterBuiltinRules(RuleRegistry* registry) {
  if (registry == nullptr) return Status::InvalidArgument("registry is null");
  TSTAT_RETURN_IF_ERROR(rules::RegisterTensorRules(registry));
  TSTAT_RETURN_IF_ERROR(rules::RegisterRunRules(registry));
  return Status::OK();
}

}  // namespace tstat
