// saturated_activation: a tanh or sigmoid input whose saturated units exceed
// `threshold_layer` percent (default 50) of its units. An input x is
// saturated when it lies outside the open interval (min, max) for its
// activation — tanh (-9.4999, 9.4999), sigmoid (-23, 16.99999) by default,
// where the activation's gradient is below 1e-7. A unit is a channel of the
// per-channel stats; its activity is the share of its non-NaN inputs that
// were not saturated, accumulated over every saved step so far, and it is
// saturated when that is below `threshold_inactivity` percent (default 1).
// The saturated count of a channel at a step is, with band_counts=true,
// band_lo_count + band_hi_count (exact; the capture's band_lo/band_hi must be
// set to the rule's min/max), otherwise taken from the channel's min/max:
// every input when all lie on one side (min >= max_threshold or
// max <= min_threshold), else none (a lower bound: never a false alarm).
// The activation is told by the tensor name (containing "tanh" or
// "sigmoid"). Needs per-channel stats. Default selection: tensor_regex
// ".*tanh_input|.*sigmoid_input".
#include <algorithm>
#include <unordered_map>

#include "rules/builtin/tensor_rule.h"
#include "rules/builtin/tensor_rules.h"

namespace tstat::rules {
namespace {

struct SaturationParams {
  double tanh_min = -9.4999, tanh_max = 9.4999;
  double sigmoid_min = -23.0, sigmoid_max = 16.99999;
  double threshold_inactivity = 1.0;
  double threshold_layer = 50.0;
  bool band_counts = false;
};

bool NameContains(const std::string& name, const char* word) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return lower.find(word) != std::string::npos;
}

class SaturatedActivationRule final : public TensorRuleT<SaturatedActivationRule> {
 public:
  SaturatedActivationRule(const RuleSpec& spec, SaturationParams p)
      : TensorRuleT(WithDefaultRegex(spec, ".*tanh_input|.*sigmoid_input"), {},
                   "per-channel statistics (capture with per_channel_axis)"),
        p_(p) {}

 public:
  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    bool first = false;
    State& st = state_.Get(PerTensor<State>::WorkerGroup(step.worker), info.id, &first);
    if (first) {
      st.kind = NameContains(info.name, "tanh")      ? Kind::kTanh
                : NameContains(info.name, "sigmoid") ? Kind::kSigmoid
                                                     : Kind::kUnknown;
    }
    if (st.kind == Kind::kUnknown) {
      // Noted at the first sight only (the same text each time after it).
      if (first) {
        NoteProblem("cannot tell whether " + info.name +
                    " feeds tanh or sigmoid (its name contains neither); it is skipped");
      }
      return;
    }
    NoteNeeded(step, info, r.per_channel.has_value());
    if (!r.per_channel || r.per_channel->channels.empty()) return;
    const bool tanh = st.kind == Kind::kTanh;
    const double lo = tanh ? p_.tanh_min : p_.sigmoid_min;
    const double hi = tanh ? p_.tanh_max : p_.sigmoid_max;
    const std::vector<TensorStats>& ch = r.per_channel->channels;
    ChannelActivity& act = st.activity;
    if (act.channels() != ch.size()) act.Reset(ch.size());
    for (std::size_t c = 0; c < ch.size(); ++c) {
      const TensorStats& s = ch[c];
      const std::uint64_t total = NonNanCount(s);
      std::uint64_t saturated = 0;
      if (p_.band_counts) {
        saturated = s.band_lo_count + s.band_hi_count;
      } else if (s.finite_count == 0) {
        saturated = s.inf_count();
      } else if (s.min >= hi || s.max <= lo) {
        saturated = total;
      }
      act.Add(c, total - std::min(saturated, total), total);
    }
    const std::vector<std::size_t> sat = act.Inactive(p_.threshold_inactivity);
    const std::size_t units = act.ObservedUnits();
    if (units == 0) return;
    const double pct = 100.0 * static_cast<double>(sat.size()) / static_cast<double>(units);
    if (!(pct > p_.threshold_layer)) return;
    findings->push_back(MakeFinding(
        step, info.name,
        std::to_string(sat.size()) + " of " + std::to_string(units) + " units of " +
            (tanh ? "tanh" : "sigmoid") + " input " + info.name + " (" + Num(pct) +
            "% > threshold_layer " + Num(p_.threshold_layer) + "%) are saturated: outside (" +
            Num(lo) + ", " + Num(hi) + ") in > " + Num(100 - p_.threshold_inactivity) +
            "% of their inputs (channels " + IndexList(sat) +
            "), so almost no gradient flows; normalize the inputs (batch/layer norm), lower the "
            "learning rate, or scale the initialization down",
        {{"saturated_units", static_cast<double>(sat.size())},
         {"units", static_cast<double>(units)},
         {"saturated_percent", pct},
         {"threshold_layer", p_.threshold_layer},
         {"threshold_inactivity", p_.threshold_inactivity},
         {"threshold_min", lo},
         {"threshold_max", hi}}));
  }

 private:
  enum class Kind { kTanh, kSigmoid, kUnknown };
  struct State {
    Kind kind = Kind::kUnknown;
    ChannelActivity activity;
  };
  SaturationParams p_;
  PerTensor<State> state_;
};

// Reads the newer (threshold_<act>_min/max) or the older tuple form
// (threshold_<act> = "min,max") of one activation's bounds.
void ReadBounds(ParamReader* p, const std::string& act, double* lo, double* hi, Status* err,
                const std::string& label) {
  const std::string min_key = "threshold_" + act + "_min", max_key = "threshold_" + act + "_max";
  const std::string tuple_key = "threshold_" + act;
  const bool has_new = p->Has(min_key) || p->Has(max_key);
  *lo = p->Double(min_key, *lo);
  *hi = p->Double(max_key, *hi);
  const std::vector<double> tuple = p->DoubleList(tuple_key, {});
  if (p->Has(tuple_key)) {
    if (has_new && err->ok()) {
      *err =
          Status::InvalidArgument("rule " + label + ": parameter " + tuple_key +
                                  " conflicts with " + min_key + "/" + max_key + "; give one form");
    } else if (tuple.size() != 2 && err->ok()) {
      *err = Status::InvalidArgument("rule " + label + ": parameter " + tuple_key +
                                     " must be \"min,max\"");
    } else if (tuple.size() == 2) {
      *lo = tuple[0];
      *hi = tuple[1];
    }
  }
  if (!(*lo < *hi) && err->ok()) {
    *err = Status::InvalidArgument("rule " + label + ": parameter " + min_key + " (" + Num(*lo) +
                                   ") must be below " + max_key + " (" + Num(*hi) + ")");
  }
}

}  // namespace

Result<std::unique_ptr<Rule>> CreateSaturatedActivationRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  SaturationParams q;
  Status bounds;
  ReadBounds(&p, "tanh", &q.tanh_min, &q.tanh_max, &bounds, label);
  ReadBounds(&p, "sigmoid", &q.sigmoid_min, &q.sigmoid_max, &bounds, label);
  q.threshold_inactivity = p.Double("threshold_inactivity", q.threshold_inactivity);
  p.CheckRange("threshold_inactivity", q.threshold_inactivity, 0, 100);
  q.threshold_layer = p.Double("threshold_layer", q.threshold_layer);
  p.CheckRange("threshold_layer", q.threshold_layer, 0, 100);
  q.band_counts = p.Bool("band_counts", false);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  TSTAT_RETURN_IF_ERROR(bounds);
  return MakeRule<SaturatedActivationRule>(spec, q);
}

}  // namespace tstat::rules
