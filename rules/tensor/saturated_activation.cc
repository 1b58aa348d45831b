// saturated_activation: a tanh or sigmoid input whose saturated units exceed
// `threshold_layer` percent (default 50) of its units. An input x is
// saturated when it lies outside the open interval (min, max) for its
// activation — tanh (-9.4999, 9.4999), sigmoid (-23, 16.99999) by default,
// where the activation's gradient is below 1e-7. A unit is a channel of the
// per-channel stats along the units' axis (as dead_relu's); its activity is
// the share of its non-NaN inputs that were not saturated in the last
// `window` (default 1) judged steps, and it is saturated when that is below
// `threshold_inactivity` percent (default 5; smdebug's 1 misses a net whose
// inputs are 95% saturated, e.g. pixels fed as 0..255). Fires at every step
// where the layer condition holds.
// The saturated count of a channel at a step is band_lo_count +
// band_hi_count (exact) when the capture counted that band: band_counts=true
// (the capture's band_lo/band_hi must be set to the rule's min/max), or, by
// default, when the tensor is in the rules collection that asked for this
// band (rules/engine/capture_needs.h). Otherwise it is taken from the channel's
// min/max: every input when all lie on one side (min >= max_threshold or
// max <= min_threshold), else none (a lower bound: never a false alarm).
// The activation is told by the tensor name (containing "tanh" or
// "sigmoid"; the one it names last). A name ending in _output (or
// _output_N) is the activation's output, judged against f(min) and f(max):
// the Python hook reads a tanh or sigmoid called as a function after a sum
// only there ("fc2_input.tanh_output"), since autograd keeps its output, not
// its input. Default selection:
// tensor_regex "(tanh|sigmoid)[^/]*_input(_\d+)?$" (tanh1_input,
// fc1.sigmoid_input) or "_input\.(tanh|sigmoid)_output$", case ignored. TRAIN
// and GLOBAL steps unless modes are given.
// Needs: per-unit stats with the activation's band counts.
#include <algorithm>
#include <cmath>
#include <deque>
#include <unordered_map>

#include "rules/engine/capture_needs.h"
#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

struct SaturationParams {
  double tanh_min = -9.4999, tanh_max = 9.4999;
  double sigmoid_min = -23.0, sigmoid_max = 16.99999;
  double threshold_inactivity = 5.0;
  double threshold_layer = 50.0;
  int band_counts = -1;  // -1 auto (the rules collection of this band), 0 no, 1 yes
  std::int64_t window = 1;
};

// Whether `name` is an activation's output: it ends in _output or _output_N.
bool NamesAnOutput(const std::string& name) {
  std::size_t end = name.size();
  while (end > 0 && name[end - 1] >= '0' && name[end - 1] <= '9') --end;
  if (end < name.size()) {
    if (end == 0 || name[end - 1] != '_') return false;
    --end;
  }
  static constexpr char kOutput[] = "_output";
  constexpr std::size_t n = sizeof(kOutput) - 1;
  return end >= n && name.compare(end - n, n, kOutput) == 0;
}

class SaturatedActivationRule final : public TensorRuleT<SaturatedActivationRule> {
 public:
  SaturatedActivationRule(const RuleSpec& spec, SaturationParams p)
      : TensorRuleT(WithDefaultRegex(spec,
                                     "(?i)(tanh|sigmoid)[^/]*_input(_\\d+)?$|_input\\.(tanh|"
                                     "sigmoid)_output$"),
                    {}, "per-unit statistics (per_channel_axis: the units' axis)"),
        p_(p) {}

  CaptureNeeds Needs(const TensorInfo& t) const override {
    if (!Takes(t) || !MayHaveUnits(t)) return {};
    const Kind kind = KindOf(t.name);
    if (kind == Kind::kUnknown) return {};
    const Bounds b = BoundsOf(kind, t.name);
    CaptureNeeds n;
    n.per_unit = true;
    n.band = true;
    n.band_lo = b.lo;
    n.band_hi = b.hi;
    n.modes = JudgedModes(CaptureNeeds::TrainModes());
    return n;
  }

