// See report_data.h.
#include "tools/report/report_data.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "tools/cli/cli_trial_options.h"
#include "tools/cli/episode_json.h"
#include "tools/cli/run_summary.h"
#include "tools/cli/text_format.h"
#include "tools/report/bounded_series.h"

namespace tstat::report {
namespace {

using cli::JsonNumber;
using cli::JsonString;

// A named series in bounded memory (bounded_series.h).
struct Series {
  Series() = default;
  Series(std::string series_name, std::string series_kind, Mode series_mode, std::size_t max_points)
      : name(std::move(series_name)),
        kind(std::move(series_kind)),
        mode(series_mode),
        points(max_points) {}
  void Add(std::int64_t x, double v) {
    points.Add(x, v);
    if (std::isfinite(v)) sum += v;
  }
  double mean() const { return points.empty() ? 0.0 : sum / static_cast<double>(points.count()); }

  std::string name, kind;
  Mode mode = Mode::kGlobal;
  BoundedSeries points;
  double sum = 0;  // of the finite values added
};

// One weight and its gradient, by their ids in the walked worker.
struct Layer {
  std::string name;
  std::uint32_t weight_id = 0, gradient_id = 0;
  bool has_gradient = false;
  Series weight, gradient;
  Series update, ratio;  // |w - w_prev| (the stored delta), and it over |w|
  double score = 0;
  // The first global step where its weight or gradient held a NaN or an
  // infinity (-1: none); the l2 norms count finite values only.
  std::int64_t first_nonfinite = -1;
};

template <class T>
std::string JsonArray(const std::vector<T>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ",";
    if constexpr (std::is_floating_point_v<T>) {
      out += JsonNumber(static_cast<double>(v[i]));
    } else {
      out += std::to_string(v[i]);
    }
  }
  return out + "]";
}

std::string SeriesJson(const std::string& id, const Series& s) {
  std::vector<std::int64_t> x;
  std::vector<std::vector<double>> y;
  s.points.Points(&x, &y);
  return "{\"id\":" + JsonString(id) + ",\"name\":" + JsonString(s.name) +
         ",\"kind\":" + JsonString(s.kind) + ",\"mode\":" + JsonString(ModeName(s.mode)) +
         ",\"points\":" + std::to_string(s.points.count()) + ",\"x\":" + JsonArray(x) +
         ",\"y\":" + JsonArray(y[0]) + "}";
}

// Series of `points` split by mode (TRAIN and EVAL curves apart).
std::vector<Series> ByMode(const std::string& name, const std::string& kind,
                           const std::vector<SeriesPoint>& points, std::size_t max_points) {
  std::vector<Series> out;
  for (const SeriesPoint& p : points) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Series& s) { return s.mode == p.step.mode; });
    if (it == out.end()) {
      out.emplace_back(name, kind, p.step.mode, max_points);
      it = out.end() - 1;
    }
    it->Add(p.step.global_step, p.value);
  }
  return out;
}

std::string WorkerJson(const WorkerSummary& w) {
  const PipelineCounters& c = w.counters;
  return "{\"rank\":" + std::to_string(w.rank) + ",\"host\":" + JsonString(w.host) +
         ",\"closed\":" + (w.closed ? "true" : "false") +
         ",\"segments\":" + std::to_string(w.segments) + ",\"bytes\":" + std::to_string(w.bytes) +
         ",\"steps_captured\":" + std::to_string(c.steps_captured) +
         ",\"records_written\":" + std::to_string(c.records_written) +
         ",\"records_lost\":" + std::to_string(c.records_lost) +
         ",\"raw_dropped\":" + std::to_string(c.raw_dropped) +
         ",\"write_errors\":" + std::to_string(c.write_errors) +
         ",\"stats_waits\":" + std::to_string(c.stats_waits) +
         ",\"step_seconds\":" + JsonNumber(c.capture.step_seconds) +
         ",\"capture_seconds\":" + JsonNumber(c.capture.capture_seconds) + "}";
}

