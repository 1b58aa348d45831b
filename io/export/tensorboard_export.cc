// See tensorboard_export.h.
#include "io/export/tensorboard_export.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include "io/h5/posix_file.h"
#include "io/tensorboard/record_writer.h"
#include "re2/re2.h"
#include "tensorboard_event.pb.h"

namespace tstat::io {
namespace {

namespace tb = ::tstat::tensorboard;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string ModePrefix(Mode m) {
  switch (m) {
    case Mode::kEval:
      return "EVAL/";
    case Mode::kPredict:
      return "PREDICT/";
    default:
      return "";
  }
}

// |x| over finite non-zero values, in tstat's power-of-two bins.
void ExponentHistogramProto(const ExponentBins& bins, const TensorStats& s, tb::HistogramProto* h) {
  double num = 0;
  for (std::size_t i = 0; i < bins.counts.size(); ++i) {
    const int e = ExponentHistogram::BinExponent(bins.first_bin + static_cast<int>(i));
    h->add_bucket_limit(std::ldexp(1.0, e + 1));
    h->add_bucket(static_cast<double>(bins.counts[i]));
    num += static_cast<double>(bins.counts[i]);
  }
  h->set_min(std::ldexp(1.0, ExponentHistogram::BinExponent(bins.first_bin)));
  h->set_max(s.amax);
  h->set_num(num);
  h->set_sum(s.l1);
  h->set_sum_squares(s.l2 * s.l2);
}

void LinearHistogramProto(const LinearHistogram& lh, const TensorStats& s, tb::HistogramProto* h) {
  double num = 0;
  if (lh.below > 0) {  // [min, lo)
    h->add_bucket_limit(lh.lo);
    h->add_bucket(static_cast<double>(lh.below));
    num += static_cast<double>(lh.below);
  }
  const std::vector<double> limits = lh.BucketLimits();
  for (std::size_t i = 0; i < lh.counts.size(); ++i) {
    h->add_bucket_limit(limits[i]);
    h->add_bucket(static_cast<double>(lh.counts[i]));
    num += static_cast<double>(lh.counts[i]);
  }
  if (lh.above > 0) {  // beyond hi, up to max
    h->add_bucket_limit(std::max(s.max, lh.hi));
    h->add_bucket(static_cast<double>(lh.above));
    num += static_cast<double>(lh.above);
  }
  h->set_min(std::min(s.min, lh.lo));
  h->set_max(std::max(s.max, lh.hi));
  h->set_num(num);
  h->set_sum(s.sum);
  h->set_sum_squares(s.l2 * s.l2);
}

Status WriteEvent(const tb::Event& event, tensorboard::RecordWriter* writer, std::string* scratch) {
  scratch->clear();
  if (!event.SerializeToString(scratch)) {
    return Status::Internal("an event of step " + std::to_string(event.step()) +
                            " could not be serialized");
  }
  return writer->Write(*scratch);
}

// A new file name in `dir` (TensorBoard reads files whose names hold
// "tfevents"): time, host, process, and a counter against collisions.
std::string EventFileName(const std::string& dir, double wall) {
  char host[256] = "localhost";
  (void)gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  for (int n = 0;; ++n) {
    std::string path = dir + "/events.out.tfevents." +
                       std::to_string(static_cast<long long>(wall)) + "." + host + "." +
                       std::to_string(getpid()) + "." + std::to_string(n) + ".tstat";
    if (!PathExists(path)) return path;
  }
}

Result<TensorBoardExportReport::Worker> ExportWorker(const Trial& trial, int rank,
                                                     const std::vector<std::string>& names,
                                                     const std::string& out_dir,
                                                     const TensorBoardExportOptions& o) {
  TensorBoardExportReport::Worker report;
  report.rank = rank;
  std::unordered_map<std::uint32_t, std::string> chosen;  // names by this worker's tensor id
  for (const std::string& name : names) {
    Result<TensorInfo> info = trial.tensor_info(name, rank);
    if (info.ok()) chosen.emplace(info->id, name);
  }
  // Scalars by global step (a run's scalars are few values per step).
  std::map<std::int64_t, std::vector<std::pair<std::string, double>>> scalars;
  for (const std::string& name : trial.scalar_names()) {
    Result<std::vector<SeriesPoint>> series = trial.scalar_series(name, Mode::kGlobal, rank);
    if (!series.ok()) continue;  // another worker's scalar
    for (const SeriesPoint& p : *series) {
      scalars[p.step.global_step].emplace_back(ModePrefix(p.step.mode) + name, p.value);
    }
  }
  const std::vector<StepTime> times = trial.step_times(rank);
  const std::string dir = out_dir + "/worker-" + std::to_string(rank);
  TSTAT_RETURN_IF_ERROR(MakeDirs(dir));
  const double first_wall =
      times.empty() || times.front().wall_time <= 0 ? Now() : times.front().wall_time;
  report.file = EventFileName(dir, first_wall);
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<tensorboard::RecordWriter> writer,
                         tensorboard::RecordWriter::Create(report.file));
  std::string scratch;
  tb::Event event;
  event.set_wall_time(first_wall);
  event.set_file_version("brain.Event:2");
  TSTAT_RETURN_IF_ERROR(WriteEvent(event, writer.get(), &scratch));
  std::vector<TensorStatsRecord> records;
  for (std::size_t k = 0; k < times.size(); k += static_cast<std::size_t>(o.every)) {
    const StepTime& t = times[k];
    event.Clear();
    event.set_wall_time(t.wall_time);
    event.set_step(t.step.global_step);
    tb::Summary* summary = event.mutable_summary();
    const std::string prefix = ModePrefix(t.step.mode);
    if (!chosen.empty()) {
      TSTAT_RETURN_IF_ERROR(trial.step_records_into(rank, t.step.global_step, &records));
      for (const TensorStatsRecord& r : records) {
        auto c = chosen.find(r.tensor_id);
        if (c == chosen.end()) continue;
        const std::string tag = prefix + c->second + "/";
        if (r.has_stats) {
          for (StatField f : o.stats) {
            tb::SummaryValue* v = summary->add_value();
            v->set_tag(tag + StatFieldName(f));
            v->set_simple_value(static_cast<float>(StatValue(r.stats, f)));
            ++report.scalars;
          }
        }
        if (o.exponent_histograms && r.exponent_histogram &&
            !r.exponent_histogram->counts.empty()) {
          tb::SummaryValue* v = summary->add_value();
          v->set_tag(tag + "exponent_histogram");
          ExponentHistogramProto(*r.exponent_histogram, r.stats, v->mutable_histo());
          ++report.histograms;
        }
        if (o.linear_histograms && r.linear_histogram && !r.linear_histogram->counts.empty()) {
          tb::SummaryValue* v = summary->add_value();
          v->set_tag(tag + "histogram");
          LinearHistogramProto(*r.linear_histogram, r.stats, v->mutable_histo());
          ++report.histograms;
        }
      }
    }
    auto s = scalars.find(t.step.global_step);
    if (s != scalars.end()) {
      for (const auto& [tag, value] : s->second) {
        tb::SummaryValue* v = summary->add_value();
        v->set_tag(tag);
        v->set_simple_value(static_cast<float>(value));
        ++report.scalars;
      }
    }
    if (summary->value_size() == 0) continue;
    TSTAT_RETURN_IF_ERROR(WriteEvent(event, writer.get(), &scratch));
    ++report.steps;
  }
  TSTAT_RETURN_IF_ERROR(writer->Close());
  report.bytes = writer->bytes_written();
  return report;
}

}  // namespace

