// tstat::CheckRun (tstat/check.h): the registry, the config and a TrialRunner
// over the run, once.
#include <memory>
#include <utility>

#include "rules/engine/plugin_loader.h"
#include "rules/engine/rules_config.h"
#include "rules/runtime/trial_runner.h"
#include "tstat/check.h"

namespace tstat {

Result<CheckReport> CheckRun(const std::string& run_dir, const CheckOptions& options) {
  // Declared first, destroyed last: the rules the plugins made go before them.
  std::vector<std::shared_ptr<rules::RulePlugin>> plugins;
  RuleRegistry registry;
  TSTAT_RETURN_IF_ERROR(RegisterBuiltinRules(&registry));
  TSTAT_ASSIGN_OR_RETURN(plugins,
                         rules::LoadRulePlugins(options.plugins, &registry, options.plugins_field));
  Result<rules::RulesConfig> config = rules::RulesConfig();
  if (!options.config_json.empty()) {
    config = rules::ParseRulesConfigJson(options.config_json, &registry);
  } else if (!options.config_file.empty()) {
    config = rules::LoadRulesConfigFile(options.config_file, &registry);
  } else {
    config = rules::DefaultRulesConfig(registry);
  }
  if (!config.ok()) return config.status();
  TSTAT_ASSIGN_OR_RETURN(
      rules::RulesConfig chosen,
      rules::WithoutRules(std::move(config).value(), options.disable, "disable"));
  TSTAT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Rule>> created,
                         rules::CreateRules(registry, chosen));
  CheckReport report;
  report.rules = created.size();
  rules::TrialRunnerOptions runner_options;
  runner_options.trial.isolate_segment_reads = true;
  runner_options.on_warning = options.on_warning;
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<rules::TrialRunner> runner,
                         rules::TrialRunner::Open(run_dir, std::move(created), runner_options));
  TSTAT_RETURN_IF_ERROR(runner->Run([&report](const Finding&) {
    ++report.findings;
    return Status::OK();
  }));
  report.episodes = runner->engine().episodes();
  report.warnings = runner->warnings();
  report.steps = runner->steps_fed();
  report.run_closed = runner->run_closed();
  return report;
}

}  // namespace tstat
