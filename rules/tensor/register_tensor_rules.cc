// RegisterTensorRules: adds the built-in tensor rules (statistics of weights,
// gradients, activations and inputs) to a registry under their smdebug names.
#include <utility>

#include "rules/engine/builtin_groups.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {

Status RegisterTensorRules(RuleRegistry* registry) {
  if (registry == nullptr) return Status::InvalidArgument("registry is null");
  const std::pair<const char*, RuleFactory> kRules[] = {
      {"vanishing_gradient", CreateVanishingGradientRule},
      {"exploding_tensor", CreateExplodingTensorRule},
      {"all_zero", CreateAllZeroRule},
      {"tensor_variance", CreateTensorVarianceRule},
      {"unchanged_tensor", CreateUnchangedTensorRule},
      {"weight_update_ratio", CreateWeightUpdateRatioRule},
      {"poor_weight_initialization", CreatePoorWeightInitializationRule},
      {"dead_relu", CreateDeadReluRule},
      {"saturated_activation", CreateSaturatedActivationRule},
      {"check_input_images", CreateCheckInputImagesRule},
      {"nlp_sequence_ratio", CreateNlpSequenceRatioRule},
      {"nan_origin", CreateNanOriginRule},
      {"low_precision_range", CreateLowPrecisionRangeRule},
      {"norm_spike", CreateNormSpikeRule},
  };
  for (const auto& [type, factory] : kRules) {
    TSTAT_RETURN_IF_ERROR(registry->Register(type, factory));
  }
  return Status::OK();
}

}  // namespace tstat::rules
