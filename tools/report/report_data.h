// The data of `tstat report` (and of the dashboard that will share its page):
// one JSON document describing one or more runs, built through the public
// Trial API and RUN/findings.jsonl, every series downsampled on this side so
// that the page draws a bounded number of points whatever the run's length.
//
// Schema (version 1), per run: name, path, complete, problem; workers (host,
// closed, segments, bytes, pipeline counters, capture and step seconds);
// modes (steps per mode); episodes (episode_json.h); series (id, name, kind:
// scalar | loss | weight | gradient, mode, x = global steps, y); layers (a
// weight with its gradient, ranked by how unusual its gradient norm's course
// is: score = the largest |log10(l2 / median l2)|, 30 when it is zero at a
// step, infinite once its weight or gradient held a NaN or infinity, the
// first such layer first; with the update norm (the stored delta) and its
// ratio to the weight's norm); activations (share of zeros and of saturated
// values over steps, the most dead or saturated first); heatmaps (exponent
// histograms of the top layers' tensors over sampled steps); bands (min,
// mean, std, max over steps, from which the page draws TensorBoard's
// distribution bands); labels (the latest label counts and confusion matrix).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tstat/status.h"
#include "tstat/trial.h"

namespace tstat::report {

struct ReportOptions {
  std::size_t max_points = 2000;    // per series (BoundedSeries: max_points / 3 buckets)
  std::size_t chart_layers = 8;     // layers drawn as charts (all are in the table)
  std::size_t heatmap_tensors = 6;  // exponent heat maps (the top layers' tensors)
  std::size_t heatmap_steps = 150;  // steps sampled per heat map
  // The live dashboard (`tstat serve`): the page asks for new data this
  // often ("live": {"interval_ms": ...}); 0: a report, drawn once.
  int live_interval_ms = 0;
};

// The score of a norm that is zero at some step: 30 decades, past any
// ratio of two normal floats.
inline constexpr double kVanishedScore = 30.0;

// How unusual a norm's course is: the largest |log10(v / median)| over its
// values; infinity when one is NaN or infinite; kVanishedScore when one is
// zero; 0 for fewer than two values.
double UnusualScore(const std::vector<double>& values);

// Builds the document of `runs` (run directories, each opened as a Trial)
// again and again as they grow: each build walks only the steps written
// since the last one (a run that did not just grow is walked again). What
// it keeps is bounded (bounded_series.h), whatever the runs' length.
// Errors: a run that cannot be opened (its path in the message).
// Thread safety: one thread builds.
class ReportBuilder {
 public:
  ReportBuilder(std::vector<std::string> runs, ReportOptions options);
  ~ReportBuilder();
  ReportBuilder(const ReportBuilder&) = delete;
  ReportBuilder& operator=(const ReportBuilder&) = delete;

  // The document; `revision` goes into "live" (options.live_interval_ms).
  Result<std::string> Build(std::uint64_t revision);

 private:
  struct State;
  std::vector<std::string> runs_;
  ReportOptions options_;
  std::unique_ptr<State> state_;
};

// One build of `runs` (tstat report).
Result<std::string> BuildReportJson(const std::vector<std::string>& runs,
                                    const ReportOptions& options = {});

}  // namespace tstat::report
