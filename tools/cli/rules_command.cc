// `tstat rules RUN [--config rules.json] [--plugin lib.so]... [--follow]`: runs the rules over a
// run, printing findings as they come, appending them to RUN/findings.jsonl
// and acting on them (RUN/STOP, RUN/capture/); see rules/RUN_RULES.md.
// Exit codes: 0 done (findings or not), 1 the run could not be read while
// following it, 2 a usage or config error or a run that cannot be opened.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "rules/actions.h"
#include "rules/plugin_loader.h"
#include "rules/findings_log.h"
#include "rules/rules_config.h"
#include "rules/trial_runner.h"
#include "tools/cli/command.h"

namespace tstat::cli {
namespace {

struct RulesFlags {
  std::string run;
  std::string config;
  std::vector<std::string> plugins;
  bool follow = false;
  double poll_interval = 0.2;
};

int RunRules(const RulesFlags& f) {
  // Plugins first: destroyed after the registry and the rules they made.
  std::vector<std::shared_ptr<rules::RulePlugin>> plugins;
  RuleRegistry registry;
  if (Status s = RegisterBuiltinRules(&registry); !s.ok()) return ReportError(s);
  Result<std::vector<std::shared_ptr<rules::RulePlugin>>> loaded_plugins =
      rules::LoadRulePlugins(f.plugins, &registry, "--plugin");
  if (!loaded_plugins.ok()) {
    ReportError(loaded_plugins.status());
    return kExitUsage;
  }
  plugins = std::move(loaded_plugins).value();
  Result<rules::LoadedRules> loaded = rules::LoadRules(registry, f.config);
  if (!loaded.ok()) {
    ReportError(loaded.status());
    return kExitUsage;
  }
  rules::TrialRunnerOptions options;
  options.follow = f.follow;
  options.poll_interval_s = f.poll_interval;
  options.on_warning = [](const std::string& w) { std::cerr << "tstat: warning: " << w << "\n"; };
  const auto actions = rules::ActionsByRule(loaded->config);
  Result<std::unique_ptr<rules::TrialRunner>> runner =
      rules::TrialRunner::Open(f.run, std::move(loaded->rules), options);
  if (!runner.ok()) {
    ReportError(runner.status());
    return kExitUsage;
  }
  const std::string log_path = f.run + "/" + rules::kFindingsFileName;
  Result<std::unique_ptr<rules::FindingsLogWriter>> log = rules::FindingsLogWriter::Open(log_path);
  if (!log.ok()) return ReportError(log.status());
  rules::RunDirActionSink sink(f.run);
  rules::ActionRunner::Options ao;
  ao.actions = actions;
  ao.log = log->get();
  ao.sink = &sink;
  ao.print = &std::cout;
  rules::ActionRunner acting(ao);
  std::uint64_t findings = 0;
  Status ran = runner.value()->Run([&](const Finding& finding) {
    ++findings;
    Status s = acting.Handle(finding);
    if (!s.ok()) std::cerr << "tstat: warning: " << s.ToString() << "\n";
    return Status::OK();
  });
  Status closed = log.value()->Close();
  if (!ran.ok()) return ReportError(ran);
  if (!closed.ok()) return ReportError(closed);
  std::cerr << "tstat rules: " << findings << " finding(s) over " << runner.value()->steps_fed()
            << " step(s); findings in " << log_path
            << (acting.stop_requested() ? "; stop requested" : "") << "\n";
  return kExitOk;
}

}  // namespace

Command AddRulesCommand(CLI::App& root) {
  auto flags = std::make_shared<RulesFlags>();
  CLI::App* app = root.add_subcommand(
      "rules",
      "Run the rules over a run: print findings as they come, append them to "
      "RUN/findings.jsonl and act on them (stop training, capture raw snapshots)");
  app->add_option("run", flags->run, "The run directory")->required();
  app->add_option("--config", flags->config,
                  "Rules config (JSON; see rules/RUN_RULES.md). Default: the default rule set")
      ->check(CLI::ExistingFile);
  app->add_option("--plugin", flags->plugins,
                  "A shared library of custom rule types (tstat/rule_plugin.h); repeatable")
      ->allow_extra_args(false);
  app->add_flag("--follow", flags->follow,
                "Follow a live run until its writers close it (else: evaluate what is there)");
  app->add_option("--poll-interval", flags->poll_interval,
                  "Seconds between polls of a live run when nothing new came")
      ->check(CLI::Range(0.001, 3600.0))
      ->default_str("0.2");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunRules(*flags); };
  return c;
}

}  // namespace tstat::cli
