// A plugin built against a tstat whose rule interface had no version: the
// entry point without tstat_rule_plugin_abi (written out, not with
// TSTAT_RULE_PLUGIN_ENTRY). Loading it must be a clear error, never a call
// into rules that lack the functions tstat calls.
#include "tstat/rule_plugin.h"

extern "C" __attribute__((visibility("default"))) tstat::Status tstat_register_rules(
    tstat::RuleRegistry* registry) {
  (void)registry;
  return tstat::Status::OK();
}
