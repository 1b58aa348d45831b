// tstat._tstat: the C++ side of the Python package (python/tstat/). It
// exposes tstat::Trial to Python with numpy arrays for what is many values
// (a series, a raw snapshot, a histogram) and plain Python objects for the
// rest; python/tstat/trials.py builds the smdebug-shaped API on it.
//
// Errors: every tstat::Status that is not OK is raised as tstat.Error (from
// tstat/errors.py) carrying the status code's name and the C++ message.
// Nothing here aborts the interpreter: bad arguments (an unknown mode or
// stat name) are Errors too.
// Thread safety: a Trial is not thread-safe; every call holds the GIL (none
// releases it), so Python threads sharing one take turns.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "python/src/bindings.h"
#include "tstat/check.h"
#include "tstat/rule.h"
#include "tstat/trial.h"

namespace py = pybind11;

namespace tstat::python {
namespace {

StatField ParseStat(const std::string& name) {
  StatField f;
  if (!ParseStatField(name, &f)) {
    std::string known;
    for (int i = 0; i <= static_cast<int>(StatField::kAmax); ++i) {
      known += std::string(known.empty() ? "" : ", ") + StatFieldName(static_cast<StatField>(i));
    }
    Raise(Status::InvalidArgument("no stat named '" + name + "' (stats: " + known + ")"));
  }
  return f;
}

// Steps as three arrays: global steps, modes, mode steps.
py::tuple StepArrays(const std::vector<StepKey>& keys) {
  py::array_t<std::int64_t> global(static_cast<py::ssize_t>(keys.size()));
  py::array_t<std::int8_t> modes(static_cast<py::ssize_t>(keys.size()));
  py::array_t<std::int64_t> mode_steps(static_cast<py::ssize_t>(keys.size()));
  auto g = global.mutable_unchecked<1>();
  auto m = modes.mutable_unchecked<1>();
  auto s = mode_steps.mutable_unchecked<1>();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto k = static_cast<py::ssize_t>(i);
    g(k) = keys[i].global_step;
    m(k) = static_cast<std::int8_t>(keys[i].mode);
    s(k) = keys[i].mode_step;
  }
  return py::make_tuple(global, modes, mode_steps);
}

// A series as (global steps, modes, mode steps, values).
py::tuple SeriesArrays(const std::vector<SeriesPoint>& points) {
  std::vector<StepKey> keys;
  keys.reserve(points.size());
  py::array_t<double> values(static_cast<py::ssize_t>(points.size()));
  auto v = values.mutable_unchecked<1>();
  for (std::size_t i = 0; i < points.size(); ++i) {
    keys.push_back(points[i].step);
    v(static_cast<py::ssize_t>(i)) = points[i].value;
  }
  py::tuple steps = StepArrays(keys);
  return py::make_tuple(steps[0], steps[1], steps[2], values);
}

py::dict StatsDict(const TensorStats& s) {
  py::dict d;
  for (int i = 0; i <= static_cast<int>(StatField::kAmax); ++i) {
    const auto f = static_cast<StatField>(i);
    d[StatFieldName(f)] = StatValue(s, f);
  }
  return d;
}

// A raw snapshot as a numpy array of its dtype and shape (float16 as
// numpy's; bfloat16 and fp8, which numpy lacks, as float32 values).
py::array RawArray(const RawTensor& raw) {
  std::vector<py::ssize_t> shape(raw.shape.begin(), raw.shape.end());
  auto copy = [&](py::dtype dtype) {
    py::array out(dtype, shape);
    if (static_cast<std::size_t>(out.nbytes()) != raw.bytes.size()) {
      Raise(Status::Corruption("raw snapshot of " + std::to_string(raw.bytes.size()) +
                               " bytes for its shape"));
    }
    if (!raw.bytes.empty()) std::memcpy(out.mutable_data(), raw.bytes.data(), raw.bytes.size());
    return out;
  };
  switch (raw.dtype) {
    case DType::kFloat32:
      return copy(py::dtype::of<float>());
    case DType::kFloat64:
      return copy(py::dtype::of<double>());
    case DType::kFloat16:
      return copy(py::dtype("float16"));
    case DType::kInt32:
      return copy(py::dtype::of<std::int32_t>());
    case DType::kInt64:
      return copy(py::dtype::of<std::int64_t>());
    default: {
      const std::vector<double> values = raw.ToDoubles();
      py::array_t<float> out(shape);
      if (static_cast<std::size_t>(out.size()) != values.size()) {
        Raise(Status::Corruption("raw snapshot of " + std::to_string(values.size()) +
                                 " values for its shape"));
      }
      float* p = out.mutable_data();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<float>(values[i]);
      return std::move(out);
    }
  }
}

// Per-channel stats as columns (a stat name -> one value per channel):
// counts as uint64, the others as float64.
py::dict ChannelColumns(const std::vector<TensorStats>& channels) {
  py::dict cols;
  const auto n = static_cast<py::ssize_t>(channels.size());
  for (int i = 0; i <= static_cast<int>(StatField::kAmax); ++i) {
    const auto f = static_cast<StatField>(i);
    if (f <= StatField::kSmallCount) {
      py::array_t<std::uint64_t> a(n);
      std::uint64_t* p = a.mutable_data();
      for (py::ssize_t c = 0; c < n; ++c) {
        p[c] = static_cast<std::uint64_t>(StatValue(channels[static_cast<std::size_t>(c)], f));
      }
      cols[StatFieldName(f)] = a;
    } else {
      py::array_t<double> a(n);
      double* p = a.mutable_data();
      for (py::ssize_t c = 0; c < n; ++c)
        p[c] = StatValue(channels[static_cast<std::size_t>(c)], f);
      cols[StatFieldName(f)] = a;
    }
  }
  return cols;
}

py::dict RecordDict(const TensorStatsRecord& r) {
  py::dict d;
  d["tensor_id"] = r.tensor_id;
  d["has_stats"] = r.has_stats;
  d["stats"] = StatsDict(r.stats);
  if (r.exponent_histogram) {
    const ExponentBins& h = *r.exponent_histogram;
    py::array_t<std::uint64_t> counts(static_cast<py::ssize_t>(h.counts.size()));
    std::copy(h.counts.begin(), h.counts.end(), counts.mutable_data());
    d["exponent_first_bin"] = h.first_bin;
    d["exponent_first"] = ExponentHistogram::BinExponent(h.first_bin);
    d["exponent_counts"] = counts;
  }
  if (r.linear_histogram) {
    const LinearHistogram& h = *r.linear_histogram;
    py::array_t<std::uint64_t> counts(static_cast<py::ssize_t>(h.counts.size()));
    std::copy(h.counts.begin(), h.counts.end(), counts.mutable_data());
    d["linear_lo"] = h.lo;
    d["linear_hi"] = h.hi;
    d["linear_below"] = h.below;
    d["linear_above"] = h.above;
    d["linear_counts"] = counts;
  }
  if (r.per_channel) {
    d["per_channel_axis"] = r.per_channel->axis;
    d["per_channel"] = ChannelColumns(r.per_channel->channels);
  }
  if (r.delta) {
    py::dict delta;
    delta["count"] = r.delta->count;
    delta["changed_count"] = r.delta->changed_count;
    delta["nonfinite_pairs"] = r.delta->nonfinite_pairs;
    delta["l1"] = r.delta->l1;
    delta["l2"] = r.delta->l2;
    delta["amax"] = r.delta->amax;
    d["delta"] = delta;
  }
  if (r.label_counts) {
    d["label_counts"] = r.label_counts->counts;
    d["label_out_of_range"] = r.label_counts->out_of_range;
  }
  if (r.confusion && r.confusion->classes > 0 &&
      r.confusion->counts.size() == static_cast<std::size_t>(r.confusion->classes) *
                                        static_cast<std::size_t>(r.confusion->classes)) {
    const auto k = static_cast<py::ssize_t>(r.confusion->classes);
    py::array_t<std::uint64_t> m({k, k});
    std::copy(r.confusion->counts.begin(), r.confusion->counts.end(), m.mutable_data());
    d["confusion"] = m;
    d["confusion_invalid"] = r.confusion->invalid;
  }
  return d;
}

py::dict InfoDict(const TensorInfo& t) {
  py::dict d;
  d["id"] = t.id;
  d["name"] = t.name;
  d["kind"] = t.kind == TensorKind::kScalar ? "scalar" : "tensor";
  d["dtype"] = DTypeName(t.dtype);
  d["shape"] = t.shape;
  d["collections"] = t.collections;
  return d;
}

py::dict WorkerDict(const WorkerSummary& w) {
  py::dict d;
  d["rank"] = w.rank;
  d["world_size"] = w.world_size;
  d["format_version"] = w.format_version;
  d["host"] = w.host;
  d["closed"] = w.closed;
  d["segments"] = w.segments;
  d["bytes"] = w.bytes;
  for (auto item : CountersDict(w.counters)) d[item.first] = item.second;
  return d;
}

py::dict EpisodeDict(const Episode& e) {
  py::dict d;
  d["episode"] = e.id;
  d["rule"] = e.rule;
  d["type"] = e.type;
  d["severity"] = SeverityName(e.severity);
  d["worker"] = e.worker;
  d["tensor"] = e.tensor;
  d["mode"] = ModeName(e.first.mode);
  d["first_step"] = e.first.global_step;
  d["first_mode_step"] = e.first.mode_step;
  d["reported_step"] = e.reported.global_step;
  d["last_step"] = e.last.global_step;
  d["steps"] = e.steps;
  d["open"] = e.open;
  d["message"] = e.opening.message;
  const auto& worst = e.worst.values.empty() ? e.opening.values : e.worst.values;
  d["measure"] = worst.empty() ? std::string() : worst.front().first;
  d["worst"] = worst.empty() ? std::numeric_limits<double>::quiet_NaN() : worst.front().second;
  d["worst_step"] = e.worst.step.global_step;
  return d;
}

// The episodes of a findings log; none when there is no log.
py::list FindingsLog(const std::string& path) {
  Result<FindingsLogContents> log = ReadFindingsLog(path);
  py::list out;
  if (!log.ok() && log.status().code() == StatusCode::kNotFound) return out;
  for (const Episode& e : Take(std::move(log)).episodes) out.append(EpisodeDict(e));
  return out;
}

// The rules over a run on disk (tstat::CheckRun): a dict of episodes,
// warnings, notes, steps, findings, rules, run_closed.
py::dict CheckRunDict(const std::string& run, const std::string& config_json,
                      const std::string& config_file, const std::vector<std::string>& plugins,
                      const std::vector<std::string>& disable) {
  CheckOptions options;
  options.config_json = config_json;
  options.config_file = config_file;
  options.plugins = plugins;
  options.disable = disable;
  Result<CheckReport> report = [&] {
    py::gil_scoped_release release;  // a long run: other Python threads go on
    return CheckRun(run, options);
  }();
  const CheckReport r = Take(std::move(report));
  py::list episodes;
  for (const Episode& e : r.episodes) episodes.append(EpisodeDict(e));
  py::dict d;
  d["episodes"] = episodes;
  d["warnings"] = r.warnings;
  d["notes"] = r.notes;
  d["steps"] = r.steps;
  d["findings"] = r.findings;
  d["rules"] = r.rules;
  d["run_closed"] = r.run_closed;
  return d;
}

// tstat::Trial as Python sees it (tstat.trials.Trial wraps it).
class PyTrial {
 public:
  PyTrial(const std::string& path, double cache_mib) {
    TrialOptions options;
    // A run handed to a notebook may be anyone's: parse each segment's
    // metadata in a child first, as the CLI does.
    options.isolate_segment_reads = true;
    if (cache_mib > 0) options.cache_bytes = static_cast<std::uint64_t>(cache_mib * (1 << 20));
    trial_ = Take(Trial::Open(path, options));
    // Open keeps damaged files quiet (the rest is readable); a refresh,
    // cheap right after it, says which they are.
    Refresh();
  }

