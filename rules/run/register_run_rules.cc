// RegisterRunRules: the run-level built-in rule types (rules/engine/builtin_groups.h).
#include "rules/engine/builtin_groups.h"
#include "rules/run/run_rules.h"

namespace tstat::rules {

Status RegisterRunRules(RuleRegistry* registry) {
  if (registry == nullptr) return Status::InvalidArgument("registry is null");
  const std::pair<const char*, RuleFactory> kTypes[] = {
      {"loss_not_decreasing", run::MakeLossNotDecreasing},
      {"overfit", run::MakeOverfit},
      {"overtraining", run::MakeOvertraining},
      {"underfitting", run::MakeUnderfitting},
      {"class_imbalance", run::MakeClassImbalance},
      {"confusion", run::MakeConfusion},
      {"similar_across_runs", run::MakeSimilarAcrossRuns},
      {"stalled_training", run::MakeStalledTraining},
      // smdebug's name of the same rule (StalledTrainingRule).
      {"stalled_training_rule", run::MakeStalledTraining},
      {"expression", run::MakeExpressionRule},
  };
  for (const auto& [type, factory] : kTypes) {
    TSTAT_RETURN_IF_ERROR(registry->Register(type, factory));
  }
  return Status::OK();
}

}  // namespace tstat::rules
