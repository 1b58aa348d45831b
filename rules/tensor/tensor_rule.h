// TensorRule: the frame shared by the built-in tensor rules (rules/tensor/).
//
// A TensorRule walks the selected records of each step of a selected mode in
// capture order (RuleBase::SelectedRecords: the other records are not even
// touched) and hands each to Check(). Rules derive from TensorRuleT<Self>,
// which calls Self::Check directly (no virtual call per record). It also keeps the second kind of
// one-time warning next to RuleBase's "matched nothing": a selected tensor that never carried the
// statistic the rule needs (per-channel stats, delta, ...), and other configuration problems a rule
// notices while running.
//
// Also here: per-(worker, tensor[, mode]) state (PerTensor), the statistic names
// some rules accept as a parameter, per-channel activity accumulation (dead
// and saturated units) and linear-histogram percentiles.
// Thread safety: like Rule, driven by one thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rules/engine/param_reader.h"
#include "rules/engine/rule_base.h"
#include "tstat/rule.h"

namespace tstat::rules {

// Upper bound of CheckRange for parameters without one.
inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// Keys of per-(worker, tensor) and per-(worker, tensor, mode) state.
inline std::uint64_t TensorKey(int worker, std::uint32_t id) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(worker)) << 32) | id;
}
inline std::uint64_t TensorModeKey(int worker, std::uint32_t id, Mode mode) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(worker) & 0xffffffu) << 40) |
         (static_cast<std::uint64_t>(mode) << 32) | id;
}

// "name (type)", or "type" when the instance is not renamed: how parameter
// errors and messages name a rule instance.
std::string RuleLabel(const RuleSpec& spec);

// `spec` with `regex` as its tensor_regex when it names neither collections
// nor a regex (rules whose smdebug default is a regex, or "every tensor").
RuleSpec WithDefaultRegex(RuleSpec spec, const std::string& regex);

// A scalar statistic of a tensor, selectable by name in parameters.
enum class StatKind { kL1, kL2, kAmax, kMean, kMeanAbs, kVariance, kStd, kMin, kMax };
// Parses "l1", "l2", "amax", "mean", "mean_abs", "variance", "std", "min", "max".
bool ParseStatKind(const std::string& name, StatKind* out);
inline constexpr const char* kStatKindNames =
    "l1, l2, amax, mean, mean_abs, variance, std, min, max";
// The statistic (NaN when the tensor has no finite value and the statistic
// needs one).
inline double StatValue(const TensorStats& s, StatKind kind) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  switch (kind) {
    case StatKind::kL1:
      return s.l1;
    case StatKind::kL2:
      return s.l2;
    case StatKind::kAmax:
      return s.amax;
    case StatKind::kMean:
      return s.mean;
    case StatKind::kMeanAbs:
      return s.finite_count ? s.l1 / static_cast<double>(s.finite_count) : nan;
    case StatKind::kVariance:
      return s.variance();
    case StatKind::kStd:
      return s.stddev();
    case StatKind::kMin:
      return s.min;
    case StatKind::kMax:
      return s.max;
  }
  return nan;
}

// Reads a statistic-name parameter into *out; kInvalidArgument naming the
// rule (`label`) and `key` on an unknown name.
Status ReadStatKind(ParamReader* params, const std::string& label, const std::string& key,
                    const std::string& def, StatKind* out);

// Percentile q (0..1) of the values binned in a linear histogram, linearly
// interpolated inside the bucket that holds rank q * N (N = every binned
// value including below/above; ranks falling in below/above clamp to lo/hi).
// False when the histogram holds no value.
bool HistogramPercentile(const LinearHistogram& h, double q, double* out);

// "0, 3, 7 (+12 more)": the first `max_items` indices.
std::string IndexList(const std::vector<std::size_t>& indices, std::size_t max_items = 8);

// Whether `t` may have units: a rank of 2 or more, or a shape
// not known at registration (a tensor registered with a view callback
// before its first pass: shape {0} or none).
inline bool MayHaveUnits(const TensorInfo& t) {
  return t.kind == TensorKind::kTensor &&
         (t.shape.size() >= 2 || t.shape.empty() || (t.shape.size() == 1 && t.shape[0] == 0));
}

// Elements of a per-channel slice (count minus NaN).
inline std::uint64_t NonNanCount(const TensorStats& s) { return s.count - s.nan_count; }

// Activity of the units (channels) of one tensor, accumulated over steps:
// for each channel the number of its elements that were "active" and of all
// its elements. A unit is inactive when active/total < threshold %.
class ChannelActivity {
 public:
  // Starts over when the number of channels changes (a new layer shape).
  void Reset(std::size_t channels);
  std::size_t channels() const { return active_.size(); }
  void Add(std::size_t channel, std::uint64_t active, std::uint64_t total) {
    active_[channel] += active;
    total_[channel] += total;
  }
  // Channels with elements whose activity is below `threshold_percent` %.
  std::vector<std::size_t> Inactive(double threshold_percent) const;
  // Channels that had at least one element.
  std::size_t ObservedUnits() const;

 private:
  std::vector<std::uint64_t> active_;
  std::vector<std::uint64_t> total_;
};

