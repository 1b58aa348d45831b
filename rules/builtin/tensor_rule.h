// TensorRule: the frame shared by the built-in tensor rules (rules/builtin/).
//
// A TensorRule walks the records of each step of a selected mode in capture
// order, skips tensors outside its selection (RuleBase::Selected) and hands
// each selected record to Check(). It also keeps the second kind of one-time
// warning next to RuleBase's "matched nothing": a selected tensor that never
// carried the statistic the rule needs (per-channel stats, delta, ...), and
// other configuration problems a rule notices while running.
//
// Also here: the per-(worker, tensor[, mode]) state keys, the statistic names
// some rules accept as a parameter, per-channel activity accumulation (dead
// and saturated units) and linear-histogram percentiles.
// Thread safety: like Rule, driven by one thread.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rules/param_reader.h"
#include "rules/rule_base.h"
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
double StatValue(const TensorStats& s, StatKind kind);

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

  void Evaluate(const StepView& step, std::vector<Finding>* findings) override;
  std::string Diagnostics() const override;

 protected:
  // Whether steps of mode `m` are judged; ModeSelected(m) unless overridden.
  virtual bool ModeAllowed(Mode m) const { return ModeSelected(m); }
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
  void NoteNeeded(const StepView& step, const TensorInfo& info, bool present);
  // A configuration problem noticed while running; the first few are kept
  // (one per distinct text) and shown by Diagnostics().
  void NoteProblem(const std::string& problem);

 private:
  struct Need {
    std::string name;
    bool ever_present = false;
  };
  std::string needs_;
  std::unordered_map<std::uint64_t, Need> need_;
  std::vector<std::string> problems_;
};

// Builds a rule, compiles its selection and returns it as a Rule.
template <class R, class... Args>
Result<std::unique_ptr<Rule>> MakeRule(Args&&... args) {
  auto rule = std::make_unique<R>(std::forward<Args>(args)...);
  TSTAT_RETURN_IF_ERROR(rule->Init());
  return std::unique_ptr<Rule>(std::move(rule));
}

}  // namespace tstat::rules
