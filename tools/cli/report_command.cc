// `tstat report RUN [RUN...] [-o report.html] [--max-points N] [--layers K]`:
// one self-contained HTML file (tools/report/): each run's health, findings,
// losses and scalars with the findings marked, its layers ranked by how
// unusual their gradient norms are, exponent heat maps against the fp16,
// bf16 and fp8 ranges, distributions over steps, labels; with several runs,
// their losses and scalars compared by step. Prints where the file is.
// Exit codes: 0 written, 1 a run cannot be read or the file not written,
// 2 usage.
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "io/h5/posix_file.h"
#include "tools/cli/command.h"
#include "tools/report/report_data.h"
#include "tools/report/report_page.h"

namespace tstat::cli {
namespace {

struct ReportFlags {
  std::vector<std::string> runs;
  std::string out = "report.html";
  std::size_t max_points = 2000;
  std::size_t layers = 8;
  std::size_t heatmaps = 6;
};

int RunReport(const ReportFlags& f) {
  if (Status page = report::PageAvailable(); !page.ok()) return ReportError(page);
  const auto t0 = std::chrono::steady_clock::now();
  report::ReportOptions options;
  options.max_points = f.max_points;
  options.chart_layers = f.layers;
  options.heatmap_tensors = f.heatmaps;
  Result<std::string> data = report::BuildReportJson(f.runs, options);
  if (!data.ok()) return ReportError(data.status());
  std::string title = "tstat report: ";
  for (std::size_t i = 0; i < f.runs.size(); ++i) title += (i ? ", " : "") + f.runs[i];
  const std::string page = report::BuildPage(title, *data);
  const Status written = io::WriteFileAtomically(f.out, page);
  if (!written.ok()) return ReportError(written);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "tstat report: " << f.out << " (" << page.size() << " bytes, " << seconds << " s)\n";
  return kExitOk;
}

}  // namespace

Command AddReportCommand(CLI::App& root) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* app = root.add_subcommand(
      "report", "Write one self-contained HTML report of one or more runs (compared by step)");
  app->add_option("runs", flags->runs, "Run directories")->required();
  app->add_option("-o,--out", flags->out, "The HTML file")->default_str("report.html");
  app->add_option("--max-points", flags->max_points, "Points per series (downsampled beyond)")
      ->check(CLI::Range(std::size_t{10}, std::size_t{1000000}))
      ->default_str("2000");
  app->add_option("--layers", flags->layers, "Layers drawn as charts (all are in the table)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{10000}))
      ->default_str("8");
  app->add_option("--heatmaps", flags->heatmaps,
                  "Tensors with exponent heat maps and distribution bands (the top layers')")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1000}))
      ->default_str("6");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunReport(*flags); };
  return c;
}

}  // namespace tstat::cli
