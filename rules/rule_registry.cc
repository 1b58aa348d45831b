// RuleRegistry: an explicit map from rule type to factory.
#include "tstat/rule.h"

namespace tstat {

Status RuleRegistry::Register(const std::string& type, RuleFactory factory) {
  if (type.empty()) return Status::InvalidArgument("rule type must not be empty");
  if (!factory) return Status::InvalidArgument("rule type " + type + ": factory is empty");
  if (!factories_.emplace(type, std::move(factory)).second) {
    return Status::InvalidArgument("rule type " + type + " is already registered");
  }
  return Status::OK();
}

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
