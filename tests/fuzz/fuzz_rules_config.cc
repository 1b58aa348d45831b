// Fuzz target: the rules config (JSON), parsed and turned into rules as the
// in-process rules thread and `tstat check --config` do.
#include "rules/engine/rules_config.h"
#include "tests/fuzz/fuzz_target.h"
#include "tstat/rule.h"

namespace {

const tstat::RuleRegistry& Builtins() {
  static const tstat::RuleRegistry* registry = [] {
    auto* r = new tstat::RuleRegistry;
    if (!tstat::RegisterBuiltinRules(r).ok()) __builtin_trap();
    return r;
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const tstat::RuleRegistry& registry = Builtins();
  tstat::Result<tstat::rules::RulesConfig> config =
      tstat::rules::ParseRulesConfigJson(tstat::fuzz::AsText(data, size), &registry);
  if (config.ok()) (void)tstat::rules::CreateRules(registry, *config);
  return 0;
}
