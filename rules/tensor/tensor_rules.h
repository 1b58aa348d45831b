// Factories of the built-in tensor rules, one per rules/tensor/<rule>.cc.
// Each reads the spec's smdebug-style parameters (unknown or mistyped ones are
// kInvalidArgument naming them), compiles the selection and returns the rule.
// Semantics of every rule: docs/rules.md.
#pragma once

#include <memory>

#include "tstat/rule.h"

namespace tstat::rules {

Result<std::unique_ptr<Rule>> CreateVanishingGradientRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateExplodingTensorRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateAllZeroRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateTensorVarianceRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateUnchangedTensorRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateWeightUpdateRatioRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreatePoorWeightInitializationRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateDeadReluRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateSaturatedActivationRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateCheckInputImagesRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateNlpSequenceRatioRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateNanOriginRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateLowPrecisionRangeRule(const RuleSpec& spec);
Result<std::unique_ptr<Rule>> CreateNormSpikeRule(const RuleSpec& spec);

}  // namespace tstat::rules
