#include "host/session/session_rules.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "host/session/label_classes.h"
#include "host/session/session_impl.h"
#include "host/session/session_internal.h"
#include "io/h5/posix_file.h"
#include "rules/engine/capture_needs.h"

namespace tstat {
namespace {

// Rule actions in the training process: stop -> the session's StopState,
// raw capture -> the RawRequestQueue (applied at the next EndStep). Called
// from the rules thread; never takes the session lock.
class SessionActionSink final : public rules::ActionSink {
 public:
  SessionActionSink(host::StopState* stop, host::RawRequestQueue* raw_requests)
      : stop_(stop), raw_requests_(raw_requests) {}
  Status RequestStop(const rules::StopRequest& request) override {
    stop_->Request(request.Describe());
    return Status::OK();
  }
  Status RequestRawCapture(const rules::RawCaptureRequest& request) override {
    for (const std::string& t : request.tensors) raw_requests_->Add(t, request.steps);
    return Status::OK();
  }

 private:
  host::StopState* stop_;
  host::RawRequestQueue* raw_requests_;
};

// Two observers in order (an injected test observer and the rules thread).
class TeeObserver final : public host::BatchObserver {
 public:
  TeeObserver(std::shared_ptr<host::BatchObserver> a, std::shared_ptr<host::BatchObserver> b)
      : a_(std::move(a)), b_(std::move(b)) {}
  void OnDeclare(const std::vector<TensorInfo>& t) override {
    a_->OnDeclare(t);
    b_->OnDeclare(t);
  }
  void OnBatch(const StepBatch& batch) override {
    a_->OnBatch(batch);
    b_->OnBatch(batch);
  }
  void OnSharedBatch(const std::shared_ptr<const StepBatch>& batch) override {
    a_->OnSharedBatch(batch);
    b_->OnSharedBatch(batch);
  }

