// In-process rules and out-of-process requests on the session side: the
// session's ActionSink, the rules thread's start, EndStep's wait for it, the
// polling of RUN/STOP and RUN/capture/, and TSTAT_RULES_CONFIG.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

#include "host/session/session_impl.h"
#include "host/session/session_internal.h"
#include "io/h5/posix_file.h"
#include "rules/engine/capture_needs.h"

namespace tstat {
namespace {

// Rule actions in the training process: stop -> the session's StopState,
// raw capture -> CaptureRawFor's queue (applied at the next EndStep).
// Called from the rules thread; never takes the session lock.
class SessionActionSink final : public rules::ActionSink {
 public:
  explicit SessionActionSink(Session::Impl* impl) : impl_(impl) {}
  Status RequestStop(const rules::StopRequest& request) override {
    impl_->stop.Request(request.Describe());
    return Status::OK();
  }
  Status RequestRawCapture(const rules::RawCaptureRequest& request) override {
    std::lock_guard<std::mutex> lock(impl_->raw_requests_mu);
    for (const std::string& t : request.tensors) impl_->raw_requests.emplace_back(t, request.steps);
    return Status::OK();
  }

 private:
  Session::Impl* impl_;
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

}  // namespace host

Status Session::Impl::StartRules(std::shared_ptr<host::BatchObserver>* observer) {
  if (!config.rules.enabled) return Status::OK();
  action_sink = std::make_unique<SessionActionSink>(this);
  host::RulesThread::Options o;
  o.config = config.rules;
  if (HasRunDir(config)) o.findings_path = config.out_dir + "/" + rules::kFindingsFileName;
  o.worker = config.rank;
  o.sink = action_sink.get();
  o.print = &std::cerr;
  TSTAT_ASSIGN_OR_RETURN(rules, host::RulesThread::Start(std::move(o)));
  first_rules_collection = collections->size();
  rules_summary.worker = config.rank;
  rules_summary.stop_on = config.rules.stop_on;
  for (const host::RulesThread::RuleInfo& r : rules->rule_infos()) {
    rules_summary.rules.push_back({r.name, r.type, r.severity, r.stops});
  }
  if (*observer) {
    *observer = std::make_shared<TeeObserver>(std::move(*observer), rules);
  } else {
    *observer = rules;
  }
  return Status::OK();
}

void Session::Impl::StartRunDirRequests() {
  if (!HasRunDir(config)) return;
  run_requests = std::make_unique<host::RunDirRequests>(
      config.out_dir, config.pipeline.stop_check_interval_ms,
      /*delete_applied=*/config.world_size == 1,
      [this](const std::string& tensor, int steps) {
        std::lock_guard<std::mutex> lock(raw_requests_mu);
        raw_requests.emplace_back(tensor, steps);
      },
      [](const std::string& warning) { std::cerr << "tstat: warning: " << warning << std::endl; });
}

void Session::Impl::BeforeStepCapture() {
  if (rules) {
    double waited = 0.0;
    if (rules->WaitForBatches(batches_pushed, &waited)) pipeline->CountRulesWait(waited);
  }
  if (run_requests) run_requests->Poll(&stop);
}

void Session::Impl::AddRulesNeeds(host::RegisteredTensor* t) {
  if (!rules || !config.rules.capture_needs) return;
  for (const host::RulesThread::RuleNeed& n : rules->NeedsOf(t->info)) {
    const std::string name = rules::NeedsCollectionName(n.needs);
    const int index =
        collections->AddRulesCollection(name, n.needs, config.rules.save_interval, config.stats);
    auto at = std::lower_bound(t->collections.begin(), t->collections.end(), index);
    if (at == t->collections.end() || *at != index) t->collections.insert(at, index);
    rules_summary.NoteCapture(n.rule, rules::DescribeNeeds(n.needs), name, t->info.name);
  }
  t->info.collections.clear();
  for (int c : t->collections) t->info.collections.push_back(collections->at(c).name);
}

void Session::Impl::CountRulesRecord(const std::vector<int>& due) {
  ++plan_counts.records;
  bool user = false, extends = false;
  for (int c : due) {
    if (c < first_rules_collection) {
      user = true;
      continue;
    }
    const host::CaptureOptions& o = collections->at(c).options;
    extends = extends || o.stats.per_channel_axis >= 0 || o.infer_label_classes || o.delta;
  }
  if (!user) {
    ++plan_counts.rules_only;
  } else if (extends) {
    ++plan_counts.extended;
  }
}

void Session::Impl::ReportRules() {
  if (!rules) return;
  const std::vector<Episode> episodes = rules->episodes();
  rules::RulesSummary& s = rules_summary;
  s.steps = pipeline->counters().capture.steps;
  s.steps_judged = rules->steps_evaluated();
  s.records = total_counts.records;
  s.rules_records = total_counts.rules_only;
  s.rules_extended = total_counts.extended;
  s.delta_copy_bytes = 0;
  for (const auto& t : registry.all()) s.delta_copy_bytes += t->previous.size();
  s.episodes = episodes.size();
  s.open_episodes = static_cast<std::uint64_t>(
      std::count_if(episodes.begin(), episodes.end(), [](const Episode& e) { return e.open; }));
  s.diagnostics = rules->diagnostics();
  if (HasRunDir(config)) {
    // A reader never sees half of it.
    const Status written = io::WriteFileAtomically(
        io::JoinPath(config.out_dir, rules::RulesSummaryFileName(config.rank)),
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

std::vector<Finding> Session::findings() const {
  return impl_->rules ? impl_->rules->findings() : std::vector<Finding>{};
}

std::vector<Episode> Session::episodes() const {
  return impl_->rules ? impl_->rules->episodes() : std::vector<Episode>{};
}

}  // namespace tstat
