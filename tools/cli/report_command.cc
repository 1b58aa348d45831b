// `tstat report RUN [RUN...] [-o report.html] [--max-points N] [--layers K] [--heatmaps K]`:
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
#include "tools/cli/page_options.h"
#include "tools/report/report_data.h"
#include "tools/report/report_page.h"

namespace tstat::cli {
namespace {

struct ReportFlags {
  std::vector<std::string> runs;
  std::string out = "report.html";
  PageFlags page;
};

int RunReport(const ReportFlags& f) {
  if (Status page = report::PageAvailable(); !page.ok()) return ReportError(page);
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::string> data = report::BuildReportJson(f.runs, PageReportOptions(f.page));
  if (!data.ok()) return ReportError(data.status());
  const std::string page = report::BuildPage(PageTitle("report", f.runs), *data);
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
  AddPageOptions(app, &flags->page);
  Command c;
  c.app = app;
  c.run = [flags]() { return RunReport(*flags); };
  return c;
}

}  // namespace tstat::cli
