// RuleBase: what every built-in rule shares — its spec, which tensors and
// modes it looks at (collection_names ∪ tensor_regex, or the rule's default
// collections when neither is given), the "matched nothing" warning, and the
// construction of findings.
// Thread safety: like Rule, driven by one thread.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tstat/rule.h"

namespace re2 {
class RE2;
}

namespace tstat::rules {

class RuleBase : public Rule {
 public:
  // `default_collections` apply when the spec names neither collections nor a regex.
  RuleBase(RuleSpec spec, std::vector<std::string> default_collections);
  ~RuleBase() override;

  const RuleSpec& spec() const override { return spec_; }
  std::string Diagnostics() const override;

  // kInvalidArgument naming tensor_regex if it does not compile.
  Status Init();

 protected:
  bool ModeSelected(Mode m) const;
  // Selection of one tensor of one worker (cached by worker and id).
  bool Selected(const StepView& step, std::uint32_t tensor_id);
  const TensorInfo* Info(const StepView& step, std::uint32_t tensor_id) const {
    return step.catalog ? step.catalog->Find(tensor_id) : nullptr;
  }
  Finding MakeFinding(const StepView& step, const std::string& tensor, std::string message,
                      std::vector<std::pair<std::string, double>> values) const;

 private:
  bool Matches(const TensorInfo& t) const;

  RuleSpec spec_;
  std::vector<std::string> collections_;
  std::unique_ptr<re2::RE2> regex_;
  std::unordered_map<std::uint64_t, bool> cache_;
  bool saw_tensors_ = false;
  bool matched_any_ = false;
};

// Formats a double for messages ("1e-07", "0.25").
std::string Num(double v);

}  // namespace tstat::rules
