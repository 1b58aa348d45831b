// Fuzz target: an expression rule's `when`, parsed and evaluated on tensors
// with ordinary, empty and non-finite statistics.
#include <cmath>
#include <limits>
#include <string>

#include "rules/engine/expression.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

tstat::TensorStats Ordinary() {
  tstat::TensorStats s;
  s.count = s.finite_count = 8;
  s.zero_count = 1;
  s.neg_count = 3;
  s.min = -2.0;
  s.max = 3.0;
  s.sum = 4.0;
  s.mean = 0.5;
  s.m2 = 9.0;
  s.l1 = 11.0;
  s.l2 = 5.0;
  s.amax = 3.0;
  return s;
}

tstat::TensorStats NonFinite() {
  tstat::TensorStats s;
  s.count = 4;
  s.nan_count = 2;
  s.pos_inf_count = 1;
  s.neg_inf_count = 1;
  s.l2 = std::numeric_limits<double>::infinity();
  s.amax = std::numeric_limits<double>::infinity();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto parsed = tstat::rules::Expression::Parse(std::string(tstat::fuzz::AsText(data, size)));
  if (!parsed.ok()) return 0;
  static const tstat::TensorStats kInputs[] = {Ordinary(), NonFinite(), tstat::TensorStats{}};
  for (const tstat::TensorStats& stats : kInputs) {
    tstat::rules::ExpressionInput in;
    in.stats = &stats;
    in.step.global_step = 7;
    in.step.mode = tstat::Mode::kTrain;
    in.step.mode_step = 5;
    (void)(*parsed)->Evaluate(in);
  }
  return 0;
}
