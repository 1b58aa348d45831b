# Tests of the run-level rules (rules/run/), the rules config, the
# findings log, the actions, the trial runner and the `tstat rules` / `tstat
# check` commands (docs/rules.md).
tstat_add_test(rules run_rules
               SOURCES loss_rules_test.cc fit_rules_test.cc label_rules_test.cc run_level_rules_test.cc
               LIBS tstat_rules tstat_io_test_util)
tstat_add_test(rules rules_config
               SOURCES rules_config_test.cc findings_actions_test.cc episodes_test.cc
               LIBS tstat_rules tstat_io_test_util)
tstat_add_test(rules trial_runner SOURCES trial_runner_test.cc
               LIBS tstat_rules tstat_io_test_util)
if(TARGET tstat_cli)
  tstat_add_test(rules cli SOURCES rules_cli_test.cc LIBS tstat_rules tstat_io_test_util)
  target_compile_definitions(tstat_test_rules_cli PRIVATE
                             TSTAT_CLI_PATH="$<TARGET_FILE:tstat_cli>")
  add_dependencies(tstat_test_rules_cli tstat_cli)
endif()