// The weights (collection "weights") of `rank` with their gradients.
std::vector<Layer> FindLayers(const Trial& trial, int rank, std::size_t max_points) {
  TensorQuery q;
  q.collection = "weights";
  std::vector<Layer> layers;
  for (const std::string& name : trial.tensor_names(q)) {
    Result<TensorInfo> w = trial.tensor_info(name, rank);
    if (!w.ok()) continue;
    Layer l;
    l.name = name;
    l.weight_id = w->id;
    l.weight = Series(name, "weight", Mode::kGlobal, max_points);
    l.update = Series(name, "update", Mode::kGlobal, max_points);
    l.ratio = Series(name, "update_ratio", Mode::kGlobal, max_points);
    Result<TensorInfo> g = trial.tensor_info("gradient/" + name, rank);
    if (g.ok()) {
      l.has_gradient = true;
      l.gradient_id = g->id;
      l.gradient = Series("gradient/" + name, "gradient", Mode::kGlobal, max_points);
    }
    layers.push_back(std::move(l));
  }
  return layers;
}

// An activation (collection "activations"): its share of zeros (dead
// ReLU-like units) and of values in the saturation band (|x| >= 0.97 by
// default: tanh-like units) over steps.
struct Activation {
  std::string name;
  std::uint32_t id = 0;
  Series zero, band;
  // Where per-unit stats were captured (the dead_relu and saturation rules
  // ask for them): the share of units that are dead (every value 0) and of
  // units that are saturated (every value in the band) at each step.
  Series dead_units, saturated_units;
  double score = 0;  // the larger of the two shares' means
};

std::vector<Activation> FindActivations(const Trial& trial, int rank, std::size_t max_points) {
  TensorQuery q;
  q.collection = "activations";
  std::vector<Activation> out;
  for (const std::string& name : trial.tensor_names(q)) {
    Result<TensorInfo> info = trial.tensor_info(name, rank);
    if (!info.ok()) continue;
    Activation a;
    a.name = name;
    a.id = info->id;
    a.zero = Series(name, "zero_share", Mode::kGlobal, max_points);
    a.band = Series(name, "band_share", Mode::kGlobal, max_points);
    a.dead_units = Series(name, "dead_units", Mode::kGlobal, max_points);
    a.saturated_units = Series(name, "saturated_units", Mode::kGlobal, max_points);
    out.push_back(std::move(a));
  }
  return out;
}

// Exponent histograms of one tensor at the sampled steps.
struct Heatmap {
  std::vector<std::size_t> index;  // of the step in the worker's steps
  std::vector<std::int64_t> steps;
  std::vector<ExponentBins> bins;
};

// What the walks over a run have gathered so far: a live run (tstat serve)
// is walked again from where the last walk stopped.
// mean, min, std and max of a tensor over steps (the distribution bands;
// the points kept are chosen by the mean).
struct Band {
  explicit Band(std::size_t max_points) : points(max_points, 4) {}
  void Add(std::int64_t step, double mean, double min, double std, double max) {
    const double v[4] = {mean, min, std, max};
    points.Add(step, v);
  }
  BoundedSeries points;
};

struct WalkState {
  int rank = -1;
  // The bands of the tensors featured so far (read whole when a tensor is
  // first featured, then extended by each walk).
  std::unordered_map<std::uint32_t, Band> bands;
  std::vector<Layer> layers;
  std::vector<Activation> activations;
  std::unordered_map<std::uint32_t, Heatmap> sampled;
  std::size_t walked = 0;       // steps of the worker walked
  std::int64_t last_step = -1;  // the global step of the last one
  std::size_t stride = 1;       // heat maps sample every stride-th step
};

