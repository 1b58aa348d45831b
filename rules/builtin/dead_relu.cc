// dead_relu: a ReLU output whose dead units exceed `threshold_layer` percent
// (default 50) of its units. A unit is a channel of the per-channel stats; its
// activity is the share of its elements that were positive
// (count - zero_count - neg_count - nan_count), accumulated over every saved
// step of the tensor so far; a unit is dead when its activity is below
// `threshold_inactivity` percent (default 1). Fires at every step where the
// layer condition holds (a zero-initialized net fires at its first step).
// Needs per-channel stats. Default selection: tensor_regex ".*relu_output".
#include <cstddef>
#include <unordered_map>

#include "rules/builtin/tensor_rule.h"
#include "rules/builtin/tensor_rules.h"

namespace tstat::rules {
namespace {

class DeadReluRule final : public TensorRuleT<DeadReluRule> {
 public:
  DeadReluRule(const RuleSpec& spec, double threshold_inactivity, double threshold_layer)
      : TensorRuleT(WithDefaultRegex(spec, ".*relu_output"), {},
                   "per-channel statistics (capture with per_channel_axis)"),
        inactivity_(threshold_inactivity),
        layer_(threshold_layer) {}

 public:
  // Check() reads the stats and the per_channel.
  static void Prefetch(const TensorStatsRecord* r) {
    TensorRuleT::Prefetch(r);
    PrefetchRecordBytes(r, offsetof(TensorStatsRecord, per_channel), sizeof(r->per_channel));
  }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    NoteNeeded(step, info, r.per_channel.has_value());
    if (!r.per_channel || r.per_channel->channels.empty()) return;
    const std::vector<TensorStats>& ch = r.per_channel->channels;
    bool first = false;
    State& st = activity_.Get(PerTensor<State>::WorkerGroup(step.worker), info.id, &first);
    if (first || st.activity.channels() != ch.size()) {
      st.activity.Reset(ch.size());
      st.since = step.key.global_step;
    }
    for (std::size_t c = 0; c < ch.size(); ++c) {
      const TensorStats& s = ch[c];
      const std::uint64_t positive = s.count - s.zero_count - s.neg_count - s.nan_count;
      st.activity.Add(c, positive, NonNanCount(s));
    }
    const std::vector<std::size_t> dead = st.activity.Inactive(inactivity_);
    const std::size_t units = st.activity.ObservedUnits();
    if (units == 0) return;
    const double pct = 100.0 * static_cast<double>(dead.size()) / static_cast<double>(units);
    if (!(pct > layer_)) return;
    findings->push_back(MakeFinding(
        step, info.name,
        std::to_string(dead.size()) + " of " + std::to_string(units) + " units of " + info.name +
            " (" + Num(pct) + "% > threshold_layer " + Num(layer_) + "%) are dead: positive in < " +
            Num(inactivity_) + "% of their outputs since step " + std::to_string(st.since) +
            " (channels " + IndexList(dead) +
            "); lower the learning rate, check bias initialization, or use LeakyReLU/ELU",
        {{"dead_units", static_cast<double>(dead.size())},
         {"units", static_cast<double>(units)},
         {"dead_percent", pct},
         {"threshold_layer", layer_},
         {"threshold_inactivity", inactivity_}}));
  }

 private:
  struct State {
    ChannelActivity activity;
    std::int64_t since = 0;
  };
  double inactivity_, layer_;
  PerTensor<State> activity_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateDeadReluRule(const RuleSpec& spec) {
  ParamReader p(RuleLabel(spec), spec.parameters);
  const double inactivity = p.Double("threshold_inactivity", 1.0);
  p.CheckRange("threshold_inactivity", inactivity, 0, 100);
  const double layer = p.Double("threshold_layer", 50.0);
  p.CheckRange("threshold_layer", layer, 0, 100);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<DeadReluRule>(spec, inactivity, layer);
}

}  // namespace tstat::rules
