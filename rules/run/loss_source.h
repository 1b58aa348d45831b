// LossRuleBase: what the loss rules (loss_not_decreasing, overfit,
// overtraining, underfitting) share - finding the losses of a step and
// keeping one series per (worker, loss, mode).
//
// A loss is a selected record of the step:
//  - a scalar (SaveScalar) - its value;
//  - a tensor - its stats.mean (finite elements; NaN when none is finite).
// Selected = in the spec's collection_names or matching its tensor_regex
// (rules/engine/rule_base.h), or, when use_losses_collection (default true), in the
// collection "losses", or a scalar whose name contains "loss"/"Loss" (the
// smdebug losses regex).
// A run in which no loss was ever found gets a Diagnostics() message saying
// so: a loss rule never passes silently for want of data.
// Thread safety: like Rule, driven by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rules/engine/param_reader.h"
#include "rules/engine/rule_base.h"

namespace tstat::rules::run {

struct LossValue {
  std::uint32_t id = 0;  // the tensor/scalar id (per worker)
  const std::string* name = nullptr;
  double value = 0.0;
};

// A series key: the same loss name on one worker in one mode.
struct SeriesKey {
  int worker = 0;
  std::uint32_t id = 0;
  Mode mode = Mode::kGlobal;
  bool operator==(const SeriesKey& o) const {
    return worker == o.worker && id == o.id && mode == o.mode;
  }
};
struct SeriesKeyHash {
  std::size_t operator()(const SeriesKey& k) const {
    return (static_cast<std::size_t>(k.worker) << 40) ^ (static_cast<std::size_t>(k.id) << 8) ^
           static_cast<std::size_t>(k.mode);
  }
};

class LossRuleBase : public RuleBase {
 public:
  // Reads use_losses_collection from `params`.
  LossRuleBase(const RuleSpec& spec, ParamReader* params);

  // "no loss found ..." when steps were evaluated but none held a loss, else
  // what RuleBase says; `extra` explains rule-specific needs (e.g. EVAL).
  std::string Diagnostics() const override;
  void Evaluate(const StepView& step, std::vector<Finding>* findings) override {
    EvaluateViaIndex(step, findings);
  }
  // Loss tensors (scalars are saved whenever they are given): their stat set
  // in every mode.
  CaptureNeeds Needs(const TensorInfo& t) const override;

 protected:
  // The losses of `step` (empty when its mode is not selected).
  void CollectLosses(const IndexedStep& step, std::vector<LossValue>* out);
  bool saw_loss() const { return saw_loss_; }
  // A rule-specific diagnostic (shown when losses were found but the rule
  // still could not evaluate), or empty.
  virtual std::string MissingData() const { return {}; }

 private:
  bool IsLoss(const StepView& step, std::uint32_t id, std::vector<std::int8_t>& cache);

  bool use_losses_collection_ = true;
  std::unordered_map<int, std::vector<std::int8_t>> is_loss_;  // by worker, then id
  LayoutCache loss_records_;                                   // records whose tensor is a loss
  bool saw_step_ = false;
  bool saw_loss_ = false;
};

// The parameter `mode` of the loss rules: unset (every mode separately) or
// one mode. Sets *error (if still OK) naming the parameter for anything else.
std::optional<Mode> ReadModeParam(const RuleSpec& spec, ParamReader* params, Status* error);

// Whether a value recorded in `recorded` belongs to the training series:
// TRAIN, or GLOBAL (a run that never set a mode).
inline bool IsTrainingMode(Mode recorded) {
  return recorded == Mode::kTrain || recorded == Mode::kGlobal;
}

}  // namespace tstat::rules::run
