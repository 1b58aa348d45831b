// The built-in rule types' severities, confirmation steps and default set
// (builtin_defaults.h). docs/rules.md ("Out of the box") explains each choice.
#include "rules/engine/builtin_defaults.h"

namespace tstat::rules {

const std::vector<BuiltinDefaults>& AllBuiltinDefaults() {
  using S = Severity;
  // Confirmation (3 judged steps) for per-step conditions that a healthy
  // network can meet for a step or two: zero-initialized layers at step 0,
  // a batch that happens to miss a unit, one update that rounds away.
  static const std::vector<BuiltinDefaults> kDefaults = {
      {"nan_origin", S::kCritical, 1, true, ""},
      {"exploding_tensor", S::kCritical, 1, true, ""},
      {"loss_not_decreasing", S::kCritical, 1, true, ""},
      {"vanishing_gradient", S::kError, 3, true, ""},
      {"dead_relu", S::kError, 3, true, ""},
      {"saturated_activation", S::kError, 2, true, ""},
      {"poor_weight_initialization", S::kError, 1, true, ""},
      {"weight_update_ratio", S::kError, 3, true, ""},
      {"all_zero", S::kError, 3, true, ""},
      {"overfit", S::kError, 1, true, ""},
      {"class_imbalance", S::kWarning, 1, true, ""},
      {"stalled_training", S::kError, 1, true, ""},
      {"unchanged_tensor", S::kError, 1, false,
       "an unchanged weight has an update ratio of 0, which weight_update_ratio reports"},
      {"tensor_variance", S::kWarning, 1, false, "it has no default thresholds"},
      {"check_input_images", S::kWarning, 1, false,
       "its default selection is an MXNet input name, and un-centred inputs train well"},
      {"nlp_sequence_ratio", S::kWarning, 1, false,
       "it needs the padding token id, which only the user knows"},
      {"low_precision_range", S::kWarning, 1, false,
       "it answers a question about fp16/bf16/fp8 (would the values fit?), not a fault of the "
       "run; healthy fp32 gradients underflow fp16"},
      {"norm_spike", S::kWarning, 1, false,
       "a 3-sigma rule fires on healthy minibatch noise; exploding_tensor's growth check "
       "reports divergence"},
      {"overtraining", S::kWarning, 1, false,
       "it fires when training converges, which is not a fault; overfit reports the harmful case"},
      {"underfitting", S::kError, 1, false,
       "loss_not_decreasing reports a loss that does not fall from its start"},
      {"confusion", S::kWarning, 1, false,
       "an untrained model confuses every class, so it fires on every run's first steps"},
      {"similar_across_runs", S::kWarning, 1, false, "it needs another run to compare with"},
      {"stalled_training_rule", S::kError, 1, false, "smdebug's name of stalled_training"},
      {"expression", S::kError, 1, false, "it needs a condition (when)"},
  };
  return kDefaults;
}

const BuiltinDefaults* FindBuiltinDefaults(const std::string& type) {
  for (const BuiltinDefaults& d : AllBuiltinDefaults()) {
    if (type == d.type) return &d;
  }
  return nullptr;
}

}  // namespace tstat::rules
