// RuleRegistry: an explicit map from rule type to factory (Register and
// Absorb are inline in tstat/rule.h).
#include "tstat/rule.h"

namespace tstat {

Result<std::unique_ptr<Rule>> RuleRegistry::Create(const RuleSpec& spec) const {
  auto it = factories_.find(spec.type);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& kv : factories_) known += (known.empty() ? "" : ", ") + kv.first;
    return Status::NotFound("unknown rule type \"" + spec.type + "\" (known: " + known + ")");
  }
  return it->second(spec);
}

std::vector<std::string> RuleRegistry::types() const {
  std::vector<std::string> out;
  for (const auto& kv : factories_) out.push_back(kv.first);
  return out;
}

}  // namespace tstat
