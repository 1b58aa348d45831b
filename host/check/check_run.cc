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
  TSTAT_ASSIGN_OR_RETURN(
      rules::RulesConfig config,
      rules::ChooseRulesConfig(registry, options.config_json, options.config_file));
  TSTAT_ASSIGN_OR_RETURN(rules::RulesConfig chosen,
                         rules::WithoutRules(std::move(config), options.disable, "disable"));
  Result<std::vector<std::unique_ptr<Rule>>> created = rules::CreateRules(registry, chosen);
  if (!created.ok()) {
    // A file's entries are named with the file (as tstat check always did).
    const bool from_file = options.config_json.empty() && !options.config_file.empty();
    return from_file ? created.status().WithContext(options.config_file) : created.status();
  }
  CheckReport report;
  report.rules = created->size();
  rules::TrialRunnerOptions runner_options;
  runner_options.trial.isolate_segment_reads = true;
  runner_options.on_warning = options.on_warning;
  TSTAT_ASSIGN_OR_RETURN(
      std::unique_ptr<rules::TrialRunner> runner,
      rules::TrialRunner::Open(run_dir, std::move(created).value(), runner_options));
  TSTAT_RETURN_IF_ERROR(runner->Run([&report](const Finding&) {
    ++report.findings;
    return Status::OK();
  }));
  report.episodes = runner->engine().episodes();
  report.warnings = runner->warnings();
  report.notes = runner->notes();
  report.steps = runner->steps_fed();
  report.run_closed = runner->run_closed();
  return report;
}

}  // namespace tstat
