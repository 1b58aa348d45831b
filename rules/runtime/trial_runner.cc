// TrialRunner: steps of a run on disk, fed to a RuleEngine in order as they
// become complete (see trial_runner.h).
#include "rules/runtime/trial_runner.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "rules/engine/tick.h"

namespace tstat::rules {

// The tensors and scalars of one worker, by id (ids are dense per worker;
// element addresses are stable).
class TrialRunner::Catalog final : public TensorCatalog {
 public:
  const TensorInfo* Find(std::uint32_t id) const override {
    return id < by_id.size() ? by_id[id].get() : nullptr;
  }
  void Add(TensorInfo info) {
    const std::uint32_t id = info.id;
    if (id >= by_id.size()) by_id.resize(id + 1);
    if (!by_id[id]) by_id[id] = std::make_unique<TensorInfo>(std::move(info));
  }
  std::vector<std::unique_ptr<TensorInfo>> by_id;
  std::set<std::string> names;
};

TrialRunner::TrialRunner(std::unique_ptr<Trial> trial, std::vector<std::unique_ptr<Rule>> rules,
                         TrialRunnerOptions options)
    : trial_(std::move(trial)), options_(std::move(options)) {
  // The runner feeds only complete steps, in step order and worker order, so
  // the engine need not wait for other workers (world_size 1: each part is
  // evaluated as it is fed, without a copy).
  engine_ = std::make_unique<RuleEngine>(std::move(rules), EngineOptions{1});
}

TrialRunner::~TrialRunner() = default;

Result<std::unique_ptr<TrialRunner>> TrialRunner::Open(const std::string& run_dir,
                                                       std::vector<std::unique_ptr<Rule>> rules,
                                                       TrialRunnerOptions options) {
  // The histograms are read only if a rule reads them.
  bool histograms = false;
  for (const std::unique_ptr<Rule>& r : rules)
    histograms = histograms || r->ReadsExponentHistograms();
  options.trial.exponent_histograms = options.trial.exponent_histograms && histograms;
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Trial> trial, Trial::Open(run_dir, options.trial));
  return std::unique_ptr<TrialRunner>(
      new TrialRunner(std::move(trial), std::move(rules), std::move(options)));
}

bool TrialRunner::run_closed() const { return trial_->loaded_all_steps(); }

void TrialRunner::Warn(const std::string& warning) {
  if (!warned_.insert(warning).second) return;
  warnings_.push_back(warning);
  if (options_.on_warning) options_.on_warning(warning);
}

void TrialRunner::UpdateCatalogs() {
  std::vector<std::string> names = trial_->tensor_names();
  const std::vector<std::string> scalars = trial_->scalar_names();
  names.insert(names.end(), scalars.begin(), scalars.end());
  for (const WorkerSummary& w : trial_->workers()) {
    std::unique_ptr<Catalog>& c = catalogs_[w.rank];
    if (!c) c = std::make_unique<Catalog>();
    for (const std::string& name : names) {
      if (c->names.count(name)) continue;
      Result<TensorInfo> info = trial_->tensor_info(name, w.rank);
      if (!info.ok()) continue;  // another worker's tensor
      c->names.insert(name);
      c->Add(std::move(info).value());
    }
  }
}

void TrialRunner::CollectScalars(int worker) {
  Catalog& c = *catalogs_[worker];
  for (const std::string& name : trial_->scalar_names()) {
    Result<TensorInfo> info = trial_->tensor_info(name, worker);
    if (!info.ok()) continue;  // another worker's scalar
    if (c.names.insert(name).second) c.Add(info.value());
    Result<std::vector<SeriesPoint>> series = trial_->scalar_series(name, Mode::kGlobal, worker);
    if (!series.ok()) continue;
    auto taken = scalar_taken_[worker].emplace(name, last_fed_).first;
    for (const SeriesPoint& p : series.value()) {
      if (p.step.global_step <= taken->second) continue;
      scalars_[worker][p.step.global_step].push_back(ScalarRecord{info->id, p.value, 0.0});
      taken->second = p.step.global_step;
    }
  }
}

