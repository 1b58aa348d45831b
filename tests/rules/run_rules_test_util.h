// Helpers of the run-rule tests: a catalog, rule creation through
// RegisterRunRules, a driver feeding hand-made steps to one rule, and small
// runs on disk written with the io writer.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "io/write/step_sink.h"
#include "rules/engine/builtin_groups.h"
#include "rules/engine/tick.h"
#include "tstat/rule.h"

namespace tstat::rules::runtest {

class Catalog : public TensorCatalog {
 public:
  const TensorInfo* Find(std::uint32_t id) const override {
    auto it = infos.find(id);
    return it == infos.end() ? nullptr : &it->second;
  }
  std::uint32_t Add(const std::string& name, std::vector<std::string> collections = {},
                    TensorKind kind = TensorKind::kTensor) {
    TensorInfo t;
    t.id = static_cast<std::uint32_t>(infos.size());
    t.name = name;
    t.kind = kind;
    t.collections = std::move(collections);
    infos[t.id] = t;
    return t.id;
  }
  std::vector<TensorInfo> All() const {
    std::vector<TensorInfo> out;
    for (const auto& kv : infos) out.push_back(kv.second);
    return out;
  }
  std::map<std::uint32_t, TensorInfo> infos;
};

inline RuleSpec Spec(const std::string& type, std::map<std::string, std::string> params = {}) {
  RuleSpec s;
  s.name = s.type = type;
  s.parameters = std::move(params);
  return s;
}

inline Result<std::unique_ptr<Rule>> MakeRule(const RuleSpec& spec) {
  RuleRegistry registry;
  Status s = RegisterRunRules(&registry);
  if (s.ok()) s = RegisterTensorRules(&registry);
  if (!s.ok()) return s;
  return registry.Create(spec);
}

inline std::unique_ptr<Rule> MakeRuleOrDie(const RuleSpec& spec) {
  auto r = MakeRule(spec);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

inline StepKey Key(std::int64_t global, Mode mode = Mode::kGlobal, std::int64_t mode_step = -1) {
  StepKey k;
  k.global_step = global;
  k.mode = mode;
  k.mode_step = mode_step < 0 ? global : mode_step;
  return k;
}

// Stats of a tensor whose values are all `v` (n of them).
inline TensorStats ConstantStats(double v, std::uint64_t n = 4) {
  TensorStats s;
  s.count = s.finite_count = n;
  s.min = s.max = s.mean = v;
  s.sum = v * static_cast<double>(n);
  s.l1 = std::fabs(v) * static_cast<double>(n);
  s.l2 = std::fabs(v) * std::sqrt(static_cast<double>(n));
  s.amax = std::fabs(v);
  s.zero_count = v == 0.0 ? n : 0;
  s.neg_count = v < 0.0 ? n : 0;
  return s;
}

inline TensorStatsRecord StatsRecord(std::uint32_t id, const TensorStats& s) {
  TensorStatsRecord r;
  r.tensor_id = id;
  r.stats = s;
  return r;
}

// Feeds hand-made steps to one rule; returns the findings of each call.
class Driver {
 public:
  explicit Driver(std::unique_ptr<Rule> rule) : rule_(std::move(rule)) {}
  Rule& rule() { return *rule_; }

  std::vector<Finding> Step(const StepKey& key, std::vector<ScalarRecord> scalars,
                            std::vector<TensorStatsRecord> records = {}, int worker = 0,
                            double wall_time = 0.0) {
    StepView v;
    v.worker = worker;
    v.key = key;
    v.wall_time = wall_time;
    v.records = &records;
    v.scalars = &scalars;
    v.catalog = &catalog;
    std::vector<Finding> out;
    rule_->Evaluate(v, &out);
    return out;
  }
  std::vector<Finding> Tick(double now) {
    std::vector<Finding> out;
    auto* t = dynamic_cast<TickingRule*>(rule_.get());
    EXPECT_NE(t, nullptr);
    if (t) t->Tick(now, &out);
    return out;
  }
  std::vector<Finding> Finish() {
    std::vector<Finding> out;
    rule_->Finish(&out);
    return out;
  }

  Catalog catalog;

 private:
  std::unique_ptr<Rule> rule_;
};

inline double Value(const Finding& f, const std::string& name) {
  for (const auto& kv : f.values) {
    if (kv.first == name) return kv.second;
  }
  ADD_FAILURE() << "finding has no value " << name;
  return NAN;
}

// Writes a small run: `steps` batches (already holding their records and
// scalars) of one worker, with `tensors` registered first.
inline Status WriteRun(const std::string& dir, const std::vector<TensorInfo>& tensors,
                       const std::vector<StepBatch>& steps, int rank = 0, int world_size = 1,
                       bool close = true) {
  io::Hdf5RunWriterOptions o;
  o.info.run_dir = dir;
  o.info.rank = rank;
  o.info.world_size = world_size;
  o.info.host = "test";
  o.compression_level = 0;
  auto w = io::OpenHdf5RunWriter(o);
  if (!w.ok()) return w.status();
  TSTAT_RETURN_IF_ERROR(w.value()->RegisterTensors(tensors));
  for (const StepBatch& b : steps) TSTAT_RETURN_IF_ERROR(w.value()->Write(b));
  TSTAT_RETURN_IF_ERROR(w.value()->Flush({}));
  if (close) TSTAT_RETURN_IF_ERROR(w.value()->Close({}));
  return Status::OK();
}

inline StepBatch Batch(const StepKey& key, std::vector<ScalarRecord> scalars,
                       std::vector<TensorStatsRecord> records = {}) {
  StepBatch b;
  b.key = key;
  b.wall_time = 1.7e9 + static_cast<double>(key.global_step);
  b.scalars = std::move(scalars);
  for (ScalarRecord& s : b.scalars) s.wall_time = b.wall_time;
  b.stats = std::move(records);
  return b;
}

// Writes steps from a thread, flushing each and pausing after it (pause_ms[i],
// or the last entry), then closes the run. Start() returns once the worker
// directory exists (or the writer failed).
class LiveWriter {
 public:
  LiveWriter(std::string dir, std::vector<TensorInfo> tensors, std::vector<StepBatch> steps,
             std::vector<int> pause_ms)
      : dir_(std::move(dir)),
        tensors_(std::move(tensors)),
        steps_(std::move(steps)),
        pause_ms_(std::move(pause_ms)) {}
  ~LiveWriter() { (void)Join(); }
  void Start() {
    thread_ = std::thread([this] {
      status_ = Write();
      closed = true;
    });
    while (!opened && !closed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Status Join() {
    if (thread_.joinable()) thread_.join();
    return status_;
  }
  std::atomic<std::int64_t> flushed{-1};
  std::atomic<bool> opened{false}, closed{false};

 private:
  Status Write() {
    io::Hdf5RunWriterOptions o;
    o.info.run_dir = dir_;
    o.compression_level = 0;
    TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<io::StepSink> w, io::OpenHdf5RunWriter(o));
    TSTAT_RETURN_IF_ERROR(w->RegisterTensors(tensors_));
    opened = true;
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      TSTAT_RETURN_IF_ERROR(w->Write(steps_[i]));
      TSTAT_RETURN_IF_ERROR(w->Flush({}));
      flushed = steps_[i].key.global_step;
      const int pause = pause_ms_[std::min(i, pause_ms_.size() - 1)];
      std::this_thread::sleep_for(std::chrono::milliseconds(pause));
    }
    return w->Close({});
  }
  std::string dir_;
  std::vector<TensorInfo> tensors_;
  std::vector<StepBatch> steps_;
  std::vector<int> pause_ms_;
  std::thread thread_;
  Status status_;
};

}  // namespace tstat::rules::runtest

#define TSTAT_RR_ASSERT_OK(expr)                             \
  do {                                                       \
    const ::tstat::Status tstat_rr_s_ = (expr);              \
    ASSERT_TRUE(tstat_rr_s_.ok()) << tstat_rr_s_.ToString(); \
  } while (0)