Result<TensorBoardExportReport> ExportTensorBoard(const Trial& trial, const std::string& out_dir,
                                                  const TensorBoardExportOptions& options) {
  if (options.every < 1) {
    return Status::InvalidArgument("every must be at least 1, got " +
                                   std::to_string(options.every));
  }
  if (!options.regex.empty()) {
    const RE2 re(options.regex, RE2::Quiet);
    if (!re.ok()) return Status::InvalidArgument("regex \"" + options.regex + "\": " + re.error());
  }
  TensorQuery query;
  query.collection = options.collection;
  query.regex = options.regex;
  const std::vector<std::string> names = trial.tensor_names(query);
  if (names.empty() && (!options.collection.empty() || !options.regex.empty())) {
    return Status::NotFound("no tensor in collection \"" + options.collection + "\" matching \"" +
                            options.regex + "\"");
  }
  if (PathExists(out_dir) && !IsDirectory(out_dir)) {
    return Status::InvalidArgument(out_dir + ": not a directory");
  }
  TSTAT_RETURN_IF_ERROR(MakeDirs(out_dir));
  TensorBoardExportReport report;
  report.tensors = names.size();
  for (const WorkerSummary& w : trial.workers()) {
    TSTAT_ASSIGN_OR_RETURN(TensorBoardExportReport::Worker done,
                           ExportWorker(trial, w.rank, names, out_dir, options));
    report.workers.push_back(std::move(done));
  }
  return report;
}

}  // namespace tstat::io
