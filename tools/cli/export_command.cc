// `tstat export tensorboard RUN OUTDIR [--stats l2,mean,...] [--collection C]
// [--regex R] [--every N] [--no-histograms]`: the run as TensorBoard event
// files, one TensorBoard run per worker (OUTDIR/worker-<rank>/); see
// io/export/tensorboard_export.h for what each event holds. Prints one line
// per worker: its file, steps, scalar values, histograms and bytes.
// Exit codes: 0 written, 1 the run cannot be read, nothing matches, or a
// write failed (the message names the file), 2 usage (an unknown stat).
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "io/export/tensorboard_export.h"
#include "tools/cli/cli_trial_options.h"
#include "tools/cli/command.h"
#include "tstat/trial.h"

namespace tstat::cli {
namespace {

struct ExportFlags {
  std::string run;
  std::string out_dir;
  std::vector<std::string> stats = {"l2", "mean", "std", "min", "max"};
  std::string collection;
  std::string regex;
  std::int64_t every = 1;
  bool no_histograms = false;
};

int RunExport(const ExportFlags& f) {
  io::TensorBoardExportOptions options;
  options.stats.clear();
  for (const std::string& name : f.stats) {
    StatField field;
    if (!ParseStatField(name, &field)) {
      std::cerr << "tstat: error: --stats: no stat named \"" << name << "\"\n";
      return kExitUsage;
    }
    options.stats.push_back(field);
  }
  options.collection = f.collection;
  options.regex = f.regex;
  options.every = f.every;
  options.exponent_histograms = options.linear_histograms = !f.no_histograms;
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<Trial>> trial = Trial::Open(f.run, CliTrialOptions());
  if (!trial.ok()) return ReportError(trial.status());
  Result<io::TensorBoardExportReport> report = io::ExportTensorBoard(**trial, f.out_dir, options);
  if (!report.ok()) return ReportError(report.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const io::TensorBoardExportReport::Worker& w : report->workers) {
    std::cout << "worker " << w.rank << ": " << w.file << ": " << w.steps << " step(s), "
              << w.scalars << " scalar value(s), " << w.histograms << " histogram(s), " << w.bytes
              << " bytes\n";
  }
  std::cout << "tstat export tensorboard: " << report->tensors << " tensor(s) of "
            << report->workers.size() << " worker(s) in " << seconds
            << " s; view with: tensorboard --logdir " << f.out_dir << "\n";
  return kExitOk;
}

}  // namespace

Command AddExportCommand(CLI::App& root) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* app = root.add_subcommand("export", "Write a run in another tool's format");
  app->require_subcommand(1);
  CLI::App* tb = app->add_subcommand(
      "tensorboard",
      "TensorBoard event files: scalars, stat series and histograms, one run per worker");
  tb->add_option("run", flags->run, "The run directory")->required();
  tb->add_option("outdir", flags->out_dir, "Where the event files go (created if missing)")
      ->required();
  tb->add_option("--stats", flags->stats, "Stats written as scalars, comma-separated")
      ->delimiter(',')
      ->default_str("l2,mean,std,min,max");
  tb->add_option("--collection", flags->collection, "Only the tensors of this collection");
  tb->add_option("--regex", flags->regex, "Only tensors whose names match (RE2, partial match)");
  tb->add_option("--every", flags->every, "Every this many saved steps of each worker")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))
      ->default_str("1");
  tb->add_flag("--no-histograms", flags->no_histograms,
               "Scalars only: no exponent or linear histograms");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunExport(*flags); };
  return c;
}

}  // namespace tstat::cli
