# The built-in tensor rules (statistics of weights, gradients, activations and
# inputs): one file per rule, their shared frame, and RegisterTensorRules.
list(APPEND TSTAT_RULES_TENSOR_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/tensor_rule.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/register_tensor_rules.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/vanishing_gradient.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/exploding_tensor.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/all_zero.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/tensor_variance.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/unchanged_tensor.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/weight_update_ratio.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/poor_weight_initialization.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/dead_relu.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/saturated_activation.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/check_input_images.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/nlp_sequence_ratio.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/nan_origin.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/low_precision_range.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin/norm_spike.cc
)
