// `tstat rules RUN [--config rules.json] [--plugin lib.so]... [--follow] [--stop-on LEVEL]`:
// runs the rules over a run, printing one line per episode as it opens,
// appending episode events to RUN/findings.jsonl and acting on them
// (RUN/STOP, RUN/capture/); see docs/rules.md.
// Exit codes: 0 done (findings or not), 1 the run could not be read while
// following it, 2 a usage or config error or a run that cannot be opened.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "rules/runtime/actions.h"
#include "rules/runtime/findings_log.h"
#include "rules/runtime/trial_runner.h"
#include "tools/cli/cli_trial_options.h"
#include "tools/cli/command.h"
#include "tools/cli/rules_source.h"

namespace tstat::cli {
namespace {

struct RulesFlags {
  std::string run;
  RulesSourceFlags rules;
  bool follow = false;
  double poll_interval = 0.2;
  std::string stop_on = "critical";
};

int RunRules(const RulesFlags& f) {
  Result<std::unique_ptr<RulesSource>> source = LoadRulesSource(f.rules);
  if (!source.ok()) {
    ReportError(source.status());
    return kExitUsage;
  }
  rules::LoadedRules* loaded = &source.value()->loaded;
  rules::TrialRunnerOptions options;
  options.trial = CliTrialOptions();
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
  if (!rules::StopPolicy::Parse(f.stop_on, &ao.stop)) {
    ReportError(Status::InvalidArgument("--stop-on: \"" + f.stop_on +
                                        "\" is not one of critical, error, warning, info, never"));
    return kExitUsage;
  }
  rules::ActionRunner acting(ao);
  std::uint64_t findings = 0, episodes = 0;
  auto count = [&findings](const Finding&) {
    ++findings;
    return Status::OK();
  };
  Status ran = runner.value()->Run(count, [&](const rules::EpisodeEvent& e) {
    if (e.kind == rules::EpisodeEvent::Kind::kOpen) ++episodes;
    Status s = acting.Handle(e);
    if (!s.ok()) std::cerr << "tstat: warning: " << s.ToString() << "\n";
    return Status::OK();
  });
  Status closed = log.value()->Close();
  if (!ran.ok()) return ReportError(ran);
  if (!closed.ok()) return ReportError(closed);
  std::cerr << "tstat rules: " << episodes << " episode(s) of " << findings << " finding(s) over "
            << runner.value()->steps_fed() << " step(s); findings in " << log_path
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
  AddRulesSourceOptions(app, &flags->rules);
  app->add_flag("--follow", flags->follow,
                "Follow a live run until its writers close it (else: evaluate what is there)");
  app->add_option("--poll-interval", flags->poll_interval,
                  "Seconds between polls of a live run when nothing new came")
      ->check(CLI::Range(0.001, 3600.0))
      ->default_str("0.2");
  app->add_option("--stop-on", flags->stop_on,
                  "Write RUN/STOP on episodes of this severity or above (critical, error, warning, "
                  "info), or never; a rule's stop_training action overrides it")
      ->default_str("critical");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunRules(*flags); };
  return c;
}

}  // namespace tstat::cli
