// SkippedUpdates: tells an update the optimizer skipped because its gradients
// held NaN/Inf from one that applied them.
//
// Why: dynamic loss scaling (torch.cuda.amp.GradScaler, DeepSpeed, Megatron,
// Apex) multiplies the loss by a large scale so that fp16 gradients do not
// underflow, and lets them overflow now and then on purpose: at an overflow
// the gradients hold Inf/NaN, the optimizer step is skipped and the scale
// halves. That is routine - a few times at the start, then once every
// thousand steps or so - and reporting it as a critical NaN would stop every
// mixed-precision training.
//
// The signature of a skipped update, independent of the step order of the
// caller (a session may read the weights before the optimizer step, as the
// PyTorch hook does, or after it, as a LibTorch loop that ends its step after
// optimizer.step() does): at a training step only gradients are non-finite,
// the forward tensors (activations, the loss) are finite, and the weights of
// those gradients ("gradient/<name>" -> "<name>") are captured and finite at
// that step and at the worker's next training step. An update that applied
// the gradients leaves a weight non-finite at one of the two. A run of
// `max_in_row` skipped updates in a row is not skipped any more: the
// gradients overflow at any scale, and the rules report it.
//
// The rules that judge non-finite values (nan_origin, exploding_tensor) hold
// their findings about such a step until the next training step of its
// worker says whether the update was skipped (drop them) or applied (report
// them, one step late).
// Thread safety: none (a rule's state).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tstat/rule.h"

namespace tstat::rules {

// Where a tensor sits in a step's data flow, by collection: 0 forward tensors
// (inputs, activations, outputs, the loss), 1 gradients, 2 weights and biases.
int DataFlowRank(const TensorInfo& t);

class SkippedUpdates {
 public:
  // 0 turns the recognition off: every non-finite gradient is reported.
  explicit SkippedUpdates(std::int64_t max_in_row) : max_in_row_(max_in_row) {}

  enum class Outcome { kNone, kSkipped, kApplied };
  // At every judged step of a worker, before Hold(): what became of the
  // update of the step it holds, if this is the next training step. kNone
  // when nothing is held (or this step is not a training step).
  Outcome Resolve(const StepView& step);

  // At every judged step of a worker, with the selected tensors that hold
  // NaN/Inf (empty when none): true when the findings about them must wait
  // for Resolve() at the worker's next training step.
  bool Hold(const StepView& step, const std::vector<const TensorInfo*>& nonfinite);

  // Updates skipped in a row by the worker, up to its last training step.
  std::int64_t InRow(int worker) const;
  // "; the optimizer skipped the last N updates in a row ...": what a
  // finding adds once the worker's skips reached max_in_row, else empty.
  std::string InRowNote(int worker) const;
  // A held finding, reported at `step` when Resolve() says kApplied.
  static void ReportApplied(const StepView& step, Finding* held);
  // "rule <rule>: 3 update(s) skipped ...: TRAIN step 0, ...", the rule's
  // Notes(), or empty when none was.
  std::string Note(const std::string& rule) const;

 private:
  struct Worker {
    bool holding = false;
    StepKey held_step;
    std::vector<std::string> weights;  // of the held non-finite gradients
    std::int64_t in_row = 0;
  };
  static bool TrainingStep(const StepView& step);
  std::int64_t max_in_row_;
  std::unordered_map<int, Worker> workers_;
  std::int64_t total_ = 0;
  std::vector<StepKey> first_skipped_;  // the first few, for Summary()
};

}  // namespace tstat::rules
