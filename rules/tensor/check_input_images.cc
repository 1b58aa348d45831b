// check_input_images: input images that are not normalized. For each selected
// input tensor the per-channel sums and finite counts along axis `channel`
// (default 1, NCHW) are accumulated over its saved steps, together with the
// number of samples seen (the batch size: shape[0], or shape[1] when channel
// is 0; 1 per record if the shape is unknown). Once at least
// `threshold_samples` (default 500) samples were seen, fires at every step
// where some channel's accumulated mean has |mean| > `threshold_mean`
// (default 0.2). Needs per-channel stats along `channel`. Selection:
// collection_names / tensor_regex, else `regex` (smdebug's parameter, default
// ".*hybridsequential0_input_0").
#include <cmath>
#include <unordered_map>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

struct InputImageParams {
  double threshold_mean = 0.2;
  std::int64_t threshold_samples = 500;
  std::int64_t channel = 1;
};

class CheckInputImagesRule final : public TensorRuleT<CheckInputImagesRule> {
 public:
  CheckInputImagesRule(const RuleSpec& spec, InputImageParams p)
      : TensorRuleT(spec, {},
                    "per-channel statistics along axis " + std::to_string(p.channel) +
                        " (capture with per_channel_axis = channel)"),
        p_(p) {}

 public:
  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    const bool axis_ok = r.per_channel && r.per_channel->axis == p_.channel;
    NoteNeeded(step, info, axis_ok);
    if (r.per_channel && !axis_ok) {
      NoteProblem(info.name + " carries per-channel stats along axis " +
                  std::to_string(r.per_channel->axis) + ", not along channel " +
                  std::to_string(p_.channel));
    }
    if (!axis_ok) return;
    const std::vector<TensorStats>& ch = r.per_channel->channels;
    State& st = state_.Get(PerTensor<State>::WorkerGroup(step.worker), info.id);
    if (st.sum.size() != ch.size())
      st = State{std::vector<double>(ch.size(), 0.0), std::vector<std::uint64_t>(ch.size(), 0), 0};
    for (std::size_t c = 0; c < ch.size(); ++c) {
      st.sum[c] += ch[c].sum;
      st.n[c] += ch[c].finite_count;
    }
    const std::size_t batch_axis = p_.channel == 0 ? 1 : 0;
    st.samples += info.shape.size() > batch_axis ? info.shape[batch_axis] : 1;
    if (st.samples < p_.threshold_samples) return;
    std::vector<std::size_t> bad;
    double worst = 0;
    std::size_t worst_c = 0;
    for (std::size_t c = 0; c < ch.size(); ++c) {
      if (st.n[c] == 0) continue;
      const double mean = st.sum[c] / static_cast<double>(st.n[c]);
      if (!(std::fabs(mean) > p_.threshold_mean)) continue;
      bad.push_back(c);
      if (std::fabs(mean) > std::fabs(worst)) {
        worst = mean;
        worst_c = c;
      }
    }
    if (bad.empty()) return;
    findings->push_back(MakeFinding(
        step, info.name,
        "input " + info.name + " is not normalized: over " + std::to_string(st.samples) +
            " samples the mean of channel " + std::to_string(worst_c) + " is " + Num(worst) +
            " (|mean| > threshold_mean " + Num(p_.threshold_mean) + "; channels " + IndexList(bad) +
            "); subtract the per-channel mean and divide by the std in the input pipeline",
        {{"mean", worst},
         {"channel_index", static_cast<double>(worst_c)},
         {"channels_off", static_cast<double>(bad.size())},
         {"samples", static_cast<double>(st.samples)},
         {"threshold_mean", p_.threshold_mean}}));
  }

 private:
  struct State {
    std::vector<double> sum;
    std::vector<std::uint64_t> n;
    std::int64_t samples = 0;
  };
  InputImageParams p_;
  PerTensor<State> state_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateCheckInputImagesRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  InputImageParams q;
  q.threshold_mean = p.Double("threshold_mean", q.threshold_mean);
  p.CheckRange("threshold_mean", q.threshold_mean, 0, kNoLimit);
  q.threshold_samples = p.Int("threshold_samples", q.threshold_samples);
  p.CheckRange("threshold_samples", static_cast<double>(q.threshold_samples), 0, 1e15);
  q.channel = p.Int("channel", q.channel);
  p.CheckRange("channel", static_cast<double>(q.channel), 0, 64);
  const bool has_regex = p.Has("regex");
  const std::string regex = p.String("regex", ".*hybridsequential0_input_0");
  TSTAT_RETURN_IF_ERROR(p.Finish());
  if (has_regex && !spec.tensor_regex.empty()) {
    return Status::InvalidArgument("rule " + label +
                                   ": parameter regex conflicts with tensor_regex; give one");
  }
  RuleSpec s = spec;
  if (has_regex) s.tensor_regex = regex;
  return MakeRule<CheckInputImagesRule>(WithDefaultRegex(std::move(s), regex), q);
}

}  // namespace tstat::rules
