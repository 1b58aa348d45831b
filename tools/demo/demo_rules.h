// The rules every demo scenario runs, healthy included: built-in rules with
// smdebug's names and parameters, each with the stop_training action so a
// finding ends the run early. One config for every scenario, so a rule that
// fires on a fault is the same rule that stays quiet on the healthy run.
// Thread safety: pure functions.
#pragma once

#include <string>

namespace tstat::demo {

// The JSON form of the rules config (rules/rules_config.h, RUN_RULES.md).
std::string DemoRulesJson();

}  // namespace tstat::demo
