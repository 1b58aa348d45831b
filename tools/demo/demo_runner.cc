#include "tools/demo/demo_runner.h"

#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "tools/demo/digits_dataset.h"

namespace tstat::demo {
namespace fs = std::filesystem;

Result<std::vector<Scenario>> SelectScenarios(const std::vector<std::string>& names) {
  if (names.empty()) return AllScenarios();
  std::vector<Scenario> picked;
  for (const std::string& name : names) {
    const auto& all = AllScenarios();
    auto it = std::find_if(all.begin(), all.end(),
                           [&name](const Scenario& s) { return s.name == name; });
    if (it == all.end()) {
      std::string valid;
      for (const std::string& n : ScenarioNames()) valid += (valid.empty() ? "" : ", ") + n;
      return Status::InvalidArgument("unknown scenario \"" + name + "\"; valid scenarios: " +
                                     valid);
    }
    const bool seen = std::any_of(picked.begin(), picked.end(),
                                  [&name](const Scenario& s) { return s.name == name; });
    if (!seen) picked.push_back(*it);
  }
  return picked;
}

Status PrepareOutDir(const std::string& out_dir, bool force,
                     const std::vector<Scenario>& scenarios) {
  std::error_code ec;
  const fs::path out(out_dir);
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) {
      return Status::InvalidArgument("--out " + out_dir + " exists and is not a directory");
    }
    if (!force) {
      return Status::FailedPrecondition(
          "--out " + out_dir +
          " already exists; pass --force to replace its demo runs, or choose another directory");
    }
    for (const Scenario& s : scenarios) {
      fs::remove_all(out / s.name, ec);
      if (ec) {
        return Status::IoError("cannot remove " + (out / s.name).string() + ": " + ec.message());
      }
    }
  }
  fs::create_directories(out, ec);
  if (ec) return Status::IoError("cannot create " + out_dir + ": " + ec.message());
  return Status::OK();
}

Result<std::vector<ScenarioResult>> RunDemo(const DemoOptions& options,
                                            const DemoCallbacks& callbacks) {
  TSTAT_ASSIGN_OR_RETURN(std::vector<Scenario> scenarios, SelectScenarios(options.scenarios));
  TSTAT_RETURN_IF_ERROR(PrepareOutDir(options.out_dir, options.force, scenarios));
  const Dataset data = LoadDigitsOrSynthetic(options.dataset_path);
  if (callbacks.note) {
    if (!data.note.empty()) callbacks.note(data.note);
    callbacks.note("dataset: " + data.source + ", " + std::to_string(data.rows()) + " images");
  }
  // One thread: the same results on every machine, and the writer thread
  // gets the other core.
  torch::set_num_threads(1);
  const RunPlan plan = MakeRunPlan(options.quick, options.steps);
  std::vector<ScenarioResult> results;
  for (const Scenario& s : scenarios) {
    const std::string run_dir = (fs::path(options.out_dir) / s.name).string();
    TSTAT_ASSIGN_OR_RETURN(ScenarioResult r, RunScenario(s, data, plan, run_dir));
    if (callbacks.result) callbacks.result(r);
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace tstat::demo