// Adds the layers and activations `trial` knows that `state` does not.
void AddNewTensors(const Trial& trial, std::size_t max_points, WalkState* state) {
  std::unordered_set<std::string> known;
  for (const Layer& l : state->layers) known.insert(l.name);
  for (Layer& l : FindLayers(trial, state->rank, max_points)) {
    if (!known.count(l.name)) state->layers.push_back(std::move(l));
  }
  known.clear();
  for (const Activation& a : state->activations) known.insert(a.name);
  for (Activation& a : FindActivations(trial, state->rank, max_points)) {
    if (!known.count(a.name)) state->activations.push_back(std::move(a));
  }
}

// Keeps every other sampled step of every heat map (the stride doubled).
void ThinSamples(WalkState* state) {
  state->stride *= 2;
  for (auto& [id, h] : state->sampled) {
    std::size_t kept = 0;
    for (std::size_t k = 0; k < h.index.size(); ++k) {
      if (h.index[k] % state->stride != 0) continue;
      h.index[kept] = h.index[k];
      h.steps[kept] = h.steps[k];
      h.bins[kept] = std::move(h.bins[k]);
      ++kept;
    }
    h.index.resize(kept);
    h.steps.resize(kept);
    h.bins.resize(kept);
  }
}

// One walk over the worker's steps not walked yet (one pass over the
// records, not a series read per tensor): every layer's l2 norms (and
// update norms), every activation's shares, and at every stride-th step the
// exponent histograms of every layer's tensors (the featured ones are known
// only once the layers are ranked).
Status WalkLayers(const Trial& trial, const std::vector<StepTime>& times, std::size_t heatmap_steps,
                  WalkState* state) {
  std::unordered_map<std::uint32_t, std::pair<Series*, Layer*>> by_id;
  for (Layer& l : state->layers) {
    by_id[l.weight_id] = {&l.weight, &l};
    if (l.has_gradient) by_id[l.gradient_id] = {&l.gradient, &l};
  }
  std::unordered_map<std::uint32_t, Activation*> activation_by_id;
  for (Activation& a : state->activations) activation_by_id[a.id] = &a;
  std::vector<TensorStatsRecord> records;
  for (std::size_t i = state->walked; i < times.size(); ++i) {
    const StepTime& t = times[i];
    TSTAT_RETURN_IF_ERROR(trial.step_records_into(state->rank, t.step.global_step, &records));
    // At most heatmap_steps sampled steps at any time (memory stays bounded).
    while (heatmap_steps > 0 && i / state->stride >= heatmap_steps) ThinSamples(state);
    const bool sampled = heatmap_steps > 0 && i % state->stride == 0;
    for (const TensorStatsRecord& r : records) {
      if (!r.has_stats) continue;
      if (auto b = state->bands.find(r.tensor_id); b != state->bands.end()) {
        b->second.Add(t.step.global_step, r.stats.mean, r.stats.min, r.stats.stddev(), r.stats.max);
      }
      auto a = activation_by_id.find(r.tensor_id);
      if (a != activation_by_id.end() && r.stats.count > 0) {
        const double count = static_cast<double>(r.stats.count);
        a->second->zero.Add(t.step.global_step, static_cast<double>(r.stats.zero_count) / count);
        a->second->band.Add(
            t.step.global_step,
            static_cast<double>(r.stats.band_lo_count + r.stats.band_hi_count) / count);
        if (r.per_channel && !r.per_channel->channels.empty()) {
          std::size_t dead = 0, saturated = 0;
          for (const TensorStats& c : r.per_channel->channels) {
            dead += c.count > 0 && c.zero_count == c.count;
            saturated += c.count > 0 && c.band_lo_count + c.band_hi_count == c.count;
          }
          const double units = static_cast<double>(r.per_channel->channels.size());
          a->second->dead_units.Add(t.step.global_step, static_cast<double>(dead) / units);
          a->second->saturated_units.Add(t.step.global_step,
                                         static_cast<double>(saturated) / units);
        }
      }
      auto it = by_id.find(r.tensor_id);
      if (it == by_id.end()) continue;
      it->second.first->Add(t.step.global_step, r.stats.l2);
      Layer* layer = it->second.second;
      if (r.delta && r.tensor_id == layer->weight_id) {
        layer->update.Add(t.step.global_step, r.delta->l2);
        if (r.stats.l2 > 0) layer->ratio.Add(t.step.global_step, r.delta->l2 / r.stats.l2);
      }
      const std::uint64_t nonfinite =
          r.stats.nan_count + r.stats.pos_inf_count + r.stats.neg_inf_count;
      if (nonfinite > 0 && layer->first_nonfinite < 0) layer->first_nonfinite = t.step.global_step;
      if (sampled && r.exponent_histogram) {
        Heatmap& h = state->sampled[r.tensor_id];
        h.index.push_back(i);
        h.steps.push_back(t.step.global_step);
        h.bins.push_back(*r.exponent_histogram);
      }
    }
    // Per step: a walk that fails later resumes after it, not before.
    state->walked = i + 1;
    state->last_step = t.step.global_step;
  }
  return Status::OK();
}

