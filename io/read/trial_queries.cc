// RunTrial queries (see trial_impl.h). "worker = -1" searches the workers in
// rank order and answers from the first that has the data; drops(-1)
// concatenates every worker's drops in rank order.
#include <re2/re2.h>

#include <algorithm>
#include <set>

#include "io/read/raw_dataset.h"
#include "io/read/segment_reader.h"
#include "io/read/trial_impl.h"

namespace tstat::io {
namespace {

// Segment `ordinal` of `w`.
Result<const SegmentFile*> SegmentOf(const WorkerIndex& w, std::uint32_t ordinal) {
  if (ordinal >= w.segment_files.size()) {
    return Status::Internal("worker " + std::to_string(w.rank) + ": no segment " +
                            std::to_string(ordinal));
  }
  return &w.segment_files[ordinal];
}

std::string StepText(std::int64_t step, Mode mode) {
  return std::string(mode == Mode::kGlobal ? "global step " : "step ") + std::to_string(step) +
         (mode == Mode::kGlobal ? "" : std::string(" of mode ") + ModeName(mode));
}

bool ModeMatches(const StepKey& key, Mode mode) {
  return mode == Mode::kGlobal || key.mode == mode;
}

void SortBySteps(std::vector<SeriesPoint>* points) {
  std::stable_sort(points->begin(), points->end(), [](const SeriesPoint& a, const SeriesPoint& b) {
    return a.step.global_step < b.step.global_step;
  });
}

}  // namespace

Result<std::vector<const WorkerIndex*>> RunTrial::Candidates(int worker) const {
  std::vector<const WorkerIndex*> out;
  if (worker >= 0) {
    auto it = workers_.find(worker);
    if (it == workers_.end()) {
      return Status::NotFound(run_dir_ + ": no worker " + std::to_string(worker));
    }
    out.push_back(&it->second.index);
    return out;
  }
  for (const auto& entry : workers_) out.push_back(&entry.second.index);
  return out;
}

Status RunTrial::MissingRecord(int worker, const std::string& what, std::int64_t step,
                               Mode mode) const {
  bool passed = false;
  if (worker < 0) {
    passed = PassedStep(step, mode);
  } else {
    // A saved step is complete (segments hold whole steps), so a worker that
    // saved the step without the data will not add it later.
    const WorkerIndex& w = workers_.at(worker).index;
    passed = w.closed || w.GlobalStep(step, mode) || w.PassedStep(step, mode);
  }
  if (!passed)
    return Status::Unavailable(what + ": " + StepText(step, mode) + " is not available yet");
  return Status::StepUnavailable(what + ": " + StepText(step, mode) + " was not saved");
}

Result<std::shared_ptr<const WorkerIndex>> RunTrial::Records(const WorkerIndex& w,
                                                             std::uint32_t ordinal) const {
  TSTAT_ASSIGN_OR_RETURN(const SegmentFile* file, SegmentOf(w, ordinal));
  return cache_.Get(w.rank, ordinal, *file, [&w](std::uint32_t id) { return w.Knows(id); });
}

Result<std::shared_ptr<const SegmentStatsRows>> RunTrial::StatsRows(const WorkerIndex& w,
                                                                    std::uint32_t ordinal) const {
  TSTAT_ASSIGN_OR_RETURN(const SegmentFile* file, SegmentOf(w, ordinal));
  return cache_.GetStatsRows(w.rank, ordinal, *file,
                             [&w](std::uint32_t id) { return w.Knows(id); });
}

Result<const std::map<std::uint32_t, std::uint8_t>*> RunTrial::TensorModes(
    const WorkerIndex& w) const {
  ModesSeen& seen = modes_[w.rank];
  for (; seen.segments < w.segment_files.size(); ++seen.segments) {
    // From the catalog's stats layout when the segment has one: no read.
    if (const StatsLayout* layout = w.segment_files[seen.segments].stats_layout.get()) {
      for (const StatsTensorRange& r : layout->tensors) {
        for (std::uint64_t id = r.tensor_id; id < std::uint64_t{r.tensor_id} + r.count; ++id) {
          seen.modes[static_cast<std::uint32_t>(id)] |= r.modes;
        }
      }
      continue;
    }
    TSTAT_ASSIGN_OR_RETURN(std::shared_ptr<const WorkerIndex> records,
                           Records(w, static_cast<std::uint32_t>(seen.segments)));
    for (const auto& [id, ts] : records->series) {
      std::uint8_t& mask = seen.modes[id];
      for (const StepKey& k : ts.keys)
        mask |= static_cast<std::uint8_t>(1u << static_cast<int>(k.mode));
    }
  }
  return &seen.modes;
}

std::vector<std::string> RunTrial::tensor_names(const TensorQuery& query) const {
  std::unique_ptr<RE2> regex;
  if (!query.regex.empty()) {
    regex = std::make_unique<RE2>(query.regex, RE2::Quiet);
    if (!regex->ok()) return {};  // an invalid pattern matches nothing
  }
  std::set<std::string> names;
  for (const auto& entry : workers_) {
    const WorkerIndex& w = entry.second.index;
    const std::map<std::uint32_t, std::uint8_t>* modes = nullptr;
    if (query.mode != Mode::kGlobal) {
      // A worker whose records cannot be read answers from none.
      Result<const std::map<std::uint32_t, std::uint8_t>*> m = TensorModes(w);
      if (!m.ok()) continue;
      modes = m.value();
    }
    for (const auto& t : w.tensors) {
      const TensorInfo& info = t.second;
      if (info.kind != TensorKind::kTensor) continue;
      if (regex && !RE2::PartialMatch(info.name, *regex)) continue;
      if (!query.collection.empty() && std::find(info.collections.begin(), info.collections.end(),
                                                 query.collection) == info.collections.end()) {
        continue;
      }
      if (modes != nullptr) {
        auto m = modes->find(info.id);
        if (m == modes->end() || (m->second & (1u << static_cast<int>(query.mode))) == 0) continue;
      }
      names.insert(info.name);
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

std::vector<std::string> RunTrial::scalar_names() const {
  std::set<std::string> names;
  for (const auto& entry : workers_) {
    for (const auto& t : entry.second.index.tensors) {
      if (t.second.kind == TensorKind::kScalar) names.insert(t.second.name);
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

std::vector<std::string> RunTrial::collections() const {
  std::set<std::string> names;
  for (const auto& entry : workers_) {
    for (const auto& t : entry.second.index.tensors) {
      names.insert(t.second.collections.begin(), t.second.collections.end());
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<TensorInfo> RunTrial::tensor_info(const std::string& name, int worker) const {
  TSTAT_ASSIGN_OR_RETURN(std::vector<const WorkerIndex*> searched, Candidates(worker));
  for (const WorkerIndex* w : searched) {
    if (const TensorInfo* t = w->FindTensor(name)) return *t;
  }
  return Status::NotFound("no tensor '" + name + "' in " + run_dir_);
}

std::vector<StepKey> RunTrial::steps(Mode mode) const {
  if (workers_.size() == 1) {  // its steps are in order already
    std::vector<StepKey> out;
    const auto& steps = workers_.begin()->second.index.steps;
    out.reserve(steps.size());
    for (const auto& s : steps) {
      if (ModeMatches(s.second.key, mode)) out.push_back(s.second.key);
    }
    return out;
  }
  std::map<std::int64_t, StepKey> all;
  for (const auto& entry : workers_) {
    for (const auto& s : entry.second.index.steps) {
      if (ModeMatches(s.second.key, mode)) all.emplace(s.first, s.second.key);
    }
  }
  std::vector<StepKey> out;
  out.reserve(all.size());
  for (const auto& s : all) out.push_back(s.second);
  return out;
}

std::vector<StepTime> RunTrial::step_times(int worker) const {
  std::vector<StepTime> out;
  auto it = workers_.find(worker);
  if (it == workers_.end()) return out;
  out.reserve(it->second.index.steps.size());
  for (const auto& s : it->second.index.steps) {
    const StepEntry& e = s.second;
    out.push_back({e.key, e.wall_time, e.step_seconds, e.capture_seconds});
  }
  return out;
}

std::string RunTrial::config_json(int worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? std::string() : it->second.index.config_json;
}

Result<TensorStatsRecord> RunTrial::record(const std::string& name, std::int64_t step, Mode mode,
                                           int worker) const {
  TSTAT_ASSIGN_OR_RETURN(std::vector<const WorkerIndex*> searched, Candidates(worker));
  std::vector<const WorkerIndex*> knowing;
  for (const WorkerIndex* w : searched) {
    const TensorInfo* t = w->FindTensor(name);
    if (!t) continue;
    knowing.push_back(w);
    const std::optional<std::int64_t> g = w->GlobalStep(step, mode);
    auto step_entry = g ? w->steps.find(*g) : w->steps.end();
    if (step_entry == w->steps.end()) continue;
    TSTAT_ASSIGN_OR_RETURN(std::shared_ptr<const WorkerIndex> records,
                           Records(*w, step_entry->second.segment));
    const TensorSeries* ts = records->FindSeries(t->id);
    if (!ts) continue;
    const std::ptrdiff_t row = ts->Find(*g);
    if (row >= 0) return records->MakeRecord(t->id, *ts, static_cast<std::size_t>(row));
  }
  if (knowing.empty()) return Status::NotFound("no tensor '" + name + "' in " + run_dir_);
  return MissingRecord(worker, "tensor '" + name + "'", step, mode);
}

Result<TensorStats> RunTrial::stats(const std::string& name, std::int64_t step, Mode mode,
                                    int worker) const {
  TSTAT_ASSIGN_OR_RETURN(TensorStatsRecord r, record(name, step, mode, worker));
  if (!r.has_stats) {
    return Status::NotFound("tensor '" + name + "' has no stat set at " + StepText(step, mode) +
                            " (label counts only)");
  }
  return r.stats;
}

Result<std::vector<SeriesPoint>> RunTrial::series(const std::string& name, StatField field,
                                                  Mode mode, int worker) const {
  TSTAT_ASSIGN_OR_RETURN(std::vector<const WorkerIndex*> searched, Candidates(worker));
  bool known = false;
  for (const WorkerIndex* w : searched) {
    const TensorInfo* t = w->FindTensor(name);
    if (!t) continue;
    known = true;
    // Segment by segment, in order: one segment's records in memory at a
    // time beyond the cache.
    std::vector<SeriesPoint> points;
    bool sorted = true;
    const auto add = [&](const StepKey& key, const TensorStats& stats) {
      if (!points.empty() && points.back().step.global_step >= key.global_step) sorted = false;
      points.push_back(SeriesPoint{key, StatValue(stats, field)});
    };
    for (std::uint32_t seg = 0; seg < w->segment_files.size(); ++seg) {
      // A segment whose records are indexed already answers from its index;
      // any other reads its stats table alone.
      if (std::shared_ptr<const WorkerIndex> records = cache_.Peek(w->rank, seg)) {
        const TensorSeries* ts = records->FindSeries(t->id);
        if (!ts) continue;
        for (std::size_t i = 0; i < ts->keys.size(); ++i) {
          if (ts->has_stats[i] && ModeMatches(ts->keys[i], mode)) add(ts->keys[i], ts->stats[i]);
        }
        continue;
      }
      const SegmentFile& file = w->segment_files[seg];
      if (file.stats_layout) {  // its chunks that hold the tensor's rows, alone
        if (!chunk_reader_) {
          TSTAT_ASSIGN_OR_RETURN(chunk_reader_, StatsChunkReader::Make());
        }
        series_rows_.clear();
        TSTAT_RETURN_IF_ERROR(chunk_reader_->ReadTensorRows(
            file.path, file.bytes, *file.stats_layout, t->id, &series_rows_));
        for (const StatsRow& r : series_rows_) {
          const StepKey key{r.global_step, static_cast<Mode>(r.mode), r.mode_step};
          if (r.has_stats && ModeMatches(key, mode)) add(key, FromStored(r.s));
        }
        continue;
      }
      TSTAT_ASSIGN_OR_RETURN(std::shared_ptr<const SegmentStatsRows> rows, StatsRows(*w, seg));
      rows->ForEach(t->id, [&](const StatsRow& r) {
        const StepKey key{r.global_step, static_cast<Mode>(r.mode), r.mode_step};
        if (r.has_stats && ModeMatches(key, mode)) add(key, FromStored(r.s));
      });
    }
    if (points.empty()) continue;  // this worker has no such data: try the next
    if (!sorted) SortBySteps(&points);
    return points;
  }
  if (!known) return Status::NotFound("no tensor '" + name + "' in " + run_dir_);
  return std::vector<SeriesPoint>();
}

Result<std::vector<SeriesPoint>> RunTrial::scalar_series(const std::string& name, Mode mode,
                                                         int worker) const {
  TSTAT_ASSIGN_OR_RETURN(std::vector<const WorkerIndex*> searched, Candidates(worker));
  bool known = false;
  for (const WorkerIndex* w : searched) {
    const TensorInfo* t = w->FindTensor(name);
    if (!t || t->kind != TensorKind::kScalar) continue;
    known = true;
    auto it = w->scalars.find(t->id);
    if (it == w->scalars.end() || it->second.empty()) continue;
    std::vector<SeriesPoint> points;
    for (const ScalarPoint& p : it->second) {
      if (ModeMatches(p.key, mode)) points.push_back(SeriesPoint{p.key, p.value});
    }
    if (points.empty()) continue;
    SortBySteps(&points);
    return points;
  }
  if (!known) return Status::NotFound("no scalar '" + name + "' in " + run_dir_);
  return std::vector<SeriesPoint>();
}

Result<RawTensor> RunTrial::raw(const std::string& name, std::int64_t step, Mode mode,
                                int worker) const {
  TSTAT_ASSIGN_OR_RETURN(std::vector<const WorkerIndex*> searched, Candidates(worker));
  std::vector<const WorkerIndex*> knowing;
  for (const WorkerIndex* w : searched) {
    const TensorInfo* t = w->FindTensor(name);
    if (!t) continue;
    knowing.push_back(w);
    const std::optional<std::int64_t> g = w->GlobalStep(step, mode);
    auto it = w->raws.find(t->id);
    if (!g || it == w->raws.end()) continue;
    for (const RawRef& ref : it->second) {
      if (ref.key.global_step != *g) continue;
      if (options_.isolate_segment_reads)
        TSTAT_RETURN_IF_ERROR(CheckIsolated(ref.file, false, false));
      TSTAT_ASSIGN_OR_RETURN(std::vector<std::uint8_t> bytes,
                             ReadRawDataset(ref.file, ref.dataset, ref.dtype, ref.shape,
                                            ref.byte_offset, ref.byte_count));
      RawTensor out;
      out.dtype = ref.dtype;
      out.shape = ref.shape;
      out.bytes = std::move(bytes);
      return out;
    }
  }
  if (knowing.empty()) return Status::NotFound("no tensor '" + name + "' in " + run_dir_);
  return MissingRecord(worker, "raw snapshot of '" + name + "'", step, mode);
}

std::vector<StepKey> RunTrial::raw_steps(const std::string& name, int worker) const {
  Result<std::vector<const WorkerIndex*>> searched = Candidates(worker);
  if (!searched.ok()) return {};
  for (const WorkerIndex* w : searched.value()) {
    const TensorInfo* t = w->FindTensor(name);
    if (!t) continue;
    auto it = w->raws.find(t->id);
    if (it == w->raws.end() || it->second.empty()) continue;
    std::vector<StepKey> keys;
    for (const RawRef& ref : it->second) keys.push_back(ref.key);
    std::stable_sort(keys.begin(), keys.end(), [](const StepKey& a, const StepKey& b) {
      return a.global_step < b.global_step;
    });
    return keys;
  }
  return {};
}

Result<std::vector<TensorStatsRecord>> RunTrial::step_records(int worker,
                                                              std::int64_t global_step) const {
  std::vector<TensorStatsRecord> out;
  TSTAT_RETURN_IF_ERROR(step_records_into(worker, global_step, &out));
  return out;
}

Status RunTrial::step_records_into(int worker, std::int64_t global_step,
                                   std::vector<TensorStatsRecord>* out) const {
  TSTAT_ASSIGN_OR_RETURN(std::vector<const WorkerIndex*> searched, Candidates(worker));
  if (worker < 0) return Status::InvalidArgument("step_records needs a worker rank");
  const WorkerIndex* w = searched.front();
  auto it = w->steps.find(global_step);
  if (it == w->steps.end()) {
    return MissingRecord(worker, "worker " + std::to_string(worker), global_step, Mode::kGlobal);
  }
  TSTAT_ASSIGN_OR_RETURN(const SegmentFile* file, SegmentOf(*w, it->second.segment));
  TSTAT_ASSIGN_OR_RETURN(std::shared_ptr<const SegmentSteps> steps,
                         cache_.GetStep(
                             w->rank, it->second.segment, *file,
                             [w](std::uint32_t id) { return w->Knows(id); }, global_step));
  steps->Fill(global_step, out);
  return Status::OK();
}

std::vector<DropRecord> RunTrial::drops(int worker) const {
  Result<std::vector<const WorkerIndex*>> searched = Candidates(worker);
  if (!searched.ok()) return {};
  std::vector<DropRecord> out;
  for (const WorkerIndex* w : searched.value()) {
    out.insert(out.end(), w->drops.begin(), w->drops.end());
  }
  return out;
}

}  // namespace tstat::io
