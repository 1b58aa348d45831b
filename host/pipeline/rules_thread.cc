// The in-process rules thread (rules_thread.h).
#include "host/pipeline/rules_thread.h"

#include <chrono>
#include <exception>
#include <iostream>

#include "host/pipeline/background_thread.h"
#include "rules/engine/rules_config.h"
#include "rules/engine/tick.h"

namespace tstat::host {

// This worker's tensors and scalars by id (ids are dense; element addresses
// stay stable as the catalog grows).
class RulesThread::Catalog final : public TensorCatalog {
 public:
  const TensorInfo* Find(std::uint32_t id) const override {
    return id < by_id_.size() ? by_id_[id].get() : nullptr;
  }
  void Add(const TensorInfo& info) {
    if (info.id >= by_id_.size()) by_id_.resize(info.id + 1);
    if (!by_id_[info.id]) by_id_[info.id] = std::make_unique<TensorInfo>(info);
  }

 private:
  std::vector<std::unique_ptr<TensorInfo>> by_id_;
};

namespace {

// The rules config of `c`: config_json, config_file, or the default set;
// then without the rules of c.disable.
Result<rules::RulesConfig> LoadConfig(const InProcessRulesConfig& c, const RuleRegistry& registry,
                                      std::string* field) {
  *field = !c.config_json.empty()   ? "rules.config"
           : !c.config_file.empty() ? "rules.config_file"
                                    : "rules (the default rule set)";
  Result<rules::RulesConfig> r = rules::ChooseRulesConfig(registry, c.config_json, c.config_file);
  if (!r.ok()) return r.status().WithContext(*field);
  return rules::WithoutRules(std::move(r).value(), c.disable, "rules.disable");
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

RulesThread::RulesThread(Options options) : options_(std::move(options)) {}

Result<std::shared_ptr<RulesThread>> RulesThread::Start(Options options) {
  std::shared_ptr<RulesThread> t(new RulesThread(std::move(options)));
  const InProcessRulesConfig& c = t->options_.config;
  t->registry_ = std::make_unique<RuleRegistry>();
  TSTAT_RETURN_IF_ERROR(RegisterBuiltinRules(t->registry_.get()));
  TSTAT_ASSIGN_OR_RETURN(t->plugins_,
                         rules::LoadRulePlugins(c.plugins, t->registry_.get(), "rules.plugins"));
  std::string field;
  TSTAT_ASSIGN_OR_RETURN(rules::RulesConfig config, LoadConfig(c, *t->registry_, &field));
  Result<std::vector<std::unique_ptr<Rule>>> created = rules::CreateRules(*t->registry_, config);
  if (!created.ok()) return created.status().WithContext(field);
  t->rule_count_ = created->size();
  t->engine_ =
      std::make_unique<rules::RuleEngine>(std::move(created).value(), rules::EngineOptions{1});
  for (const auto& rule : t->engine_->rules()) t->rule_list_.push_back(rule.get());
  if (!t->options_.findings_path.empty()) {
    TSTAT_ASSIGN_OR_RETURN(t->log_, rules::FindingsLogWriter::Open(t->options_.findings_path));
  }
  rules::ActionRunner::Options ao;
  ao.actions = rules::ActionsByRule(config);
  ao.log = t->log_.get();
  ao.sink = t->options_.sink;
  ao.print = t->options_.print;
  if (!rules::StopPolicy::Parse(c.stop_on, &ao.stop)) {
    return Status::InvalidArgument("rules.stop_on: \"" + c.stop_on + "\" is not a stop level");
  }
  t->runner_ = std::make_unique<rules::ActionRunner>(std::move(ao));
  for (const Rule* rule : t->rule_list_) {
    const RuleSpec& s = rule->spec();  // the type's defaults filled in
    const Severity severity = s.severity.value_or(Severity::kError);
    t->rule_infos_.push_back({s.name, s.type, severity, t->runner_->Stops(s.name, severity)});
  }
  t->catalog_ = std::make_unique<Catalog>();
  t->thread_ = std::thread([raw = t.get()] { raw->Loop(); });
  return t;
}

RulesThread::~RulesThread() { (void)Finish(); }

void RulesThread::OnDeclare(const std::vector<TensorInfo>& tensors) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(Event{tensors, nullptr});
  work_cv_.notify_one();
}

void RulesThread::OnBatch(const StepBatch& batch) {
  OnSharedBatch(std::make_shared<const StepBatch>(batch));
}

void RulesThread::OnSharedBatch(const std::shared_ptr<const StepBatch>& batch) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(Event{{}, batch});
  ++handed_;
  work_cv_.notify_one();
}

bool RulesThread::WaitForBatches(std::uint64_t batches, double* waited_s) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [&] { return evaluated_ >= batches || ended_ || gave_up_; };
  if (done()) return false;
  const auto t0 = std::chrono::steady_clock::now();
  const auto timeout = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options_.wait_timeout_s));
  if (!done_cv_.wait_for(lock, timeout, done)) {
    gave_up_ = true;
    if (status_.ok()) {
      status_ = Status::ResourceExhausted(
          "rules thread: " + std::to_string(batches - evaluated_) +
          " batch(es) not evaluated after " + std::to_string(options_.wait_timeout_s) +
          " s; EndStep no longer waits for the rules (a stop may come later than one step)");
    }
  }
  if (waited_s) *waited_s = Seconds(std::chrono::steady_clock::now() - t0);
  return true;
}