  void Refresh() {
    const Status s = trial_->Refresh();
    // Damaged files are reported and the rest stays readable: a warning
    // for Python (trials.py), not an exception.
    if (!s.ok() && s.code() != StatusCode::kCorruption) Raise(s);
    damage_ = s.ok() ? std::string() : s.message();
  }
  std::string damage() const { return damage_; }
  // One look (a refresh) for `step` of `mode`: true when it is there, false
  // when it may still come; an Error when the run passed it or closed
  // without it. trials.py polls it, sleeping between looks without the GIL.
  bool HasStep(std::int64_t step, int mode) {
    const Status s = trial_->WaitForStep(step, ParseMode(mode), 0.0);
    if (s.ok()) return true;
    if (s.code() == StatusCode::kUnavailable) return false;
    Raise(s);
  }
  bool loaded_all_steps() const { return trial_->loaded_all_steps(); }
  py::list workers() const {
    py::list out;
    for (const WorkerSummary& w : trial_->workers()) out.append(WorkerDict(w));
    return out;
  }
  std::vector<std::string> tensor_names(const std::string& collection, const std::string& regex,
                                        int mode) const {
    TensorQuery q;
    q.collection = collection;
    q.regex = regex;
    q.mode = ParseMode(mode);
    return trial_->tensor_names(q);
  }
  std::vector<std::string> scalar_names() const { return trial_->scalar_names(); }
  std::vector<std::string> collections() const { return trial_->collections(); }
  py::dict tensor_info(const std::string& name, int worker) const {
    return InfoDict(Take(trial_->tensor_info(name, worker)));
  }
  py::tuple steps(int mode) const { return StepArrays(trial_->steps(ParseMode(mode))); }
  std::string config_json(int worker) const { return trial_->config_json(worker); }
  py::dict record(const std::string& name, std::int64_t step, int mode, int worker) const {
    return RecordDict(Take(trial_->record(name, step, ParseMode(mode), worker)));
  }
  py::tuple series(const std::string& name, const std::string& stat, int mode, int worker) const {
    return SeriesArrays(Take(trial_->series(name, ParseStat(stat), ParseMode(mode), worker)));
  }
  py::tuple scalar_series(const std::string& name, int mode, int worker) const {
    return SeriesArrays(Take(trial_->scalar_series(name, ParseMode(mode), worker)));
  }
  py::array raw(const std::string& name, std::int64_t step, int mode, int worker) const {
    return RawArray(Take(trial_->raw(name, step, ParseMode(mode), worker)));
  }
  py::tuple raw_steps(const std::string& name, int worker) const {
    return StepArrays(trial_->raw_steps(name, worker));
  }
  py::list step_records(int worker, std::int64_t global_step) const {
    py::list out;
    for (const TensorStatsRecord& r : Take(trial_->step_records(worker, global_step))) {
      out.append(RecordDict(r));
    }
    return out;
  }
  py::list drops(int worker) const {
    py::list out;
    for (const DropRecord& d : trial_->drops(worker)) {
      py::dict x;
      x["tensor_id"] = d.tensor_id;
      x["kind"] = d.kind;
      x["reason"] = d.reason;
      x["bytes"] = d.bytes;
      out.append(x);
    }
    return out;
  }