// Whether `state` was walked over the steps `trial` still has (a live run
// only grows; anything else is walked again from the start).
bool StillContinues(const std::vector<StepTime>& times, const WalkState& state) {
  if (state.walked == 0) return true;
  return times.size() >= state.walked &&
         times[state.walked - 1].step.global_step == state.last_step;
}

std::string HeatmapJson(const std::string& name, const Heatmap& map) {
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  for (const ExponentBins& b : map.bins) {
    if (b.counts.empty()) continue;
    lo = std::min(lo, b.first_bin);
    hi = std::max(hi, b.first_bin + static_cast<int>(b.counts.size()) - 1);
  }
  if (map.steps.empty() || lo > hi) return "";
  std::string rows = "[";
  for (std::size_t s = 0; s < map.bins.size(); ++s) {
    std::vector<std::uint64_t> row(static_cast<std::size_t>(hi - lo + 1), 0);
    const ExponentBins& b = map.bins[s];
    for (std::size_t i = 0; i < b.counts.size(); ++i) {
      row[static_cast<std::size_t>(b.first_bin - lo) + i] = b.counts[i];
    }
    rows += (s ? "," : "") + JsonArray(row);
  }
  rows += "]";
  return "{\"name\":" + JsonString(name) + ",\"steps\":" + JsonArray(map.steps) +
         ",\"first_exp\":" + std::to_string(ExponentHistogram::BinExponent(lo)) +
         ",\"counts\":" + rows + "}";
}

// The band of `name` over every step loaded so far, read as series (when
// the tensor is first featured); nullopt when a stat cannot be read.
std::optional<Band> ReadBand(const Trial& trial, const std::string& name, int rank,
                             std::size_t max_points) {
  const StatField fields[] = {StatField::kMean, StatField::kMin, StatField::kStd, StatField::kMax};
  std::vector<std::vector<SeriesPoint>> s;
  for (StatField f : fields) {
    Result<std::vector<SeriesPoint>> r = trial.series(name, f, Mode::kGlobal, rank);
    if (!r.ok()) return std::nullopt;
    s.push_back(std::move(r).value());
  }
  Band band(max_points);
  for (std::size_t i = 0; i < s[0].size(); ++i) {
    band.Add(s[0][i].step.global_step, s[0][i].value, s[1][i].value, s[2][i].value, s[3][i].value);
  }
  return band;
}

std::string BandJson(const std::string& name, const Band& band) {
  if (band.points.empty()) return "";
  std::vector<std::int64_t> x;
  std::vector<std::vector<double>> v;  // mean, min, std, max
  band.points.Points(&x, &v);
  return "{\"name\":" + JsonString(name) + ",\"x\":" + JsonArray(x) +
         ",\"min\":" + JsonArray(v[1]) + ",\"mean\":" + JsonArray(v[0]) +
         ",\"std\":" + JsonArray(v[2]) + ",\"max\":" + JsonArray(v[3]) + "}";
}

