// The options `tstat report` and `tstat serve` share: how much of the runs
// their page draws (--max-points, --layers, --heatmaps) and its title.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "tools/report/report_data.h"

namespace tstat::cli {

struct PageFlags {
  std::size_t max_points = 2000;
  std::size_t layers = 8;
  std::size_t heatmaps = 6;
};

inline void AddPageOptions(CLI::App* app, PageFlags* flags) {
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
}

inline report::ReportOptions PageReportOptions(const PageFlags& flags) {
  report::ReportOptions options;
  options.max_points = flags.max_points;
  options.chart_layers = flags.layers;
  options.heatmap_tensors = flags.heatmaps;
  return options;
}

// "tstat report: run1, run2".
inline std::string PageTitle(const std::string& command, const std::vector<std::string>& runs) {
  std::string title = "tstat " + command + ": ";
  for (std::size_t i = 0; i < runs.size(); ++i) title += (i ? ", " : "") + runs[i];
  return title;
}

}  // namespace tstat::cli