 private:
  std::shared_ptr<host::BatchObserver> a_, b_;
};

bool HasRunDir(const SessionConfig& c) { return !c.out_dir.empty() && !c.dry_run; }

// "predictions", "logits", "model/predictions", "logits_output": a tensor
// whose last dimension counts the classes.
bool NamesPredictions(const std::string& name) {
  for (const char* word : {"predictions", "logits"}) {
    const std::size_t at = name.find(word);
    if (at == std::string::npos) continue;
    const std::size_t end = at + std::strlen(word);
    const bool left = at == 0 || name[at - 1] == '/' || name[at - 1] == '.' || name[at - 1] == '_';
    const bool right =
        end == name.size() || name[end] == '/' || name[end] == '.' || name[end] == '_';
    if (left && right) return true;
  }
  return false;
}

std::size_t ShapeRank(const TensorView& v) { return v.shape.empty() ? 1 : v.shape.size(); }

// The axis of the rules' per-unit stats (TensorSpec::unit_axis): the one
// given, where the tensor has it; else by rank. A rank-3 activation is far
// more often a sequence's [batch, tokens, features] (transformers, RNNs,
// MLPs on tokens) than Conv1d's [batch, channels, length], whose callers
// say so; along the tokens, a layer with most of its units dead still looks
// alive. -1 (none) below rank 2: no units.
int UnitAxis(int given, std::size_t rank) {
  if (rank < 2) return -1;
  if (given >= 1 && static_cast<std::size_t>(given) < rank) return given;
  return rank == 3 ? 2 : 1;
}

}  // namespace

namespace host {

SessionConfig WithRulesFromEnvironment(SessionConfig config) {
  const char* env = std::getenv("TSTAT_RULES_CONFIG");
  if (env == nullptr || *env == '\0') return config;
  config.rules.enabled = true;
  config.rules.config_file = env;
  config.rules.config_json.clear();
  return config;
}

SessionRules::SessionRules(const SessionConfig* config, CollectionSet* collections, StopState* stop,
                           RawRequestQueue* raw_requests)
    : config_(config), collections_(collections), stop_(stop), raw_requests_(raw_requests) {}

SessionRules::~SessionRules() = default;

Status SessionRules::Start(std::shared_ptr<BatchObserver>* observer) {
  const SessionConfig& config = *config_;
  if (!config.rules.enabled) return Status::OK();
  action_sink_ = std::make_unique<SessionActionSink>(stop_, raw_requests_);
  RulesThread::Options o;
  o.config = config.rules;
  if (HasRunDir(config)) o.findings_path = config.out_dir + "/" + rules::kFindingsFileName;
  o.worker = config.rank;
  o.sink = action_sink_.get();
  o.print = &std::cerr;
  TSTAT_ASSIGN_OR_RETURN(thread_, RulesThread::Start(std::move(o)));
  first_rules_collection_ = collections_->size();
  summary_.worker = config.rank;
  summary_.stop_on = config.rules.stop_on;
  for (const RulesThread::RuleInfo& r : thread_->rule_infos()) {
    summary_.rules.push_back({r.name, r.type, r.severity, r.stops});
  }
  if (*observer) {
    *observer = std::make_shared<TeeObserver>(std::move(*observer), thread_);
  } else {
    *observer = thread_;
  }
  return Status::OK();
}

void SessionRules::StartRunDirRequests() {
  const SessionConfig& config = *config_;
  if (!HasRunDir(config)) return;
  run_requests_ = std::make_unique<RunDirRequests>(
      config.out_dir, config.pipeline.stop_check_interval_ms,
      /*delete_applied=*/config.world_size == 1,
      [raw = raw_requests_](const std::string& tensor, int steps) { raw->Add(tensor, steps); },
      [](const std::string& warning) { std::cerr << "tstat: warning: " << warning << std::endl; });
}

void SessionRules::BeforeStepCapture(Pipeline* pipeline) {
  if (thread_) {
    double waited = 0.0;
    if (thread_->WaitForBatches(batches_queued_, &waited)) pipeline->CountRulesWait(waited);
  }
  if (run_requests_) run_requests_->Poll(stop_);
}

void SessionRules::AddNeeds(RegisteredTensor* t) {
  if (!thread_ || !config_->rules.capture_needs) return;
  for (const RulesThread::RuleNeed& n : thread_->NeedsOf(t->info)) {
    const std::string name = rules::NeedsCollectionName(n.needs);
    const int index = collections_->AddRulesCollection(name, n.needs, config_->rules.save_interval,
                                                       config_->stats);
    auto at = std::lower_bound(t->collections.begin(), t->collections.end(), index);
    if (at == t->collections.end() || *at != index) t->collections.insert(at, index);
    summary_.NoteCapture(n.rule, rules::DescribeNeeds(n.needs), name, t->info.name);
  }
  t->info.collections.clear();
  for (int c : t->collections) t->info.collections.push_back(collections_->at(c).name);
}

int SessionRules::LabelClasses(RegisteredTensor* t, const TensorView& v,
                               const TensorRegistry& registry) {
  if (!t->label_classes) {
    int classes = 2;
    std::string source = "grown to the largest label seen";
    for (const auto& other : registry.all()) {
      const TensorInfo& p = other->info;
      if (p.kind != TensorKind::kTensor || !IsFloatingDType(p.dtype) || p.shape.size() < 2 ||
          !NamesPredictions(p.name) || p.shape.back() < 2) {
        continue;
      }
      classes = ClassesFor(p.shape.back() - 1);
      source = "the last dimension of " + p.name;
      break;
    }
    t->label_classes = std::make_shared<std::atomic<int>>(classes);
    summary_.label_classes.push_back({t->info.name, classes, source});
  }
  int classes = t->label_classes->load();
  if (classes > 0 && v.space == MemorySpace::kHost) {
    const std::int64_t largest = LargestHostLabel(v);
    if (largest >= classes) {
      classes = ClassesFor(largest);
      t->label_classes->store(classes);
    }
  }
  for (auto& l : summary_.label_classes) {
    if (l.tensor == t->info.name) l.classes = classes;
  }
  return classes;
}

void SessionRules::ApplyNeeds(const CaptureOptions& co, RegisteredTensor* t, const TensorView& v,
                              const TensorRegistry& registry, StatsOptions* o) {
  if (co.per_unit_from_rules) o->per_channel_axis = UnitAxis(t->unit_axis, ShapeRank(v));
  // Inferred label counts, unless configured or impossible (label counts do
  // not come with per-channel or linear histogram statistics).
  if (co.infer_label_classes && o->label_classes == 0 && IsIntegerDType(v.dtype) &&
      o->per_channel_axis < 0 && o->linear_histogram.bins == 0) {
    o->label_classes = LabelClasses(t, v, registry);
  }
}

void SessionRules::CountRecord(const std::vector<int>& due) {
  ++requests_counts_.records;
  bool user = false, extends = false;
  for (int c : due) {
    if (c < first_rules_collection_) {
      user = true;
      continue;
    }
    const CaptureOptions& o = collections_->at(c).options;
    extends = extends || o.stats.per_channel_axis >= 0 || o.infer_label_classes || o.delta;
  }
  if (!user) {
    ++requests_counts_.rules_only;
  } else if (extends) {
    ++requests_counts_.extended;
  }
}

void SessionRules::CountStep() {
  total_counts_.records += requests_counts_.records;
  total_counts_.rules_only += requests_counts_.rules_only;
  total_counts_.extended += requests_counts_.extended;
}

void SessionRules::Report(const PipelineCounters& counters, const TensorRegistry& registry) {
  if (!thread_) return;
  const std::vector<Episode> episodes = thread_->episodes();
  rules::RulesSummary& s = summary_;
  s.steps = counters.capture.steps;
  s.steps_judged = thread_->steps_evaluated();
  s.records = total_counts_.records;
  s.rules_records = total_counts_.rules_only;
  s.rules_extended = total_counts_.extended;
  s.delta_copy_bytes = 0;
  for (const auto& t : registry.all()) s.delta_copy_bytes += t->previous.size();
  s.episodes = episodes.size();
  s.open_episodes = static_cast<std::uint64_t>(
      std::count_if(episodes.begin(), episodes.end(), [](const Episode& e) { return e.open; }));
  s.diagnostics = thread_->diagnostics();
  s.notes = thread_->notes();
  if (HasRunDir(*config_)) {
    // A reader never sees half of it.
    const Status written = io::WriteFileAtomically(
        io::JoinPath(config_->out_dir, rules::RulesSummaryFileName(config_->rank)),
        rules::RulesSummaryToJson(s) + "\n");
    if (!written.ok()) std::cerr << "tstat: warning: " << written.ToString() << "\n";
  }
  // The first lines: enough to read at a glance; the log has the rest.
  constexpr std::size_t kEpisodeLines = 20;
  std::vector<Episode> shown(episodes.begin(),
                             episodes.begin() + std::min(episodes.size(), kEpisodeLines));
  for (const std::string& line : rules::RulesSummaryLines(s, shown)) {
    std::cerr << "tstat: rules: " << line << "\n";
  }
  if (episodes.size() > kEpisodeLines) {
    std::cerr << "tstat: rules:   (+" << episodes.size() - kEpisodeLines << " more episodes in "
              << rules::kFindingsFileName << ")\n";
  }
  std::cerr.flush();
}

}  // namespace host

std::vector<Finding> Session::findings() const {
  const host::RulesThread* thread = impl_->rules.thread();
  return thread ? thread->findings() : std::vector<Finding>{};
}

std::vector<Episode> Session::episodes() const {
  const host::RulesThread* thread = impl_->rules.thread();
  return thread ? thread->episodes() : std::vector<Episode>{};
}

}  // namespace tstat
