// Factories of the run-level built-in rules (registered by RegisterRunRules,
// rules/engine/builtin_groups.h) and the construction pattern they share.
//
// Every rule class R is constructed as R(spec, &params, &error): it reads its
// parameters through the ParamReader (which reports mistyped and unknown
// ones) and may set `error` for a value no getter can check (an enum, a
// path). Then R::Init() validates the rest (regexes, expressions, files).
// Thread safety: factories are pure; rules are driven by one thread.
#pragma once

#include <memory>

#include "rules/engine/param_reader.h"
#include "tstat/rule.h"

namespace tstat::rules::run {

// Rules that look at every tensor when the spec selects none: the selection
// becomes tensor_regex ".*".
inline RuleSpec SelectAllWhenUnset(RuleSpec spec) {
  if (spec.collection_names.empty() && spec.tensor_regex.empty()) spec.tensor_regex = ".*";
  return spec;
}

template <class R>
Result<std::unique_ptr<Rule>> BuildRule(const RuleSpec& spec) {
  ParamReader params(spec.type, spec.parameters);
  Status error;
  auto rule = std::make_unique<R>(spec, &params, &error);
  TSTAT_RETURN_IF_ERROR(params.Finish());
  TSTAT_RETURN_IF_ERROR(error);
  TSTAT_RETURN_IF_ERROR(rule->Init());
  return std::unique_ptr<Rule>(std::move(rule));
}

Result<std::unique_ptr<Rule>> MakeLossNotDecreasing(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeOverfit(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeOvertraining(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeUnderfitting(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeClassImbalance(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeConfusion(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeSimilarAcrossRuns(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeStalledTraining(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> MakeExpressionRule(const RuleSpec& spec);

}  // namespace tstat::rules::run
