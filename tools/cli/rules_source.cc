#include "tools/cli/rules_source.h"

#include <utility>

namespace tstat::cli {

void AddRulesSourceOptions(CLI::App* app, RulesSourceFlags* flags) {
  app->add_option("--config", flags->config,
                  "Rules config (JSON; see docs/rules.md). Default: the default rule set")
      ->check(CLI::ExistingFile);
  app->add_option("--plugin", flags->plugins,
                  "A shared library of custom rule types (tstat/rule_plugin.h); repeatable")
      ->allow_extra_args(false);
}

Result<std::unique_ptr<RulesSource>> LoadRulesSource(const RulesSourceFlags& flags) {
  auto source = std::make_unique<RulesSource>();
  TSTAT_RETURN_IF_ERROR(RegisterBuiltinRules(&source->registry));
  TSTAT_ASSIGN_OR_RETURN(source->plugins,
                         rules::LoadRulePlugins(flags.plugins, &source->registry, "--plugin"));
  TSTAT_ASSIGN_OR_RETURN(source->loaded, rules::LoadRules(source->registry, flags.config));
  return source;
}

}  // namespace tstat::cli
