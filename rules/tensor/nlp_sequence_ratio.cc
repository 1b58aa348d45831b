// nlp_sequence_ratio: an input token tensor in which token value
// token_values[k] makes up more than token_thresholds_percent[k] percent of
// the elements (default: token 0 above 50%, i.e. mostly padding), at every
// step where that holds. The count of a token comes from the record's
// count_values/value_counts (capture the token ids with count_values); the
// denominator is stats.count, or the product of the registered shape when
// the record has no stat set. One threshold applies to every token, or one
// per token. Default selection: tensor_regex ".*embedding0_input_0".
#include <cerrno>
#include <cstdlib>

#include "rules/tensor/tensor_rule.h"
#include "rules/tensor/tensor_rules.h"

namespace tstat::rules {
namespace {

class NlpSequenceRatioRule final : public TensorRuleT<NlpSequenceRatioRule> {
 public:
  NlpSequenceRatioRule(const RuleSpec& spec, std::vector<std::int64_t> tokens,
                       std::vector<double> thresholds)
      : TensorRuleT(WithDefaultRegex(spec, ".*embedding0_input_0"), {},
                    "value counts of the token_values (capture with count_values)"),
        tokens_(std::move(tokens)),
        thresholds_(std::move(thresholds)) {}

 public:
  void Check(const StepView& step, const TensorInfo& info, const TensorStatsRecord& r,
             std::vector<Finding>* findings) override {
    std::uint64_t n = r.has_stats ? r.stats.count : 0;
    if (!r.has_stats && !info.shape.empty()) {
      n = 1;
      for (std::int64_t d : info.shape) n *= static_cast<std::uint64_t>(d < 0 ? 0 : d);
    }
    bool all_counted = true;
    for (std::size_t k = 0; k < tokens_.size(); ++k) {
      std::size_t i = 0;
      while (i < r.count_values.size() && r.count_values[i] != tokens_[k]) ++i;
      if (i >= r.count_values.size() || i >= r.value_counts.size()) {
        all_counted = false;
        continue;
      }
      if (n == 0) continue;
      const double pct = 100.0 * static_cast<double>(r.value_counts[i]) / static_cast<double>(n);
      const double threshold = thresholds_.size() == 1 ? thresholds_[0] : thresholds_[k];
      if (!(pct > threshold)) continue;
      findings->push_back(MakeFinding(
          step, info.name,
          Num(pct) + "% of the tokens of " + info.name + " are " + std::to_string(tokens_[k]) +
              " (> token_thresholds_percent " + Num(threshold) +
              "%): sequences are mostly padding or unknown tokens; bucket sequences by length, "
              "lower the maximum length, or check the tokenizer's vocabulary",
          {{"token_value", static_cast<double>(tokens_[k])},
           {"percent", pct},
           {"threshold_percent", threshold}}));
    }
    NoteNeeded(step, info, all_counted);
  }

 private:
  std::vector<std::int64_t> tokens_;
  std::vector<double> thresholds_;
};

}  // namespace

Result<std::unique_ptr<Rule>> CreateNlpSequenceRatioRule(const RuleSpec& spec) {
  const std::string label = RuleLabel(spec);
  ParamReader p(label, spec.parameters);
  const std::vector<std::string> token_strs = p.List("token_values", {"0"});
  const std::vector<double> thresholds = p.DoubleList("token_thresholds_percent", {50.0});
  TSTAT_RETURN_IF_ERROR(p.Finish());
  std::vector<std::int64_t> tokens;
  for (const std::string& t : token_strs) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(t.c_str(), &end, 10);
    if (end == t.c_str() || *end != '\0' || errno == ERANGE) {
      return Status::InvalidArgument("rule " + label +
                                     ": parameter token_values must be a comma-separated list "
                                     "of integer token ids, got \"" +
                                     t + "\"");
    }
    tokens.push_back(v);
  }
  if (tokens.empty()) {
    return Status::InvalidArgument("rule " + label + ": parameter token_values is empty");
  }
  if (thresholds.size() != 1 && thresholds.size() != tokens.size()) {
    return Status::InvalidArgument("rule " + label + ": parameter token_thresholds_percent has " +
                                   std::to_string(thresholds.size()) +
                                   " values; give one, or one per token_values (" +
                                   std::to_string(tokens.size()) + ")");
  }
  for (double t : thresholds) {
    if (!(t >= 0 && t <= 100)) {
      return Status::InvalidArgument("rule " + label +
                                     ": parameter token_thresholds_percent must be in [0, 100], "
                                     "got " +
                                     Num(t));
    }
  }
  return MakeRule<NlpSequenceRatioRule>(spec, std::move(tokens), thresholds);
}

}  // namespace tstat::rules
