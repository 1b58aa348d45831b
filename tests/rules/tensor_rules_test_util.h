// Helpers of the tensor-rule tests: a map catalog, records built from values
// by the test reference (tests/support/reference.h) or by hand, rule creation
// through RegisterTensorRules, and a driver that feeds steps to one rule and
// returns its findings.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rules/engine/builtin_groups.h"
#include "rules/engine/rule_engine.h"
#include "tests/support/reference.h"
#include "tstat/rule.h"

namespace tstat::rules::test {

class MapCatalog : public TensorCatalog {
 public:
  const TensorInfo* Find(std::uint32_t id) const override {
    auto it = infos_.find(id);
    return it == infos_.end() ? nullptr : &it->second;
  }
  void Add(std::uint32_t id, const std::string& name, std::vector<std::string> collections,
           std::vector<std::int64_t> shape = {}, TensorKind kind = TensorKind::kTensor) {
    TensorInfo t;
    t.id = id;
    t.name = name;
    t.kind = kind;
    t.shape = std::move(shape);
    t.collections = std::move(collections);
    infos_[id] = std::move(t);
  }

 private:
  std::map<std::uint32_t, TensorInfo> infos_;
};

// Delta of x against p as DeltaStats documents it.
inline DeltaStats DeltaOf(const std::vector<double>& x, const std::vector<double>& p,
                          double atol = 1e-8, double rtol = 1e-5) {
  DeltaStats d;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ++d.count;
    if (!std::isfinite(x[i]) || !std::isfinite(p[i])) {
      ++d.nonfinite_pairs;
      const bool same = (std::isnan(x[i]) && std::isnan(p[i])) || x[i] == p[i];
      if (!same) ++d.changed_count;
      continue;
    }
    const double diff = x[i] - p[i];
    if (std::fabs(diff) > atol + rtol * std::fabs(p[i])) ++d.changed_count;
    d.l1 += std::fabs(diff);
    d.l2 += diff * diff;
    d.amax = std::max(d.amax, std::fabs(diff));
  }
  d.l2 = std::sqrt(d.l2);
  return d;
}

// The record the reference computes for float64 `values` (of `shape`, 1-D
// when empty), with the delta against `previous` when given.
inline TensorStatsRecord RecordOf(std::uint32_t id, const std::vector<double>& values,
                                  const StatsOptions& options = {},
                                  std::vector<std::int64_t> shape = {},
                                  const std::vector<double>* previous = nullptr) {
  const TensorView view = shape.empty()
                              ? TensorView::Host(values.data(), DType::kFloat64,
                                                 static_cast<std::int64_t>(values.size()))
                              : TensorView::Host(values.data(), DType::kFloat64, std::move(shape));
  ReductionResult res = tstat::testing::ReferenceReduce(view, options);
  TensorStatsRecord r;
  r.tensor_id = id;
  r.stats = res.stats;
  r.exponent_histogram = res.exponent_histogram;
  r.linear_histogram = res.linear_histogram;
  r.per_channel = res.per_channel;
  if (previous != nullptr) r.delta = DeltaOf(values, *previous);
  return r;
}

// `n` copies of v.
inline std::vector<double> Fill(std::size_t n, double v) { return std::vector<double>(n, v); }

inline StepBatch Batch(std::int64_t step, std::vector<TensorStatsRecord> stats,
                       Mode mode = Mode::kTrain) {
  StepBatch b;
  b.key.global_step = step;
  b.key.mode = mode;
  b.key.mode_step = step;
  b.stats = std::move(stats);
  return b;
}

struct SpecArgs {
  std::map<std::string, std::string> params;
  std::vector<std::string> collections;
  std::string regex;
  std::vector<Mode> modes;
};

inline Result<std::unique_ptr<Rule>> Create(const std::string& type, const SpecArgs& a = {}) {
  RuleRegistry registry;
  const Status s = RegisterTensorRules(&registry);
  if (!s.ok()) return s;
  RuleSpec spec;
  spec.type = type;
  spec.name = type;
  spec.parameters = a.params;
  spec.collection_names = a.collections;
  spec.tensor_regex = a.regex;
  spec.modes = a.modes;
  return registry.Create(spec);
}

inline std::unique_ptr<Rule> MustCreate(const std::string& type, const SpecArgs& a = {}) {
  auto r = Create(type, a);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// Feeds one step of `worker` to `rule`; returns the findings of that step.
inline std::vector<Finding> Feed(Rule* rule, const MapCatalog& cat, const StepBatch& b,
                                 int worker = 0) {
  StepView v;
  v.worker = worker;
  v.key = b.key;
  v.wall_time = b.wall_time;
  v.records = &b.stats;
  v.scalars = &b.scalars;
  v.catalog = &cat;
  std::vector<Finding> out;
  rule->Evaluate(v, &out);
  return out;
}

// The global steps of `findings`.
inline std::vector<std::int64_t> Steps(const std::vector<Finding>& findings) {
  std::vector<std::int64_t> out;
  for (const Finding& f : findings) out.push_back(f.step.global_step);
  return out;
}

// The value named `key` of a finding (NaN when absent).
inline double Value(const Finding& f, const std::string& key) {
  for (const auto& kv : f.values) {
    if (kv.first == key) return kv.second;
  }
  return std::nan("");
}

inline bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace tstat::rules::test
