# Tests of the built-in tensor rules (rules/tensor/, docs/rules.md).
tstat_add_test(rules tensor_rules
               SOURCES tensor_rules_basic_test.cc tensor_rules_update_test.cc
                       tensor_rules_channel_test.cc skipped_updates_test.cc
               LIBS tstat_rules)
