// The matrix's oracles: when each fault class MANIFESTS in a run, measured
// from the torch tensors themselves in double precision, independently of
// tstat (no tstat statistic, record or rule is read here). A rule is judged
// by how soon after this step it fires.
//
// The criteria, per TRAIN step s (steps count TRAIN steps):
//   vanishing_gradient    some weight's gradient has mean |g| < 1e-7
//   exploding_gradient    the global gradient L2 norm is non-finite, or above
//                         10x the median of its previous 10 values (after 5)
//                         at two steps in a row (manifest at the first: one
//                         large minibatch gradient is not a divergence)
//   dead_relu             a ReLU output has > 50% of its units (dim 1) with no
//                         positive value in the step's batch
//   saturated_activation  a tanh/sigmoid input has > 50% of its units with
//                         >= 95% of their inputs where the derivative < 1e-7
//   poor_initialization   in the first 10 steps, the variances of the
//                         nonlinearities' inputs differ more than 10x
//   loss_not_decreasing   after 200 steps (s >= 199: the horizon within which a
//                         network that learns lowers its loss by more than
//                         its noise, even under a warmup or a small learning
//                         rate), the median full training loss over the last
//                         20 steps is not below 99% of its median over the
//                         first 20 (the full loss is taken every 4th step: 5
//                         per window),
//                         and that first median is not below 3/4 of the
//                         chance level (the entropy of the training labels
//                         seen: the loss of predicting their frequencies) -
//                         a network that learned before the run began
//                         (resumed) sits on its plateau, which is no fault
//   overfitting           at an evaluation: the full training loss (mean of
//                         the last 4 evaluations) is > 40% below its value at
//                         the best (lowest) mean validation loss of 3
//                         evaluations, and the validation loss (that mean)
//                         is > 25% above that best, or rose at each of the
//                         last 5 evaluations to > 5% above it
//   class_imbalance       >= 500 TRAIN labels seen, and among the classes seen
//                         the most frequent is > 10x the rarest
//   nan_from_op           a tensor of the step (inputs and outputs of the
//                         nonlinearities, logits, log-probabilities,
//                         parameters, gradients) holds a NaN or an Inf
//                         (not the gradients of an overflow that dynamic
//                         loss scaling skipped: the loop says which, and
//                         such a step has no gradient norm either; gradients
//                         are measured divided by the loss scale)
//   tiny_update           some hidden weight's update has ||dw||/||w|| < 1e-8
//                         at three optimizer updates in a row (accumulating
//                         micro-batches and skipped overflows make none) (manifest at the first: a
//                         schedule that anneals to 0 at its last step is not
//                         a fault)
// Thread safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "tools/detection/cases.h"
#include "tools/detection/nets.h"

namespace tstat::detection {

struct Manifestation {
  std::int64_t step = -1;  // TRAIN step; -1: never
  std::string detail;      // what was measured there
};

// The horizon of loss_not_decreasing (see above), its windows and sampling.
inline constexpr std::int64_t kLearningHorizon = 200;
inline constexpr std::size_t kLossWindowSteps = 20;
inline constexpr std::int64_t kLossSampleEvery = 4;

class Oracle {
 public:
  // What the training loop knows of a step's gradients: they are the loss
  // scale times the true ones, and an overflow's update was skipped (dynamic
  // loss scaling: its non-finite gradients are no fault).
  struct Gradients {
    double scale = 1.0;
    bool update_skipped = false;
  };
  // After backward, before the update: the step's taps, logits,
  // log-probabilities, labels, parameters and their gradients.
  void ObserveTrainStep(std::int64_t step, Net& net, const torch::Tensor& logits,
                        const torch::Tensor& log_probs, const torch::Tensor& labels,
                        Gradients gradients);
  // After an optimizer update (not after a step that made none: an
  // accumulating micro-batch, a skipped overflow): the hidden weights before
  // (`before`) and now.
  void ObserveUpdate(std::int64_t step, const std::vector<torch::Tensor>& before, Net& net);
  // The loss over the whole training split with the weights of `step`, at
  // the steps where WantsFullTrainLoss() said so.
  void ObserveFullTrainLoss(std::int64_t step, double loss);
  // An evaluation after `step`: validation and full training loss.
  void ObserveEval(std::int64_t step, double validation_loss, double train_loss);
  // Whether the full training loss is needed at `step` (loss_not_decreasing).
  bool WantsFullTrainLoss(std::int64_t step) const;

  // The first manifestation of each fault class (kNone excluded).
  const std::map<Fault, Manifestation>& manifestations() const { return found_; }
  Manifestation Of(Fault f) const;

 private:
  void Note(Fault f, std::int64_t step, std::string detail);

  std::map<Fault, Manifestation> found_;
  static constexpr std::size_t kOverfitWindow = 3;       // evaluations: validation
  static constexpr std::size_t kOverfitTrainWindow = 4;  // ... and training
  std::deque<std::pair<double, double>> evals_;          // (validation, full training) losses
  static constexpr std::size_t kCreepEvaluations = 5;
  std::deque<double> recent_;  // validation losses
  std::vector<double> grad_norms_;
  std::vector<std::int64_t> label_counts_;
  std::vector<double> full_losses_;  // every kLossSampleEvery-th step
  std::int64_t grown_since_ = -1;    // first step of a run of 10x gradient norms
  std::int64_t tiny_since_ = -1;     // first step of a run of tiny updates
  double best_validation_ = 0.0, train_at_best_ = 0.0;
  bool has_best_ = false;
};

}  // namespace tstat::detection
