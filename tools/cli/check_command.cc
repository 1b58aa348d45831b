// `tstat check RUN [--config rules.json] [--plugin lib.so]... [--strict] [--fail-on LEVEL]
// [--json]`: a unit test for a training run. Evaluates the run as it is on
// disk (normally finished), prints one line per episode (rules/engine/episodes.h)
// and a summary, or with --json one object: {"run", "rules", "steps",
// "findings", "failing", "fail_on", "episodes": [episode_json.h],
// "warnings": [...]}; writes nothing and takes no action.
// Exit codes: 0 clean, 1 an episode at or above --fail-on (default: any; or,
// with --strict, rule warnings such as a run without losses or a regex that
// matched nothing), 2 a usage or config error or a run that cannot be read.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "rules/runtime/actions.h"
#include "tools/cli/command.h"
#include "tools/cli/episode_json.h"
#include "tools/cli/rules_source.h"
#include "tools/cli/text_format.h"
#include "tstat/check.h"

namespace tstat::cli {
namespace {

struct CheckFlags {
  std::string run;
  RulesSourceFlags rules;
  bool strict = false;
  std::string fail_on = "info";
  bool json = false;
};

int RunCheck(const CheckFlags& f) {
  Severity fail_on;
  if (!ParseSeverity(f.fail_on, &fail_on)) {
    ReportError(Status::InvalidArgument("--fail-on: \"" + f.fail_on +
                                        "\" is not one of info, warning, error, critical"));
    return kExitUsage;
  }
  CheckOptions options;
  options.config_file = f.rules.config;
  options.plugins = f.rules.plugins;
  options.plugins_field = "--plugin";
  options.on_warning = [](const std::string& w) { std::cerr << "tstat: warning: " << w << "\n"; };
  Result<CheckReport> checked = CheckRun(f.run, options);
  if (!checked.ok()) {
    ReportError(checked.status());
    return kExitUsage;
  }
  const CheckReport& r = checked.value();
  const std::size_t rule_count = r.rules;
  const std::uint64_t findings = r.findings;
  if (!r.run_closed) {
    std::cerr << "tstat: warning: " << f.run
              << " is not closed (still being written, or its writer died): checked the " << r.steps
              << " step(s) on disk\n";
  }
  std::uint64_t failing = 0;
  const std::vector<Episode>& episodes = r.episodes;
  for (const Episode& e : episodes) {
    if (!f.json) std::cout << rules::FormatEpisode(e) << "\n";
    if (e.severity >= fail_on) ++failing;
  }
  const std::size_t warnings = r.warnings.size();
  if (f.json) {
    std::cout << "{\"run\": " << JsonString(f.run) << ", \"rules\": " << rule_count
              << ", \"steps\": " << r.steps << ", \"findings\": " << findings
              << ", \"failing\": " << failing
              << ", \"fail_on\": " << JsonString(SeverityName(fail_on)) << ",\n \"episodes\": [";
    for (std::size_t i = 0; i < episodes.size(); ++i) {
      std::cout << (i ? ",\n   " : "\n   ") << EpisodeJson(episodes[i]);
    }
    std::cout << "],\n \"warnings\": [";
    for (std::size_t i = 0; i < r.warnings.size(); ++i) {
      std::cout << (i ? ", " : "") << JsonString(r.warnings[i]);
    }
    std::cout << "],\n \"notes\": [";
    for (std::size_t i = 0; i < r.notes.size(); ++i) {
      std::cout << (i ? ", " : "") << JsonString(r.notes[i]);
    }
    std::cout << "]}\n";
  } else {
    for (const std::string& n : r.notes) std::cerr << "tstat: note: " << n << "\n";
    std::cout << "tstat check: " << episodes.size() << " episode(s) (" << failing << " at or above "
              << SeverityName(fail_on) << ") of " << findings << " finding(s), " << warnings
              << " warning(s); " << rule_count << " rule(s) over " << r.steps << " step(s) of "
              << f.run << "\n";
  }
  if (failing > 0) return kExitFailure;
  if (r.steps == 0) {
    // Nothing judged is not a pass: a run whose segments are all gone or
    // damaged, or a wrong directory.
    std::cerr << "tstat: error: " << f.run << " holds no step to judge\n";
    return kExitUsage;
  }
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
  app->add_option("--fail-on", flags->fail_on,
                  "Exit 1 on episodes of this severity or above (info, warning, error, critical)")
      ->default_str("info");
  app->add_flag("--json", flags->json,
                "Print one JSON object (episodes, warnings) instead of lines");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunCheck(*flags); };
  return c;
}

}  // namespace tstat::cli
