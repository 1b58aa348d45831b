// CheckRun: the rules over a run on disk, once - what `tstat check` does, for
// programs (the Python package's tstat.rules.check).
//
//   tstat::CheckOptions options;
//   options.config_json = R"({"rules": [{"type": "exploding_tensor"}]})";
//   tstat::CheckReport report = tstat::CheckRun("/runs/exp1", options).value();
//   for (const tstat::Episode& e : report.episodes) ...
//
// The run is read as it is (a run still being written: the steps on disk);
// each segment's metadata is parsed in a child process first, so a crafted
// file cannot end the caller. Nothing is written and no action is taken.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tstat/export.h"
#include "tstat/rule.h"
#include "tstat/status.h"

namespace tstat {

struct CheckOptions {
  std::string config_json;                // a rules config (docs/rules.md "The rules config"), or
  std::string config_file;                // a file holding one; neither: the default rule set
  std::vector<std::string> plugins;       // shared libraries of custom rule types
  std::string plugins_field = "plugins";  // what errors call them ("plugins[1]: ...")
  std::vector<std::string> disable;       // rules of the set that do not run
  // Called once per distinct warning as it arises (also in CheckReport).
  std::function<void(const std::string&)> on_warning;
};

struct CheckReport {
  std::vector<Episode> episodes;      // in opening order, each in its last state
  std::vector<std::string> warnings;  // damaged files; rules that could not judge
  std::vector<std::string> notes;     // what rules recognised and did not report
  std::int64_t steps = 0;             // global steps judged
  std::uint64_t findings = 0;
  std::size_t rules = 0;
  bool run_closed = false;  // every writer closed the run cleanly
};

// kNotFound when `run_dir` holds no run; kInvalidArgument naming the field
// for a bad config; a plugin that cannot be loaded names it.
TSTAT_EXPORT Result<CheckReport> CheckRun(const std::string& run_dir,
                                          const CheckOptions& options = {});

}  // namespace tstat
