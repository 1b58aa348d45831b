// The detection matrix: healthy trainings (several architectures, optimizers,
// learning-rate schedules, seeds) and one injected fault per class, each run
// with tstat's DEFAULT configuration (rules enabled, nothing else). It is the
// tuning set of the default rules; the demo is not.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/detection/nets.h"

namespace tstat::detection {

enum class Fault {
  kNone,
  kVanishingGradient,    // ten sigmoid layers: the first layers get no gradient
  kExplodingGradient,    // the learning rate jumps x100 at fault_step: training diverges
  kDeadRelu,             // hidden biases pushed to -5 at fault_step: most ReLUs never fire again
  kSaturatedActivation,  // the pixels reach a tanh net as 0..255, not 0..1 (not normalized)
  kPoorInitialization,   // every weight N(0, 0.01^2): signals shrink layer by layer
  kLossNotDecreasing,    // a learning-rate schedule that returns 0: nothing is learned
  kOverfitting,          // a wide MLP on 32 training images
  kClassImbalance,       // training classes 2-9 cut to 1 in 20 (validation stays balanced)
  kNanFromOp,            // from fault_step the loss is log(softmax(50 x logits)): log 0, 0 x -inf
  kTinyUpdate,           // the learning rate drops to 1e-9 at fault_step: updates vanish
};
const char* FaultName(Fault f);
// The rule meant to find the fault ("" for kNone).
const char* IntendedRule(Fault f);
std::vector<Fault> AllFaults();

enum class Optimizer { kSgd, kMomentum, kAdam };
enum class Schedule {
  kConstant,
  kStepDecay,  // x0.1 after 60% of the steps
  kCosine,     // cosine from lr to 0 over the planned steps
  kWarmup,     // linear from 0 over 30 steps, then cosine
};
const char* OptimizerName(Optimizer o);
const char* ScheduleName(Schedule s);

struct Case {
  std::string name;  // "healthy/cnn-momentum-cosine/s1", "dead_relu/resnet/s2"
  Fault fault = Fault::kNone;
  Arch arch = Arch::kMlpRelu;
  Init init = Init::kDefault;
  Optimizer optimizer = Optimizer::kAdam;
  double lr = 1e-3;
  Schedule schedule = Schedule::kConstant;
  int batch = 32;
  std::uint64_t seed = 1;
  std::int64_t steps = 200;     // planned TRAIN steps
  std::int64_t eval_every = 5;  // an EVAL pass over the validation split after every N
  std::int64_t fault_step = 0;  // TRAIN step at which a mid-run fault is injected
  std::int64_t train_rows = 0;  // 0: the whole training split
  // Steps trained before tstat is attached (a model resumed from its
  // checkpoint): `steps` more are trained with it, numbered from 0, and the
  // learning-rate schedule spans both.
  std::int64_t pretrain_steps = 0;
  // > 0: dynamic loss scaling from this scale, as torch.cuda.amp.GradScaler
  // does it, with fp16's range emulated (a scaled gradient past 65504 is
  // Inf; that update is skipped and the scale halved; it doubles after 100
  // good updates).
  double loss_scale = 0.0;
  // Micro-batches (tstat steps) per optimizer step: gradient accumulation.
  std::int64_t accumulate = 1;
};

struct MatrixOptions {
  int seeds = 3;                  // seeds per configuration (>= 1)
  std::int64_t steps = 200;       // planned TRAIN steps per run
  std::int64_t eval_every = 5;    // an EVAL pass after every N TRAIN steps
  bool quick = false;             // one seed, one configuration per fault, fewer healthy runs
  std::vector<std::string> only;  // name prefixes; empty = every case
};

// Every case of the matrix: healthy runs first (then the same trainings
// resumed: tstat attached after `steps` steps without it), then the faults.
std::vector<Case> MakeMatrix(const MatrixOptions& options);

}  // namespace tstat::detection
