# Tests of in-process rules, out-of-process stop and rule plugins
# (host/pipeline/rules_thread.h, host/pipeline/run_dir_requests.h, rules/engine/plugin_loader.h).
# The test plugins link no tstat library (--no-undefined proves it needs none).
add_library(tstat_test_rule_plugin MODULE test_rule_plugin.cc)
target_link_libraries(tstat_test_rule_plugin PRIVATE tstat_headers tstat_warnings)
target_link_options(tstat_test_rule_plugin PRIVATE -Wl,--no-undefined)
add_library(tstat_test_rule_plugin_noentry MODULE test_rule_plugin_noentry.cc)
add_library(tstat_test_rule_plugin_unversioned MODULE test_rule_plugin_unversioned.cc)
target_link_libraries(tstat_test_rule_plugin_unversioned PRIVATE tstat_headers tstat_warnings)
set(TSTAT_TEST_PLUGIN_DEFS
    TSTAT_TEST_RULE_PLUGIN="$<TARGET_FILE:tstat_test_rule_plugin>"
    TSTAT_TEST_RULE_PLUGIN_NOENTRY="$<TARGET_FILE:tstat_test_rule_plugin_noentry>"
    TSTAT_TEST_RULE_PLUGIN_UNVERSIONED="$<TARGET_FILE:tstat_test_rule_plugin_unversioned>")

tstat_add_test(rules inprocess SOURCES rules_inprocess_test.cc LIBS tstat_rules tstat_io_test_util)
# What the default rules make a session capture, and its rules summary.
tstat_add_test(rules needs SOURCES rules_needs_test.cc LIBS tstat_rules tstat_io_test_util)
target_compile_definitions(tstat_test_rules_inprocess PRIVATE ${TSTAT_TEST_PLUGIN_DEFS})
add_dependencies(tstat_test_rules_inprocess tstat_test_rule_plugin tstat_test_rule_plugin_noentry
                 tstat_test_rule_plugin_unversioned)
# Under ThreadSanitizer too (tools/dev.sh test): the rules thread fed by the
# pipeline, EndStep waiting for it, stop requests across threads.
tstat_tsan_tests(rules inprocess)

add_executable(tstat_rules_stepper rules_stepper.cc)
target_link_libraries(tstat_rules_stepper PRIVATE tstat::tstat tstat_warnings)
if(TARGET tstat_cli)
  tstat_add_test(rules live SOURCES rules_live_test.cc LIBS tstat_rules tstat_io_test_util)
  target_compile_definitions(tstat_test_rules_live PRIVATE ${TSTAT_TEST_PLUGIN_DEFS}
                             TSTAT_CLI_PATH="$<TARGET_FILE:tstat_cli>"
                             TSTAT_RULES_STEPPER="$<TARGET_FILE:tstat_rules_stepper>")
  add_dependencies(tstat_test_rules_live tstat_cli tstat_rules_stepper tstat_test_rule_plugin
                   tstat_test_rule_plugin_noentry)
  set_tests_properties(tstat.rules.live PROPERTIES TIMEOUT 120)
endif()

# Delta capture of CUDA tensors (host/device/device_delta.h): the device-side
# bookkeeping, on the CPU with a fake device memory.
tstat_add_test(host device_delta SOURCES ${PROJECT_SOURCE_DIR}/tests/host/device_delta_test.cc)
# The training side of RUN/STOP and RUN/capture/ (host/pipeline/run_dir_requests.h).
tstat_add_test(host run_dir_requests
               SOURCES ${PROJECT_SOURCE_DIR}/tests/host/run_dir_requests_test.cc
               LIBS tstat_io_test_util)