class TensorRule : public RuleBase {
 public:
  // `needs` names the statistic the rule requires for its Diagnostics()
  // warning (e.g. "per-channel statistics (capture per_channel_axis)"), or is
  // empty when the default stat set suffices.
  TensorRule(RuleSpec spec, std::vector<std::string> default_collections, std::string needs = {});

  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    EvaluateViaIndex(step, findings);
  }
  void EvaluateStep(const IndexedStep& step, std::vector<Finding>* findings) override;
  std::string Diagnostics() const override;

 protected:
  // Whether steps of mode `m` are judged; ModeSelected(m) unless overridden.
  virtual bool ModeAllowed(Mode m) const { return ModeSelected(m); }
  // The selected records of a judged step (indices into records, capture
  // order): each one with a catalog entry goes to Check(). TensorRuleT
  // overrides it with a direct call.
  virtual void CheckRecords(const IndexedStep& step, const std::vector<std::uint32_t>& selected,
                            std::vector<Finding>* findings) {
    const std::vector<TensorStatsRecord>& records = *step.view->records;
    for (std::uint32_t i : selected) {
      if (step.infos[i] != nullptr) Check(*step.view, *step.infos[i], records[i], findings);
    }
  }
  // One selected record of a step (in capture order).
  virtual void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& record,
                     std::vector<Finding>* findings) = 0;
  // After every record of a judged step was checked.
  virtual void EndStep(const StepView& step, std::vector<Finding>* findings) {
    (void)step;
    (void)findings;
  }
  // ModeAllowed for rules about training updates: when the spec names no
  // modes, only TRAIN and GLOBAL steps (weights do not change in EVAL/PREDICT).
  bool TrainModeAllowed(Mode m) const;

  // Records whether a selected tensor carried the needed statistic this step.
  void NoteNeeded(const StepView& step, const TensorInfo& info, bool present) {
    bool created = false;
    std::uint8_t& n =
        need_.Get(PerTensor<std::uint8_t>::WorkerGroup(step.worker), info.id, &created);
    if (created) need_names_.push_back(Need{TensorKey(step.worker, info.id), info.name});
    n = static_cast<std::uint8_t>(n | 1u | (present ? 2u : 0u));
  }
  // A configuration problem noticed while running; the first few are kept
  // (one per distinct text) and shown by Diagnostics().
  void NoteProblem(const std::string& problem);
  // Whether `record`'s per-channel stats are of units: along any axis but
  // the batch's (axis 1 of [batch, units, ...], the last of [batch, tokens,
  // features], as the session chose it; or an axis configured for the
  // tensor). Along axis 0 the channels are examples: noted, not judged.
  bool PerUnitStats(const TensorInfo& info, const TensorStatsRecord& record);

 private:
  struct Need {
    std::uint64_t key;
    std::string name;
  };
  std::string needs_;
  PerTensor<std::uint8_t> need_;  // bit 0 seen, bit 1 ever present
  std::vector<Need> need_names_;  // in order of first sight
  std::vector<std::string> problems_;
};

// Asks the cache for the bytes [offset, offset + size) of a record, which a
// rule is about to read.
inline void PrefetchRecordBytes(const TensorStatsRecord* r, std::size_t offset, std::size_t size) {
  const char* p = reinterpret_cast<const char*>(r) + offset;
  for (std::size_t b = 0; b < size; b += 64) __builtin_prefetch(p + b);
  __builtin_prefetch(p + size - 1);
}

// The base of a concrete tensor rule `Self` (a final class with a public
// Check()): walks the selected records calling Self::Check directly.
//
// Why the prefetch: a record is ~0.5 KB and a rule selects some of them, so
// consecutive selected records are not adjacent and every one is a cache
// miss the hardware prefetcher does not foresee; asking for the record a few
// ahead overlaps those misses. Self::Prefetch names the bytes Check() reads
// (by default tensor_id through has_stats; a rule that reads more, e.g. the
// delta, declares its own Prefetch).
template <class Self>
class TensorRuleT : public TensorRule {
 public:
  using TensorRule::TensorRule;

  static void Prefetch(const TensorStatsRecord* r) {
    PrefetchRecordBytes(r, 0, offsetof(TensorStatsRecord, has_stats) + sizeof(bool));
  }

 protected:
  void CheckRecords(const IndexedStep& step, const std::vector<std::uint32_t>& selected,
                    std::vector<Finding>* findings) final {
    constexpr std::size_t kAhead = 10;
    const StepView& view = *step.view;
    const TensorStatsRecord* records = view.records->data();
    Self* self = static_cast<Self*>(this);
    const std::size_t n = selected.size();
    for (std::size_t k = 0; k < n && k < kAhead; ++k) Self::Prefetch(&records[selected[k]]);
    for (std::size_t k = 0; k < n; ++k) {
      if (k + kAhead < n) Self::Prefetch(&records[selected[k + kAhead]]);
      const std::uint32_t i = selected[k];
      const TensorInfo* info = step.infos[i];
      if (info != nullptr) self->Self::Check(view, *info, records[i], findings);
    }
  }
};

// Builds a rule, compiles its selection and returns it as a Rule.
template <class R, class... Args>
Result<std::unique_ptr<Rule>> MakeRule(Args&&... args) {
  auto rule = std::make_unique<R>(std::forward<Args>(args)...);
  TSTAT_RETURN_IF_ERROR(rule->Init());
  return std::unique_ptr<Rule>(std::move(rule));
}

}  // namespace tstat::rules
