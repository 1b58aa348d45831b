# The run-level rules (losses, labels, other runs, wall clock, expressions),
# the rules config, the findings log, the actions and the trial runner.
# Included by rules/CMakeLists.txt before tstat_rules is created.
list(APPEND TSTAT_RULES_RUN_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/class_imbalance.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/confusion.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/expression_rule.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/loss_not_decreasing.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/loss_source.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/overfit.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/overtraining.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/register_run_rules.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/similar_across_runs.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/stalled_training.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/builtin_run/underfitting.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/actions.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/findings_log.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/rules_config.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/rules_summary.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/trial_runner.cc
)