 private:
  std::unique_ptr<Trial> trial_;
  std::string damage_;
};

}  // namespace

void SetPythonError(const Status& status) {
  try {
    py::object error = py::module_::import("tstat.errors").attr("Error");
    py::object instance = error(StatusCodeName(status.code()), status.message());
    PyErr_SetObject(error.ptr(), instance.ptr());
  } catch (py::error_already_set& e) {
    e.restore();  // tstat.errors could not be imported: that error instead
  }
}

}  // namespace tstat::python

PYBIND11_MODULE(_tstat, m) {
  using tstat::python::PyTrial;
  using tstat::python::StatusError;
  m.doc() = "tstat's C++ reader (use the tstat package, not this module)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      tstat::python::SetPythonError(e.status);
    }
  });
  tstat::python::BindSession(m);
  tstat::python::BindOutputHook(m);
  py::class_<PyTrial>(m, "Trial")
      .def(py::init<const std::string&, double>(), py::arg("path"), py::arg("cache_mib") = 0.0)
      .def("refresh", &PyTrial::Refresh)
      .def("damage", &PyTrial::damage)
      .def("has_step", &PyTrial::HasStep)
      .def("loaded_all_steps", &PyTrial::loaded_all_steps)
      .def("workers", &PyTrial::workers)
      .def("tensor_names", &PyTrial::tensor_names)
      .def("scalar_names", &PyTrial::scalar_names)
      .def("collections", &PyTrial::collections)
      .def("tensor_info", &PyTrial::tensor_info)
      .def("steps", &PyTrial::steps)
      .def("config_json", &PyTrial::config_json)
      .def("record", &PyTrial::record)
      .def("series", &PyTrial::series)
      .def("scalar_series", &PyTrial::scalar_series)
      .def("raw", &PyTrial::raw)
      .def("raw_steps", &PyTrial::raw_steps)
      .def("step_records", &PyTrial::step_records)
      .def("drops", &PyTrial::drops);
  m.def("findings_log", &tstat::python::FindingsLog, py::arg("path"));
  m.def("check", &tstat::python::CheckRunDict, py::arg("run"), py::arg("config_json"),
        py::arg("config_file"), py::arg("plugins"), py::arg("disable"));
  m.attr("STATS") = [] {
    std::vector<std::string> names;
    for (int i = 0; i <= static_cast<int>(tstat::StatField::kAmax); ++i) {
      names.push_back(tstat::StatFieldName(static_cast<tstat::StatField>(i)));
    }
    return names;
  }();
}