std::string LabelsJson(const Trial& trial, int rank) {
  TensorQuery q;
  q.collection = "labels";
  std::string out = "[";
  bool first = true;
  for (const std::string& name : trial.tensor_names(q)) {
    Result<std::vector<SeriesPoint>> c = trial.series(name, StatField::kCount, Mode::kGlobal, rank);
    if (!c.ok() || c->empty()) continue;
    Result<TensorStatsRecord> r =
        trial.record(name, c->back().step.global_step, Mode::kGlobal, rank);
    if (!r.ok() || !r->label_counts) continue;
    out += std::string(first ? "" : ",") + "{\"name\":" + JsonString(name) +
           ",\"step\":" + std::to_string(c->back().step.global_step) +
           ",\"counts\":" + JsonArray(r->label_counts->counts) + ",\"confusion\":";
    if (r->confusion && r->confusion->classes > 0) {
      out += "{\"classes\":" + std::to_string(r->confusion->classes) +
             ",\"counts\":" + JsonArray(r->confusion->counts) +
             ",\"invalid\":" + std::to_string(r->confusion->invalid) + "}";
    } else {
      out += "null";
    }
    out += "}";
    first = false;
  }
  return out + "]";
}

std::string RunName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

Result<std::string> RunJson(const std::string& path, const ReportOptions& o, WalkState* state) {
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Trial> trial, Trial::Open(path, cli::CliTrialOptions()));
  TSTAT_ASSIGN_OR_RETURN(cli::RunSummary summary, cli::SummarizeRun(*trial, path, -1));
  std::ostringstream j;
  j << "{\"name\":" << JsonString(RunName(path)) << ",\"path\":" << JsonString(path)
    << ",\"complete\":" << (summary.loaded_all_steps ? "true" : "false")
    << ",\"problem\":" << JsonString(summary.load_problem) << ",\"tensors\":" << summary.tensors
    << ",\"scalars\":" << summary.scalars << ",\"workers\":[";
  for (std::size_t i = 0; i < summary.workers.size(); ++i) {
    j << (i ? "," : "") << WorkerJson(summary.workers[i]);
  }
  j << "],\"modes\":[";
  for (std::size_t i = 0; i < summary.modes.size(); ++i) {
    const cli::ModeSteps& m = summary.modes[i];
    j << (i ? "," : "") << "{\"mode\":" << JsonString(ModeName(m.mode)) << ",\"count\":" << m.count
      << ",\"first\":" << m.first.global_step << ",\"last\":" << m.last.global_step << "}";
  }
  j << "],\"episodes\":[";
  for (std::size_t i = 0; i < summary.episodes.size(); ++i) {
    j << (i ? "," : "") << cli::EpisodeJson(summary.episodes[i]);
  }
  bool first = true;
  // Every rules summary's texts of one kind, as a JSON array's items.
  auto texts = [&](std::vector<std::string> rules::RulesSummary::*field) {
    first = true;
    for (const rules::RulesSummary& r : summary.rules) {
      for (const std::string& t : r.*field) {
        j << (first ? "" : ",") << JsonString(t);
        first = false;
      }
    }
  };
  j << "],\"could_not_judge\":[";
  texts(&rules::RulesSummary::diagnostics);
  j << "],\"notes\":[";
  texts(&rules::RulesSummary::notes);
  j << "],\"series\":[";
  std::size_t next_id = 0;
  first = true;
  auto emit = [&](const Series& s) {
    const std::string id = "s" + std::to_string(next_id++);
    j << (first ? "" : ",") << SeriesJson(id, s);
    first = false;
    return id;
  };
  const int rank = summary.workers.empty() ? 0 : summary.workers.front().rank;
  for (const std::string& name : trial->scalar_names()) {
    Result<std::vector<SeriesPoint>> points = trial->scalar_series(name, Mode::kGlobal, rank);
    if (!points.ok()) continue;
    for (const Series& s : ByMode(name, "scalar", *points, o.max_points)) emit(s);
  }
  TensorQuery losses;
  losses.collection = "losses";
  for (const std::string& name : trial->tensor_names(losses)) {
    Result<std::vector<SeriesPoint>> points =
        trial->series(name, StatField::kMean, Mode::kGlobal, rank);
    if (!points.ok()) continue;
    for (const Series& s : ByMode(name, "loss", *points, o.max_points)) emit(s);
  }
  const std::vector<StepTime> times = trial->step_times(rank);
  if (state->rank != rank || !StillContinues(times, *state)) {
    *state = WalkState();
    state->rank = rank;
  }
  AddNewTensors(*trial, o.max_points, state);
  TSTAT_RETURN_IF_ERROR(
      WalkLayers(*trial, times, o.heatmap_tensors > 0 ? o.heatmap_steps : 0, state));
  // Ranked through pointers: the state keeps its order.
  std::vector<Layer*> layers;
  for (Layer& l : state->layers) {
    l.score = l.first_nonfinite >= 0
                  ? std::numeric_limits<double>::infinity()
                  : UnusualScore((l.has_gradient ? l.gradient : l.weight).points.KeptValues());
    layers.push_back(&l);
  }
  const std::unordered_map<std::uint32_t, Heatmap>& sampled = state->sampled;
  // Most unusual first; among layers that went non-finite, the first to.
  std::stable_sort(layers.begin(), layers.end(), [](const Layer* a, const Layer* b) {
    if (a->score != b->score) return a->score > b->score;
    return a->first_nonfinite < b->first_nonfinite;
  });
  std::vector<std::string> layer_json;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = *layers[i];
    std::string weight_id, gradient_id, update_id, ratio_id;
    if (i < o.chart_layers) {
      weight_id = emit(l.weight);
      if (l.has_gradient) gradient_id = emit(l.gradient);
      if (!l.update.points.empty()) update_id = emit(l.update);
      if (!l.ratio.points.empty()) ratio_id = emit(l.ratio);
    }
    auto last = [](const Series& s) { return s.points.last(); };
    layer_json.push_back(
        "{\"name\":" + JsonString(l.name) +
        ",\"score\":" + (std::isinf(l.score) ? std::string("\"inf\"") : JsonNumber(l.score)) +
        ",\"weight\":" + JsonString(weight_id) + ",\"gradient\":" + JsonString(gradient_id) +
        ",\"update\":" + JsonString(update_id) + ",\"ratio\":" + JsonString(ratio_id) +
        ",\"weight_l2\":" + JsonNumber(last(l.weight)) +
        ",\"gradient_l2\":" + JsonNumber(last(l.gradient)) +
        ",\"first_nonfinite_step\":" + std::to_string(l.first_nonfinite) +
        ",\"steps\":" + std::to_string(l.weight.points.count()) + "}");
  }
  // Activations, the most dead or saturated first; the top ones charted.
  std::vector<Activation*> activations;
  for (Activation& a : state->activations) {
    a.score = std::max(a.zero.mean(), a.band.mean());
    activations.push_back(&a);
  }
  std::stable_sort(activations.begin(), activations.end(),
                   [](const Activation* a, const Activation* b) { return a->score > b->score; });
  std::vector<std::string> activation_json;
  for (std::size_t i = 0; i < activations.size(); ++i) {
    const Activation& a = *activations[i];
    std::string zero_id, band_id, dead_id, saturated_id;
    if (i < o.chart_layers && !a.zero.points.empty()) {
      zero_id = emit(a.zero);
      band_id = emit(a.band);
      if (!a.dead_units.points.empty()) {
        dead_id = emit(a.dead_units);
        saturated_id = emit(a.saturated_units);
      }
    }
    auto last = [](const Series& s) { return s.points.last(); };
    activation_json.push_back(
        "{\"name\":" + JsonString(a.name) + ",\"score\":" + JsonNumber(a.score) +
        ",\"zero\":" + JsonString(zero_id) + ",\"band\":" + JsonString(band_id) +
        ",\"dead_units\":" + JsonString(dead_id) + ",\"saturated_units\":" +
        JsonString(saturated_id) + ",\"zero_last\":" + JsonNumber(last(a.zero)) +
        ",\"band_last\":" + JsonNumber(last(a.band)) + "}");
  }
  j << "],\"layers\":[";
  for (std::size_t i = 0; i < layer_json.size(); ++i) j << (i ? "," : "") << layer_json[i];
  j << "],\"activations\":[";
  for (std::size_t i = 0; i < activation_json.size(); ++i) {
    j << (i ? "," : "") << activation_json[i];
  }
  // Heat maps and bands of the top layers' tensors.
  std::vector<std::pair<std::string, std::uint32_t>> featured;
  for (const Layer* l : layers) {
    if (featured.size() >= o.heatmap_tensors) break;
    if (l->has_gradient) featured.emplace_back(l->gradient.name, l->gradient_id);
    if (featured.size() < o.heatmap_tensors) featured.emplace_back(l->name, l->weight_id);
  }
  j << "],\"heatmaps\":[";
  first = true;
  for (const auto& [name, id] : featured) {
    auto it = sampled.find(id);
    const std::string h = it == sampled.end() ? "" : HeatmapJson(name, it->second);
    if (h.empty()) continue;
    j << (first ? "" : ",") << h;
    first = false;
  }
  j << "],\"bands\":[";
  first = true;
  for (const auto& [name, id] : featured) {
    auto cached = state->bands.find(id);
    if (cached == state->bands.end()) {
      std::optional<Band> band = ReadBand(*trial, name, rank, o.max_points);
      if (!band) continue;
      cached = state->bands.emplace(id, std::move(*band)).first;
    }
    const std::string b = BandJson(name, cached->second);
    if (b.empty()) continue;
    j << (first ? "" : ",") << b;
    first = false;
  }
  j << "],\"labels\":" << LabelsJson(*trial, rank) << "}";
  return j.str();
}

}  // namespace

