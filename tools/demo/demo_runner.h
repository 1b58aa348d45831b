// `tstat demo` without the command line: picks the scenarios, prepares the
// output directory (never overwriting one silently), loads the dataset and
// runs each scenario into <out_dir>/<scenario>.
// Thread safety: one demo at a time per process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/demo/scenario.h"
#include "tools/demo/trainer.h"
#include "tstat/status.h"

namespace tstat::demo {

struct DemoOptions {
  std::string out_dir = "runs/demo";
  std::vector<std::string> scenarios;  // empty = all
  std::int64_t steps = 0;              // > 0: planned TRAIN steps per scenario
  bool quick = false;                  // the short plan (tests)
  bool force = false;                  // replace the runs of an existing out_dir
  std::string dataset_path = kDigitsCsvPath;
};

// The scenarios named (in the given order, duplicates dropped), or all.
// kInvalidArgument naming the unknown one and listing the valid names.
Result<std::vector<Scenario>> SelectScenarios(const std::vector<std::string>& names);

// Creates out_dir. When it exists: kFailedPrecondition unless `force`; with
// `force`, removes <out_dir>/<scenario> of each scenario about to run (and
// nothing else). kInvalidArgument when out_dir is not a directory.
Status PrepareOutDir(const std::string& out_dir, bool force,
                     const std::vector<Scenario>& scenarios);

struct DemoCallbacks {
  std::function<void(const std::string&)> note;        // dataset / setup messages
  std::function<void(const ScenarioResult&)> result;   // after each scenario
};

// Runs the demo: every scenario with the default configuration (rules on,
// nothing else), so `tstat check <out_dir>/<scenario>` repeats the judgement.
Result<std::vector<ScenarioResult>> RunDemo(const DemoOptions& options,
                                            const DemoCallbacks& callbacks);

}  // namespace tstat::demo
