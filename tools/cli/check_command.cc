// `tstat check RUN [--config rules.json] [--plugin lib.so]... [--strict]`: a unit test for a
// training run. Evaluates the run as it is on disk (normally finished),
// prints every finding and a summary; writes nothing and takes no action.
// Exit codes: 0 clean, 1 findings (or, with --strict, rule warnings such as
// a run without losses or a regex that matched nothing), 2 a usage or config
// error or a run that cannot be read.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "rules/actions.h"
#include "rules/trial_runner.h"
#include "tools/cli/command.h"
#include "tools/cli/rules_source.h"

namespace tstat::cli {
namespace {

struct CheckFlags {
  std::string run;
  RulesSourceFlags rules;
  bool strict = false;
};

int RunCheck(const CheckFlags& f) {
  Result<std::unique_ptr<RulesSource>> source = LoadRulesSource(f.rules);
  if (!source.ok()) {
    ReportError(source.status());
    return kExitUsage;
  }
  rules::LoadedRules* loaded = &source.value()->loaded;
  const std::size_t rule_count = loaded->rules.size();
  rules::TrialRunnerOptions options;
  options.on_warning = [](const std::string& w) { std::cerr << "tstat: warning: " << w << "\n"; };
  Result<std::unique_ptr<rules::TrialRunner>> runner =
      rules::TrialRunner::Open(f.run, std::move(loaded->rules), options);
  if (!runner.ok()) {
    ReportError(runner.status());
    return kExitUsage;
  }
  rules::TrialRunner& r = *runner.value();
  std::uint64_t findings = 0;
  Status ran = r.Run([&](const Finding& finding) {
    ++findings;
    std::cout << rules::FormatFinding(finding) << "\n";
    return Status::OK();
  });
  if (!ran.ok()) {
    ReportError(ran);
    return kExitUsage;
  }
  if (!r.run_closed()) {
    std::cerr << "tstat: warning: " << f.run
              << " is not closed (still being written, or its writer died): checked the "
              << r.steps_fed() << " step(s) on disk\n";
  }
  const std::size_t warnings = r.warnings().size();
  std::cout << "tstat check: " << findings << " finding(s), " << warnings << " warning(s); "
            << rule_count << " rule(s) over " << r.steps_fed() << " step(s) of " << f.run << "\n";
  if (findings > 0) return kExitFailure;
  if (f.strict && warnings > 0) return kExitFailure;
  return kExitOk;
}

}  // namespace

Command AddCheckCommand(CLI::App& root) {
  auto flags = std::make_shared<CheckFlags>();
  CLI::App* app = root.add_subcommand(
      "check",
      "Evaluate the rules over a finished run: print findings; exit 1 on findings, 0 when "
      "clean, 2 on usage/config errors");
  app->add_option("run", flags->run, "The run directory")->required();
  AddRulesSourceOptions(app, &flags->rules);
  app->add_flag("--strict", flags->strict,
                "Rule warnings (no losses, a regex matching nothing, damaged files) fail too");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunCheck(*flags); };
  return c;
}

}  // namespace tstat::cli
