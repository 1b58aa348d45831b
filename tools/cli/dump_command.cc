// `tstat dump RUN --tensor NAME [--stat S]... [--mode M] [--worker N] [--csv]`:
// the series of one tensor (or scalar) over its saved steps, one row per
// step: step (global), mode_step, mode, then the chosen stats (default: the
// main ones) - or, for a scalar, its value. Each stat is one Trial::series()
// call (no lookup per step), so long runs dump fast.
//
// --csv prints RFC 4180 CSV (CRLF line ends, fields quoted when needed) with
// the tensor name as the first column and exact numbers (shortest decimal
// that reads back to the same double; nan/inf/-inf for non-finite values).
// Exit codes: 0 printed (also when nothing is saved yet), 1 no such tensor
// (the message suggests close names) or an unreadable run, 2 usage (an
// unknown --stat or --mode, listing the valid ones).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "tools/cli/cli_trial_options.h"
#include "tools/cli/command.h"
#include "tools/cli/text_format.h"
#include "tstat/trial.h"

namespace tstat::cli {
namespace {

const std::vector<StatField> kDefaultStats = {
    StatField::kCount,    StatField::kMin,         StatField::kMax,
    StatField::kMean,     StatField::kStd,         StatField::kL2,
    StatField::kNanCount, StatField::kPosInfCount, StatField::kNegInfCount};

bool IsCountField(StatField f) { return f <= StatField::kSmallCount; }

struct DumpFlags {
  std::string run;
  std::string tensor;
  std::vector<std::string> stats;
  std::string mode;
  int worker = -1;
  bool csv = false;
};

struct Column {
  std::string name;
  bool count = false;  // an integer-valued column
  std::vector<SeriesPoint> points;
};

std::vector<std::string> AllStatNames() {
  std::vector<std::string> names;
  for (int f = 0; f <= static_cast<int>(StatField::kAmax); ++f) {
    names.push_back(StatFieldName(static_cast<StatField>(f)));
  }
  return names;
}

int UsageFailure(const std::string& message) {
  std::cerr << "tstat: error: " << message << "\nRun 'tstat dump --help' for usage.\n";
  return kExitUsage;
}

int NoSuchTensor(const Trial& trial, const DumpFlags& f, const Status& why) {
  if (why.code() != StatusCode::kNotFound) return ReportError(why);
  std::vector<std::string> names = trial.tensor_names();
  const std::vector<std::string> scalars = trial.scalar_names();
  names.insert(names.end(), scalars.begin(), scalars.end());
  std::string message = "no tensor or scalar '" + DisplayName(f.tensor) + "' in " +
                        DisplayName(f.run) +
                        (f.worker >= 0 ? " (worker " + std::to_string(f.worker) + ")" : "");
  const std::vector<std::string> close = CloseNames(f.tensor, names);
  if (!close.empty()) {
    message += "; did you mean: ";
    for (std::size_t i = 0; i < close.size(); ++i) {
      message += (i ? ", " : "") + std::string("'") + DisplayName(close[i]) + "'";
    }
    message += "?";
  } else {
    message += " (" + std::to_string(names.size()) + " names; `tstat inspect` lists them)";
  }
  std::cerr << "tstat: error: " << message << "\n";
  return kExitFailure;
}

// Keeps the points of `mode` only, when that is GLOBAL (Trial treats kGlobal
// as "every mode").
void KeepGlobalMode(std::vector<SeriesPoint>* points) {
  std::vector<SeriesPoint> kept;
  for (const SeriesPoint& p : *points) {
    if (p.step.mode == Mode::kGlobal) kept.push_back(p);
  }
  points->swap(kept);
}

std::string Cell(const Column& c, std::size_t row, bool exact) {
  const double v = c.points[row].value;
  if (exact || c.count) return ExactNumber(v);
  return ShortNumber(v, 6);
}

void PrintCsv(const std::string& tensor, const std::vector<Column>& columns, std::ostream& out) {
  out << "tensor,step,mode_step,mode";
  for (const Column& c : columns) out << "," << CsvField(c.name);
  out << "\r\n";
  const std::string name = CsvField(tensor);
  for (std::size_t r = 0; r < columns.front().points.size(); ++r) {
    const StepKey& k = columns.front().points[r].step;
    out << name << "," << k.global_step << "," << k.mode_step << "," << ModeName(k.mode);
    for (const Column& c : columns) out << "," << Cell(c, r, true);
    out << "\r\n";
  }
}

void PrintText(const std::string& title, const std::vector<Column>& columns, std::ostream& out) {
  std::vector<std::vector<std::string>> rows = {{"step", "mode_step", "mode"}};
  for (const Column& c : columns) rows.front().push_back(c.name);
  for (std::size_t r = 0; r < columns.front().points.size(); ++r) {
    const StepKey& k = columns.front().points[r].step;
    std::vector<std::string> row = {std::to_string(k.global_step), std::to_string(k.mode_step),
                                    ModeName(k.mode)};
    for (const Column& c : columns) row.push_back(Cell(c, r, false));
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  out << title << "\n";
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      line += i == 2 ? PadRight(row[i], widths[i]) : PadLeft(row[i], widths[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
}

std::string Title(const TensorInfo& info) {
  std::string title =
      (info.kind == TensorKind::kScalar ? "scalar " : "tensor ") + DisplayName(info.name);
  if (info.kind == TensorKind::kTensor) {
    title += "  " + std::string(DTypeName(info.dtype)) + "[";
    for (std::size_t i = 0; i < info.shape.size(); ++i) {
      title += (i ? "," : "") + std::to_string(info.shape[i]);
    }
    title += "]";
  }
  for (std::size_t i = 0; i < info.collections.size(); ++i) {
    title += (i ? ", " : "  collections: ") + DisplayName(info.collections[i]);
  }
  return title;
}

int RunDump(const DumpFlags& f) {
  // Usage first: a bad flag is reported before the run is read.
  Mode mode = Mode::kGlobal;
  const bool mode_given = !f.mode.empty();
  if (mode_given && !ParseMode(f.mode, &mode)) {
    return UsageFailure("unknown --mode '" + DisplayName(f.mode) +
                        "' (valid: TRAIN, EVAL, PREDICT, GLOBAL)");
  }
  std::vector<StatField> fields;
  bool value_asked = false;  // --stat value: a scalar's only column
  for (const std::string& name : f.stats) {
    StatField field;
    if (name == "value") {
      value_asked = true;
    } else if (ParseStatField(name, &field)) {
      fields.push_back(field);
    } else {
      return UsageFailure("unknown --stat '" + DisplayName(name) +
                          "' (valid: " + JoinNames(AllStatNames()) + "; value for scalars)");
    }
  }

  Result<std::unique_ptr<Trial>> opened = Trial::Open(f.run, CliTrialOptions());
  if (!opened.ok()) return ReportError(opened.status());
  // Damaged segments are skipped (the rest is readable); a second Refresh()
  // reports them again, as a warning.
  if (Status damaged = opened.value()->Refresh(); !damaged.ok()) {
    std::cerr << "tstat: warning: " << DisplayName(damaged.ToString()) << "\n";
  }
  const Trial& trial = *opened.value();
  Result<TensorInfo> info = trial.tensor_info(f.tensor, f.worker);
  if (!info.ok()) return NoSuchTensor(trial, f, info.status());
  // Trial's kGlobal means every mode; --mode GLOBAL means GLOBAL-mode steps
  // (queried as every mode, then filtered).
  const Mode query_mode = mode;
  const bool only_global = mode_given && mode == Mode::kGlobal;

  std::vector<Column> columns;
  if (info->kind == TensorKind::kScalar) {
    if (!fields.empty()) {
      return UsageFailure("'" + DisplayName(f.tensor) +
                          "' is a scalar: it has one value per step (--stat value), not " +
                          StatFieldName(fields.front()));
    }
    Result<std::vector<SeriesPoint>> points = trial.scalar_series(f.tensor, query_mode, f.worker);
    if (!points.ok()) return ReportError(points.status());
    columns.push_back(Column{"value", false, std::move(points).value()});
  } else {
    if (value_asked) {
      return UsageFailure("--stat value is for scalars; '" + DisplayName(f.tensor) +
                          "' is a tensor (valid: " + JoinNames(AllStatNames()) + ")");
    }
    if (fields.empty()) fields = kDefaultStats;
    for (StatField field : fields) {
      Result<std::vector<SeriesPoint>> points = trial.series(f.tensor, field, query_mode, f.worker);
      if (!points.ok()) return ReportError(points.status());
      columns.push_back(
          Column{StatFieldName(field), IsCountField(field), std::move(points).value()});
    }
  }
  for (Column& c : columns) {
    if (only_global) KeepGlobalMode(&c.points);
    if (c.points.size() != columns.front().points.size()) {
      return ReportError(Status::Internal("series of '" + f.tensor + "' differ in length"));
    }
  }
  if (columns.front().points.empty()) {
    std::cerr << "tstat: note: '" << DisplayName(f.tensor) << "' has no saved "
              << (mode_given ? std::string(ModeName(mode)) + " " : "") << "steps"
              << (trial.loaded_all_steps() ? "" : " yet") << "\n";
  }
  if (f.csv) {
    PrintCsv(f.tensor, columns, std::cout);
  } else {
    PrintText(Title(info.value()), columns, std::cout);
  }
  return kExitOk;
}

}  // namespace

Command AddDumpCommand(CLI::App& root) {
  auto flags = std::make_shared<DumpFlags>();
  CLI::App* app = root.add_subcommand(
      "dump", "Print the series of one tensor (or scalar) over its saved steps");
  app->add_option("run", flags->run, "The run directory")->required();
  app->add_option("--tensor", flags->tensor, "Name of the tensor or scalar (verbatim)")->required();
  app->add_option("--stat", flags->stats,
                  "A stat to print (repeatable; default: count min max mean std l2 nan_count "
                  "pos_inf_count neg_inf_count; 'value' for scalars)")
      ->allow_extra_args(false);
  app->add_option("--mode", flags->mode, "Only steps of this mode: TRAIN, EVAL, PREDICT, GLOBAL");
  app->add_option("--worker", flags->worker,
                  "Read this worker (rank); default: the lowest rank that has the data")
      ->check(CLI::NonNegativeNumber);
  app->add_flag("--csv", flags->csv, "RFC 4180 CSV with exact numbers");
  Command c;
  c.app = app;
  c.run = [flags]() { return RunDump(*flags); };
  return c;
}

}  // namespace tstat::cli
