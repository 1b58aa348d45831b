// The matrix's cases (cases.h).
#include "tools/detection/cases.h"

#include <algorithm>

#include "tools/detection/oracle.h"

namespace tstat::detection {
namespace {

struct Healthy {
  Arch arch;
  Optimizer optimizer;
  double lr;
  Schedule schedule;
  int batch;
};

// Eight healthy trainings: every architecture with two optimizers, every
// schedule twice. Learning rates are ordinary ones for these nets, not tuned
// against the rules.
const Healthy kHealthy[] = {
    {Arch::kMlpRelu, Optimizer::kMomentum, 0.05, Schedule::kStepDecay, 32},
    {Arch::kMlpRelu, Optimizer::kAdam, 1e-3, Schedule::kWarmup, 64},
    {Arch::kCnn, Optimizer::kMomentum, 0.05, Schedule::kCosine, 32},
    {Arch::kCnn, Optimizer::kAdam, 1e-3, Schedule::kConstant, 64},
    {Arch::kMlpTanh, Optimizer::kSgd, 0.1, Schedule::kConstant, 32},
    {Arch::kMlpTanh, Optimizer::kAdam, 2e-3, Schedule::kCosine, 64},
    {Arch::kResNet, Optimizer::kAdam, 1e-3, Schedule::kWarmup, 32},
    {Arch::kResNet, Optimizer::kMomentum, 0.05, Schedule::kStepDecay, 64},
};

// The architectures a fault is tried on, one per seed (cycling).
std::vector<Arch> FaultArchs(Fault f) {
  switch (f) {
    case Fault::kVanishingGradient:
      return {Arch::kDeepSigmoid};
    case Fault::kSaturatedActivation:
      return {Arch::kMlpTanh};
    case Fault::kOverfitting:
      return {Arch::kWideMlp};
    case Fault::kPoorInitialization:
      return {Arch::kMlpRelu, Arch::kResNet, Arch::kCnn};
    case Fault::kNanFromOp:
      return {Arch::kMlpRelu, Arch::kCnn, Arch::kMlpTanh};
    default:
      return {Arch::kMlpRelu, Arch::kCnn, Arch::kResNet};
  }
}

Case FaultCase(Fault f, Arch arch, std::uint64_t seed, std::int64_t steps) {
  Case c;
  c.fault = f;
  c.arch = arch;
  c.seed = seed;
  c.steps = steps;
  c.optimizer = Optimizer::kAdam;
  c.lr = 1e-3;
  c.schedule = Schedule::kConstant;
  c.batch = 32;
  // Mid-run faults start after the run has settled (steps / 5).
  const std::int64_t mid = std::max<std::int64_t>(10, steps / 5);
  switch (f) {
    case Fault::kNone:
      break;
    case Fault::kVanishingGradient:
      c.optimizer = Optimizer::kSgd;
      c.lr = 0.1;
      break;
    case Fault::kExplodingGradient:
      c.optimizer = Optimizer::kMomentum;
      c.lr = 0.05;
      c.fault_step = mid;
      break;
    case Fault::kSaturatedActivation:
      c.optimizer = Optimizer::kSgd;
      c.lr = 0.1;
      break;
    case Fault::kDeadRelu:
    case Fault::kTinyUpdate:
      c.optimizer = f == Fault::kTinyUpdate ? Optimizer::kMomentum : Optimizer::kAdam;
      c.lr = f == Fault::kTinyUpdate ? 0.05 : 1e-3;
      c.fault_step = mid;
      break;
    case Fault::kNanFromOp:
      c.fault_step = 3 * mid / 2;
      break;
    case Fault::kPoorInitialization:
      c.init = Init::kTiny;
      c.optimizer = Optimizer::kMomentum;
      c.lr = 0.05;
      break;
    case Fault::kLossNotDecreasing:
      c.lr = 0.0;
      // Long enough to pass loss_not_decreasing's horizon (oracle.h).
      c.steps = std::max<std::int64_t>(steps, kLearningHorizon + 40);
      break;
    case Fault::kClassImbalance:
      break;
    case Fault::kOverfitting:
      c.train_rows = 32;
      c.lr = 5e-3;
      break;
  }
  c.name = std::string(FaultName(f)) + "/" + ArchName(arch) + "/s" + std::to_string(seed);
  return c;
}

// A healthy training of `x` named "<prefix><arch>-<optimizer>-<schedule>/s<seed>".
Case HealthyCase(const Healthy& x, const char* prefix, int seed, const MatrixOptions& options) {
  Case c;
  c.arch = x.arch;
  c.optimizer = x.optimizer;
  c.lr = x.lr;
  c.schedule = x.schedule;
  c.batch = x.batch;
  c.seed = static_cast<std::uint64_t>(seed);
  c.steps = options.steps;
  c.eval_every = options.eval_every;
  c.name = std::string(prefix) + ArchName(x.arch) + "-" + OptimizerName(x.optimizer) + "-" +
           ScheduleName(x.schedule) + "/s" + std::to_string(seed);
  return c;
}

bool Wanted(const Case& c, const std::vector<std::string>& only) {
  if (only.empty()) return true;
  return std::any_of(only.begin(), only.end(),
                     [&c](const std::string& p) { return c.name.compare(0, p.size(), p) == 0; });
}

}  // namespace

const char* FaultName(Fault f) {
  switch (f) {
    case Fault::kNone:
      return "healthy";
    case Fault::kVanishingGradient:
      return "vanishing_gradient";
    case Fault::kExplodingGradient:
      return "exploding_gradient";
    case Fault::kDeadRelu:
      return "dead_relu";
    case Fault::kSaturatedActivation:
      return "saturated_activation";
    case Fault::kPoorInitialization:
      return "poor_initialization";
    case Fault::kLossNotDecreasing:
      return "loss_not_decreasing";
    case Fault::kOverfitting:
      return "overfitting";
    case Fault::kClassImbalance:
      return "class_imbalance";
    case Fault::kNanFromOp:
      return "nan_from_op";
    case Fault::kTinyUpdate:
      return "tiny_update";
  }
  return "?";
}

const char* IntendedRule(Fault f) {
  switch (f) {
    case Fault::kNone:
      return "";
    case Fault::kVanishingGradient:
      return "vanishing_gradient";
    case Fault::kExplodingGradient:
      return "exploding_tensor";
    case Fault::kDeadRelu:
      return "dead_relu";
    case Fault::kSaturatedActivation:
      return "saturated_activation";
    case Fault::kPoorInitialization:
      return "poor_weight_initialization";
    case Fault::kLossNotDecreasing:
      return "loss_not_decreasing";
    case Fault::kOverfitting:
      return "overfit";
    case Fault::kClassImbalance:
      return "class_imbalance";
    case Fault::kNanFromOp:
      return "nan_origin";
    case Fault::kTinyUpdate:
      return "weight_update_ratio";
  }
  return "";
}

std::vector<Fault> AllFaults() {
  return {Fault::kVanishingGradient,   Fault::kExplodingGradient,  Fault::kDeadRelu,
          Fault::kSaturatedActivation, Fault::kPoorInitialization, Fault::kLossNotDecreasing,
          Fault::kOverfitting,         Fault::kClassImbalance,     Fault::kNanFromOp,
          Fault::kTinyUpdate};
}

const char* OptimizerName(Optimizer o) {
  switch (o) {
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kMomentum:
      return "momentum";
    case Optimizer::kAdam:
      return "adam";
  }
  return "?";
}

const char* ScheduleName(Schedule s) {
  switch (s) {
    case Schedule::kConstant:
      return "constant";
    case Schedule::kStepDecay:
      return "step";
    case Schedule::kCosine:
      return "cosine";
    case Schedule::kWarmup:
      return "warmup";
  }
  return "?";
}

std::vector<Case> MakeMatrix(const MatrixOptions& options) {
  const int seeds = options.quick ? 1 : std::max(1, options.seeds);
  std::vector<Case> out;
  const std::size_t healthy = options.quick ? 4 : std::size(kHealthy);
  for (std::size_t h = 0; h < healthy; ++h) {
    // --quick: one configuration per architecture.
    const Healthy& x = kHealthy[options.quick ? 2 * h : h];
    for (int s = 1; s <= seeds; ++s) {
      Case c = HealthyCase(x, "healthy/", s, options);
      if (Wanted(c, options.only)) out.push_back(c);
    }
  }
  // Resumed: a model trained `steps` steps, to its plateau, before tstat
  // attaches (seed 1; --quick: two of them). Its loss starts learned.
  const std::size_t resumed = options.quick ? 2 : std::size(kHealthy);
  for (std::size_t h = 0; h < resumed; ++h) {
    Case c = HealthyCase(kHealthy[options.quick ? 3 * h : h], "resumed/", 1, options);
    c.pretrain_steps = options.steps;
    if (Wanted(c, options.only)) out.push_back(c);
  }
  // Healthy trainings that leave updates out on purpose: dynamic loss
  // scaling from DeepSpeed's and Megatron's initial scale (overflows, in a
  // row at the start), and gradient accumulation (seed 1; --quick: one each).
  const std::size_t special = options.quick ? 1 : 2;
  for (std::size_t h = 0; h < special; ++h) {
    Case scaled = HealthyCase(kHealthy[2 * h + 1], "scaled/", 1, options);
    scaled.loss_scale = 4294967296.0;  // 2^32
    if (Wanted(scaled, options.only)) out.push_back(scaled);
    Case accumulated = HealthyCase(kHealthy[2 * h + 1], "accumulated/", 1, options);
    accumulated.accumulate = 4;
    if (Wanted(accumulated, options.only)) out.push_back(accumulated);
  }
  for (Fault f : AllFaults()) {
    const std::vector<Arch> archs = FaultArchs(f);
    for (int s = 1; s <= seeds; ++s) {
      Case c = FaultCase(f, archs[static_cast<std::size_t>(s - 1) % archs.size()],
                         static_cast<std::uint64_t>(s), options.steps);
      c.eval_every = options.eval_every;
      if (Wanted(c, options.only)) out.push_back(c);
    }
  }
  return out;
}

}  // namespace tstat::detection
