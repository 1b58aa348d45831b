// The two groups of built-in rules (see rules/CMakeLists.txt).
#pragma once

#include "tstat/rule.h"

namespace tstat::rules {

// vanishing_gradient, exploding_tensor, all_zero, tensor_variance,
// unchanged_tensor, weight_update_ratio, poor_weight_initialization,
// dead_relu, saturated_activation, check_input_images, nlp_sequence_ratio,
// nan_origin, low_precision_range, norm_spike.
Status RegisterTensorRules(RuleRegistry* registry);

// loss_not_decreasing, overfit, overtraining, underfitting, class_imbalance,
// confusion, similar_across_runs, stalled_training, and "expression" rules.
Status RegisterRunRules(RuleRegistry* registry);

}  // namespace tstat::rules