void TrialRunner::FeedSteps(bool all, std::vector<Finding>* findings) {
  const std::vector<StepKey> steps = trial_->steps(Mode::kGlobal);
  auto first = std::upper_bound(steps.begin(), steps.end(), last_fed_,
                                [](std::int64_t s, const StepKey& k) { return s < k.global_step; });
  if (first == steps.end()) return;  // nothing new: no catalog or scalar work
  if (catalogs_.size() != trial_->workers().size()) UpdateCatalogs();  // a new worker
  std::vector<int> ranks;
  for (const auto& kv : catalogs_) ranks.push_back(kv.first);
  for (int rank : ranks) CollectScalars(rank);

  for (auto it = first; it != steps.end(); ++it) {
    const std::int64_t s = it->global_step;
    // The batches of the previous step are refilled: their records' buffers
    // are reused (no allocation per record).
    std::size_t used = 0;
    bool ready = true;
    for (int rank : ranks) {
      if (parts_.size() == used) parts_.emplace_back();
      auto& [part_rank, b] = parts_[used];
      const Status got = trial_->step_records_into(rank, s, &b.stats);
      if (got.ok()) {
        part_rank = rank;
        b.key = *it;
        b.wall_time = WallClockNow();
        b.scalars.clear();
        ++used;
      } else if (got.code() == StatusCode::kUnavailable && !all) {
        ready = false;  // this worker may still write it
        break;
      }
      // kStepUnavailable (the worker moved past it) or anything else: no part.
    }
    if (!ready) return;
    for (std::size_t p = 0; p < used; ++p) {
      auto& [rank, batch] = parts_[p];
      auto& pending = scalars_[rank];
      // Scalars of steps the worker saved no step row for travel with the next step.
      while (!pending.empty() && pending.begin()->first <= s) {
        auto& v = pending.begin()->second;
        batch.scalars.insert(batch.scalars.end(), v.begin(), v.end());
        pending.erase(pending.begin());
      }
      for (const TensorStatsRecord& r : batch.stats) {
        if (catalogs_[rank]->Find(r.tensor_id) == nullptr) {
          UpdateCatalogs();  // a tensor registered since the last update
          break;
        }
      }
      engine_->Feed(rank, batch, catalogs_[rank].get(), findings);
    }
    last_fed_ = s;
    ++steps_fed_;
  }
}

Status TrialRunner::Poll(std::vector<Finding>* findings, bool tick) {
  if (finished_) return Status::OK();
  // Whether the run was closed BEFORE this refresh: then everything it holds
  // is loaded by the refresh below.
  Status refreshed = trial_->Refresh();
  if (!refreshed.ok()) {
    if (refreshed.code() != StatusCode::kCorruption) return refreshed;
    Warn(refreshed.message());
  }
  const bool closed = trial_->loaded_all_steps();
  FeedSteps(/*all=*/closed, findings);
  if (tick) engine_->Tick(WallClockNow(), findings);
  complete_ = closed;
  return Status::OK();
}

void TrialRunner::Finish(std::vector<Finding>* findings) {
  if (finished_) return;
  FeedSteps(/*all=*/true, findings);
  engine_->Finish(findings);
  finished_ = true;
  for (const std::string& d : engine_->Diagnostics()) Warn(d);
}

Status TrialRunner::Run(const std::function<Status(const Finding&)>& on_finding,
                        const std::function<Status(const EpisodeEvent&)>& on_event) {
  std::vector<Finding> found;
  auto deliver = [&]() -> Status {
    for (const Finding& f : found) TSTAT_RETURN_IF_ERROR(on_finding(f));
    found.clear();
    const std::vector<EpisodeEvent> events = engine_->TakeEvents();
    if (on_event) {
      for (const EpisodeEvent& e : events) TSTAT_RETURN_IF_ERROR(on_event(e));
    }
    return Status::OK();
  };
  if (!options_.follow) {
    TSTAT_RETURN_IF_ERROR(Poll(&found, /*tick=*/false));
    Finish(&found);
    return deliver();
  }
  while (true) {
    const std::int64_t before = steps_fed_;
    TSTAT_RETURN_IF_ERROR(Poll(&found, /*tick=*/true));
    TSTAT_RETURN_IF_ERROR(deliver());
    if (run_complete()) break;
    if (options_.interrupted && options_.interrupted()) return Status::OK();
    if (steps_fed_ == before) {
      std::this_thread::sleep_for(std::chrono::duration<double>(options_.poll_interval_s));
    }
  }
  Finish(&found);
  return deliver();
}

}  // namespace tstat::rules
