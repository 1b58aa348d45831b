// A rules test driver fed one scalar loss: the loss rules' tests
// (loss_rules_test.cc, fit_rules_test.cc).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tests/rules/run_rules_test_util.h"

namespace tstat::rules::runtest {

// A driver with one scalar "loss" (in collection losses, as the host files it).
struct LossDriver {
  explicit LossDriver(const RuleSpec& spec) : d(MakeRuleOrDie(spec)) {
    loss = d.catalog.Add("loss", {"losses", "scalars"}, TensorKind::kScalar);
  }
  std::vector<Finding> At(std::int64_t step, double value, Mode mode = Mode::kGlobal,
                          std::int64_t mode_step = -1) {
    return d.Step(Key(step, mode, mode_step), {{loss, value, 0.0}});
  }
  // Feeds (step, value) pairs; returns the steps at which findings came.
  std::vector<std::int64_t> Run(const std::vector<std::pair<std::int64_t, double>>& points,
                                Mode mode = Mode::kGlobal) {
    std::vector<std::int64_t> fired;
    for (const auto& [s, v] : points) {
      for (const Finding& f : At(s, v, mode)) {
        fired.push_back(f.step.global_step);
        findings.push_back(f);
      }
    }
    return fired;
  }
  Driver d;
  std::uint32_t loss = 0;
  std::vector<Finding> findings;
};

using Steps = std::vector<std::int64_t>;

}  // namespace tstat::rules::runtest