  bool ModeAllowed(Mode m) const override { return TrainModeAllowed(m); }

  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    bool first = false;
    State& st = state_.Get(PerTensor<State>::WorkerGroup(step.worker), info.id, &first);
    if (first) {
      st.kind = KindOf(info.name);
      st.bounds = BoundsOf(st.kind, info.name);
      st.exact = p_.band_counts == 1 ||
                 (p_.band_counts < 0 && HasBandCounts(info, st.bounds.lo, st.bounds.hi));
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
    if (!PerUnitStats(info, r)) return;
    const bool tanh = st.kind == Kind::kTanh;
    const double lo = st.bounds.lo, hi = st.bounds.hi;
    const std::vector<TensorStats>& ch = r.per_channel->channels;
    if (st.units != ch.size()) {  // a new layer shape starts over
      st.units = ch.size();
      st.steps.clear();
    }
    st.steps.emplace_back(ch.size());
    for (std::size_t c = 0; c < ch.size(); ++c) {
      const TensorStats& s = ch[c];
      const std::uint64_t total = NonNanCount(s);
      std::uint64_t saturated = 0;
      if (st.exact) {
        saturated = s.band_lo_count + s.band_hi_count;
      } else if (s.finite_count == 0) {
        saturated = s.inf_count();
      } else if (s.min >= hi || s.max <= lo) {
        saturated = total;
      }
      st.steps.back()[c] = {total - std::min(saturated, total), total};
    }
    if (static_cast<std::int64_t>(st.steps.size()) > p_.window) st.steps.pop_front();
    ChannelActivity& act = st.activity;
    act.Reset(ch.size());
    for (const auto& counts : st.steps) {
      for (std::size_t c = 0; c < counts.size(); ++c) act.Add(c, counts[c].first, counts[c].second);
    }
    const std::vector<std::size_t> sat = act.Inactive(p_.threshold_inactivity);
    const std::size_t units = act.ObservedUnits();
    if (units == 0) return;
    const double pct = 100.0 * static_cast<double>(sat.size()) / static_cast<double>(units);
    if (!(pct > p_.threshold_layer)) return;
    findings->push_back(MakeFinding(
        step, info.name,
        std::to_string(sat.size()) + " of " + std::to_string(units) + " units of " +
            (tanh ? "tanh" : "sigmoid") + (st.bounds.output ? " output " : " input ") + info.name +
            " (" + Num(pct) + "% > threshold_layer " + Num(p_.threshold_layer) +
            "%) are saturated: outside (" + Num(lo) + ", " + Num(hi) + ")" +
            (st.bounds.output ? std::string(", the activation of (") + Num(st.bounds.x_lo) + ", " +
                                    Num(st.bounds.x_hi) + "),"
                              : std::string()) +
            " in > " + Num(100 - p_.threshold_inactivity) + "% of their inputs (channels " +
            IndexList(sat) +
            "), so almost no gradient flows; normalize the inputs (batch/layer norm), lower the "
            "learning rate, or scale the initialization down",
        {{"saturated_percent", pct},
         {"saturated_units", static_cast<double>(sat.size())},
         {"units", static_cast<double>(units)},
         {"threshold_layer", p_.threshold_layer},
         {"threshold_inactivity", p_.threshold_inactivity},
         {"threshold_min", lo},
         {"threshold_max", hi}}));
  }

 private:
  enum class Kind { kTanh, kSigmoid, kUnknown };
  // The saturation band of a tensor: its input's (x_lo, x_hi), or for an
  // output the activation of those bounds (the function is increasing). In
  // float32, tanh(9.4999) rounds to 1, where torch's backward (1 - y^2) is
  // exactly 0, and sigmoid(16.99999) to the float below 1 (y (1 - y) < 1e-7).
  struct Bounds {
    double lo = 0, hi = 0;
    double x_lo = 0, x_hi = 0;
    bool output = false;
  };
  Bounds BoundsOf(Kind kind, const std::string& name) const {
    Bounds b;
    b.x_lo = kind == Kind::kTanh ? p_.tanh_min : p_.sigmoid_min;
    b.x_hi = kind == Kind::kTanh ? p_.tanh_max : p_.sigmoid_max;
    b.output = NamesAnOutput(name);
    const auto f = [kind](double x) {
      return kind == Kind::kTanh ? std::tanh(x) : 1.0 / (1.0 + std::exp(-x));
    };
    b.lo = b.output ? f(b.x_lo) : b.x_lo;
    b.hi = b.output ? f(b.x_hi) : b.x_hi;
    return b;
  }
  // The activation named last: a name says what it is of at its end
  // ("tanh_proj.sigmoid_input", "tanh_proj_input.sigmoid_output": sigmoid).
  static Kind KindOf(const std::string& name) {
    const std::string lower = AsciiLower(name);
    const std::size_t tanh = lower.rfind("tanh"), sigmoid = lower.rfind("sigmoid");
    if (tanh == std::string::npos && sigmoid == std::string::npos) return Kind::kUnknown;
    if (tanh == std::string::npos) return Kind::kSigmoid;
    if (sigmoid == std::string::npos) return Kind::kTanh;
    return tanh > sigmoid ? Kind::kTanh : Kind::kSigmoid;
  }
  struct State {
    Kind kind = Kind::kUnknown;
    Bounds bounds;
    bool exact = false;  // band counts of the rule's band
    std::size_t units = 0;
    // Per judged step in the window: (unsaturated, non-NaN) inputs per unit.
    std::deque<std::vector<std::pair<std::uint64_t, std::uint64_t>>> steps;
    ChannelActivity activity;  // scratch
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
  if (p.Has("band_counts")) q.band_counts = p.Bool("band_counts", false) ? 1 : 0;
  q.window = p.Int("window", 1);
  p.CheckRange("window", static_cast<double>(q.window), 1, 1e6);
  TSTAT_RETURN_IF_ERROR(p.Finish());
  TSTAT_RETURN_IF_ERROR(bounds);
  return MakeRule<SaturatedActivationRule>(spec, q);
}

}  // namespace tstat::rules