double UnusualScore(const std::vector<double>& values) {
  std::vector<double> positive;
  for (double v : values) {
    if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
    if (v > 0) positive.push_back(v);
  }
  // A norm that is zero at some step (a gradient that vanished entirely, a
  // weight that was zeroed) is as far from the rest as a float can tell.
  if (!values.empty() && positive.size() < values.size()) return kVanishedScore;
  if (positive.size() < 2) return 0.0;
  std::vector<double> sorted = positive;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  const double median = sorted[sorted.size() / 2];
  double score = 0.0;
  for (double v : positive) score = std::max(score, std::fabs(std::log10(v / median)));
  return score;
}

struct ReportBuilder::State {
  std::vector<WalkState> runs;
};

ReportBuilder::ReportBuilder(std::vector<std::string> runs, ReportOptions options)
    : runs_(std::move(runs)), options_(options), state_(std::make_unique<State>()) {
  state_->runs.resize(runs_.size());
}

ReportBuilder::~ReportBuilder() = default;

Result<std::string> ReportBuilder::Build(std::uint64_t revision) {
  std::time_t now = std::time(nullptr);
  char when[32] = "";
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const double unix_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::string out = "{\"version\":1,\"generated\":" + JsonString(when) +
                    ",\"generated_unix\":" + JsonNumber(unix_now);
  if (options_.live_interval_ms > 0) {
    out += ",\"live\":{\"interval_ms\":" + std::to_string(options_.live_interval_ms) +
           ",\"revision\":" + std::to_string(revision) + "}";
  }
  out += ",\"runs\":[";
  for (std::size_t i = 0; i < runs_.size(); ++i) {
    Result<std::string> run = RunJson(runs_[i], options_, &state_->runs[i]);
    if (!run.ok()) return run.status().WithContext(runs_[i]);
    out += (i ? "," : "") + *run;
  }
  return out + "]}";
}

Result<std::string> BuildReportJson(const std::vector<std::string>& runs,
                                    const ReportOptions& options) {
  return ReportBuilder(runs, options).Build(0);
}

}  // namespace tstat::report
