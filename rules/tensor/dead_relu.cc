// dead_relu: a ReLU output whose dead units exceed `threshold_layer` percent
// (default 50) of its units. A unit is a channel of the per-channel stats
// (the session takes axis 1 of [batch, units, ...], the last of [batch,
// tokens, features]; TensorSpec::unit_axis); its activity is the share
// of its elements that were positive (count - zero_count - neg_count -
// nan_count) over its non-NaN elements in the last `window` (default 1)
// judged steps of the tensor; a unit is dead when its activity is below
// `threshold_inactivity` percent (default 1). Fires at every step where the
// layer condition holds; the default set confirms it over 3 steps in a row
// (a batch can miss a rare unit; a dying layer stays dead).
// Default selection: tensor_regex "relu[^/]*_output(_\d+)?$", case ignored
// (relu1_output, fc1.relu_output, block2.relu_a_output). TRAIN and GLOBAL
// steps unless modes are given.
// Needs: per-unit stats of the selected tensors (of rank >= 2).
#include <cstddef>
#include <deque>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

class DeadReluRule final : public TensorRuleT<DeadReluRule> {
 public:
  DeadReluRule(const RuleSpec& spec, double threshold_inactivity, double threshold_layer,
               std::int64_t window)
      : TensorRuleT(WithDefaultRegex(spec, "(?i)relu[^/]*_output(_\\d+)?$"), {},
                    "per-unit statistics (per_channel_axis: the units' axis)"),
        inactivity_(threshold_inactivity),
        layer_(threshold_layer),
        window_(window) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    if (!Takes(t) || !MayHaveUnits(t)) return {};
    CaptureNeeds n;
    n.per_unit = true;
    n.modes = JudgedModes(CaptureNeeds::TrainModes());
    return n;
  }

  // Check() reads the stats and the per_channel.
  static void Prefetch(const TensorStatsRecord* r) {
    TensorRuleT::Prefetch(r);
    PrefetchRecordBytes(r, offsetof(TensorStatsRecord, per_channel), sizeof(r->per_channel));
  }

  bool ModeAllowed(Mode m) const override { return TrainModeAllowed(m); }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    NoteNeeded(step, info, r.per_channel.has_value());
    if (!PerUnitStats(info, r)) return;
    const std::vector<TensorStats>& ch = r.per_channel->channels;
    State& st = state_.Get(PerTensor<State>::WorkerGroup(step.worker), info.id);
    if (st.units != ch.size()) {  // a new layer shape starts over
      st.units = ch.size();
      st.steps.clear();
    }
    st.steps.emplace_back(ch.size());
    for (std::size_t c = 0; c < ch.size(); ++c) {
      const TensorStats& s = ch[c];
      st.steps.back()[c] = {s.count - s.zero_count - s.neg_count - s.nan_count, NonNanCount(s)};
    }
    if (static_cast<std::int64_t>(st.steps.size()) > window_) st.steps.pop_front();
    ChannelActivity& act = st.activity;
    act.Reset(ch.size());
    for (const auto& counts : st.steps) {
      for (std::size_t c = 0; c < counts.size(); ++c) act.Add(c, counts[c].first, counts[c].second);
    }
    const std::vector<std::size_t> dead = act.Inactive(inactivity_);
    const std::size_t units = act.ObservedUnits();
    if (units == 0) return;
    const double pct = 100.0 * static_cast<double>(dead.size()) / static_cast<double>(units);
    if (!(pct > layer_)) return;
    findings->push_back(MakeFinding(
        step, info.name,
        std::to_string(dead.size()) + " of " + std::to_string(units) + " units of " + info.name +
            " (" + Num(pct) + "% > threshold_layer " + Num(layer_) + "%) are dead: positive in < " +
            Num(inactivity_) + "% of their outputs (channels " + IndexList(dead) +
            "); lower the learning rate, check bias initialization, or use LeakyReLU/ELU",
        {{"dead_percent", pct},
         {"dead_units", static_cast<double>(dead.size())},
         {"units", static_cast<double>(units)},
         {"threshold_layer", layer_},
         {"threshold_inactivity", inactivity_}}));
  }

 private:
  struct State {
    std::size_t units = 0;
    // Per judged step in the window: (positive, non-NaN) elements per unit.
    std::deque<std::vector<std::pair<std::uint64_t, std::uint64_t>>> steps;
    ChannelActivity activity;  // scratch
  };
  double inactivity_, layer_;
  std::int64_t window_;
  PerTensor<State> state_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateDeadReluRule(const RuleSpec& spec) {
  ParamReader p(RuleLabel(spec), spec.parameters);
  const double inactivity = p.Double("threshold_inactivity", 1.0);
  p.CheckRange("threshold_inactivity", inactivity, 0, 100);
  const double layer = p.Double("threshold_layer", 50.0);
  p.CheckRange("threshold_layer", layer, 0, 100);
  const std::int64_t window = p.Int("window", 1);
  p.CheckRange("window", static_cast<double>(window), 1, 1e6);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  return MakeRule<DeadReluRule>(spec, inactivity, layer, window);
}

}  // namespace tstat::rules
