// `tstat demo [--out DIR] [--scenario NAME]... [--steps N] [--quick] [--json]
// [--force]`: trains small LibTorch models on the digits dataset, healthy and
// with injected faults, with the default configuration (rules on; tools/demo/),
// and prints what the rules found, when, and how many steps auto-stop saved.
// Exit codes: 0 every scenario behaved as expected (faults found, healthy
// clean); 1 a scenario did not, or the demo failed; 2 usage errors (an unknown
// scenario, an existing --out without --force).
// Compiled only when LibTorch is found (demo_unavailable.cc otherwise).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "io/h5/posix_file.h"
#include "tools/cli/command.h"
#include "tools/demo/demo_runner.h"
#include "tools/demo/report.h"
#include "tools/report/report_data.h"
#include "tools/report/report_page.h"

namespace tstat::cli {
namespace {

struct DemoFlags {
  demo::DemoOptions options;
  bool json = false;
};

int RunDemoCommand(const DemoFlags& f) {
  // Refuse bad input before any training starts.
  Result<std::vector<demo::Scenario>> scenarios = demo::SelectScenarios(f.options.scenarios);
  if (!scenarios.ok()) {
    ReportError(scenarios.status());
    return kExitUsage;
  }
  if (Status s = demo::PrepareOutDir(f.options.out_dir, f.options.force, *scenarios); !s.ok()) {
    ReportError(s);
    return s.code() == StatusCode::kIoError ? kExitFailure : kExitUsage;
  }
  demo::DemoOptions options = f.options;
  options.force = true;  // PrepareOutDir above already judged the directory
  demo::DemoCallbacks callbacks;
  callbacks.note = [&f](const std::string& note) {
    (f.json ? std::cerr : std::cout) << "tstat demo: " << note << "\n";
  };
  callbacks.result = [&f](const demo::ScenarioResult& r) {
    if (f.json) {
      std::cout << demo::ResultJson(r) << std::endl;
    } else {
      std::cerr << "tstat demo: " << r.scenario << " done (" << r.steps_run << "/"
                << r.steps_planned << " steps, " << r.found.size() << " rule(s) fired)\n";
    }
  };
  Result<std::vector<demo::ScenarioResult>> results = demo::RunDemo(options, callbacks);
  if (!results.ok()) return ReportError(results.status());
  bool all_passed = true;
  for (const demo::ScenarioResult& r : *results) all_passed = all_passed && r.passed();
  // A report of each scenario beside its run (OUT/<scenario>.html).
  std::vector<std::string> reports;
  for (const demo::ScenarioResult& r : *results) {
    const std::string run = f.options.out_dir + "/" + r.scenario;
    const std::string page = f.options.out_dir + "/" + r.scenario + ".html";
    Status written = report::PageAvailable();
    if (written.ok()) {
      Result<std::string> data = report::BuildReportJson({run});
      written = data.ok() ? io::WriteFileAtomically(
                                page, report::BuildPage("tstat demo: " + r.scenario, *data))
                          : data.status();
    }
    if (written.ok()) {
      reports.push_back(page);
    } else {
      std::cerr << "tstat demo: no report of " << r.scenario << ": " << written.ToString() << "\n";
    }
  }
  if (!f.json) {
    std::cout << "\n";
    demo::PrintTable(*results, std::cout);
    std::cout << "\nruns are in " << f.options.out_dir << "/<scenario>; judge one again with: "
              << "tstat check " << f.options.out_dir << "/<scenario>\n";
    if (!reports.empty()) {
      std::cout << "reports (open in a browser): " << f.options.out_dir << "/<scenario>.html, e.g. "
                << reports.front() << "\n";
    }
  }
  if (!all_passed) {
    std::cerr << "tstat demo: some scenarios did not behave as expected (see the table)\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

Command AddDemoCommand(CLI::App& root) {
  auto flags = std::make_shared<DemoFlags>();
  CLI::App* app = root.add_subcommand(
      "demo",
      "Train small LibTorch models on the digits, healthy and with injected faults; show what "
      "the rules find and how much auto-stop saves");
  app->add_option("--out", flags->options.out_dir, "Directory for the runs (one per scenario)")
      ->capture_default_str();
  app->add_option(
      "--scenario", flags->options.scenarios,
      "Run only this scenario (repeatable). Valid: " + JoinNames(demo::ScenarioNames()));
  app->add_option("--steps", flags->options.steps, "Planned training steps per scenario")
      ->check(CLI::PositiveNumber);
  app->add_flag("--quick", flags->options.quick, "A short plan (for tests)");
  app->add_option("--dataset", flags->options.dataset_path,
                  "The digits CSV (gzip); when missing, a synthetic stand-in is used")
      ->capture_default_str();
  app->add_flag("--json", flags->json, "One JSON object per line per scenario");
  app->add_flag("--force", flags->options.force,
                "Replace the demo runs in an existing --out directory");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunDemoCommand(*flags); };
  return c;
}

}  // namespace tstat::cli