void RulesThread::KeepError(const Status& s) {
  if (s.ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.ok()) status_ = s.WithContext("rules thread");
}

void RulesThread::Deliver(std::vector<Finding>* found) {
  std::vector<rules::EpisodeEvent> events = engine_->TakeEvents();
  {
    std::lock_guard<std::mutex> lock(mu_);
    findings_.insert(findings_.end(), found->begin(), found->end());
    for (const rules::EpisodeEvent& e : events) {
      const std::size_t index = static_cast<std::size_t>(e.episode.id - 1);
      if (index >= episodes_.size()) episodes_.resize(index + 1);
      episodes_[index] = e.episode;
    }
    steps_evaluated_ = engine_->steps_evaluated();
  }
  for (const rules::EpisodeEvent& e : events) KeepError(runner_->Handle(e));
  found->clear();
}

void RulesThread::Process(Event* e) {
  for (const TensorInfo& t : e->declare) catalog_->Add(t);
  if (!e->batch) return;
  std::vector<Finding> found;
  if (!broken_) {
    try {
      engine_->Feed(options_.worker, *e->batch, catalog_.get(), &found);
    } catch (const std::exception& ex) {
      broken_ = true;
      KeepError(Status::Internal("a rule threw at step " +
                                 std::to_string(e->batch->key.global_step) + ": " + ex.what() +
                                 "; the rules are not evaluated any more"));
    } catch (...) {
      broken_ = true;
      KeepError(Status::Internal("a rule threw at step " +
                                 std::to_string(e->batch->key.global_step) +
                                 "; the rules are not evaluated any more"));
    }
  }
  Deliver(&found);
  e->batch.reset();  // release the batch (and its raw bytes) before waking EndStep
  std::lock_guard<std::mutex> lock(mu_);
  ++evaluated_;
  done_cv_.notify_all();
}

void RulesThread::Loop() {
  NameCurrentThread("tstat-rules");  // full priority: EndStep waits for it
  using Clock = std::chrono::steady_clock;
  constexpr auto kTickEvery = std::chrono::seconds(1);
  Clock::time_point next_tick = Clock::now() + kTickEvery;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait_until(lock, next_tick, [&] { return !events_.empty() || finishing_; });
    if (events_.empty() && finishing_) break;
    while (!events_.empty()) {
      Event e = std::move(events_.front());
      events_.pop_front();
      lock.unlock();
      Process(&e);
      lock.lock();
    }
    if (Clock::now() >= next_tick) {
      lock.unlock();
      std::vector<Finding> found;
      if (!broken_) {
        try {
          engine_->Tick(rules::WallClockNow(), &found);
        } catch (...) {
          broken_ = true;
          KeepError(
              Status::Internal("a rule threw while ticking; the rules are not evaluated "
                               "any more"));
        }
      }
      Deliver(&found);
      next_tick = Clock::now() + kTickEvery;
      lock.lock();
    }
  }
  lock.unlock();
  // The run has ended: evaluate what is pending, end the rules.
  std::vector<Finding> found;
  if (!broken_) {
    try {
      engine_->Finish(&found);
    } catch (...) {
      KeepError(Status::Internal("a rule threw in Finish"));
    }
  }
  Deliver(&found);
  {
    std::vector<std::string> diagnostics = engine_->Diagnostics();
    std::vector<std::string> notes = engine_->Notes();
    std::lock_guard<std::mutex> guard(mu_);
    diagnostics_ = std::move(diagnostics);
    notes_ = std::move(notes);
  }
  if (log_) KeepError(log_->Close());
  lock.lock();
  ended_ = true;
  done_cv_.notify_all();
}

Status RulesThread::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return status_;
    finished_ = true;
    finishing_ = true;
    work_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  return status();
}

std::vector<Finding> RulesThread::findings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return findings_;
}

std::vector<Episode> RulesThread::episodes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return episodes_;
}

std::vector<std::string> RulesThread::diagnostics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return diagnostics_;
}

std::vector<std::string> RulesThread::notes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return notes_;
}

std::uint64_t RulesThread::steps_evaluated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_evaluated_;
}

std::vector<RulesThread::RuleNeed> RulesThread::NeedsOf(const TensorInfo& tensor) const {
  std::vector<RuleNeed> out;
  for (const Rule* rule : rule_list_) {
    const CaptureNeeds n = rule->Needs(tensor);
    if (n.any()) out.push_back({rule->spec().name, n});
  }
  return out;
}

Status RulesThread::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

}  // namespace tstat::host
