// The matrix's oracles (oracle.h): torch in float64, nothing of tstat.
#include "tools/detection/oracle.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tstat::detection {
namespace {

torch::Tensor D(const torch::Tensor& t) { return t.detach().to(torch::kFloat64); }

std::string Fmt(const char* format, double a, double b = 0.0, double c = 0.0) {
  char buf[192];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

bool AllFinite(const torch::Tensor& t) {
  return !t.defined() || torch::isfinite(t.detach()).all().item<bool>();
}

// Per unit (dim 1) of `t` [n, units, ...]: the fraction of its values for
// which `mask` holds.
torch::Tensor UnitFraction(const torch::Tensor& mask) {
  torch::Tensor m = mask.to(torch::kFloat64);
  if (m.dim() < 2) return m.mean().unsqueeze(0);
  m = m.transpose(0, 1).reshape({m.size(1), -1});
  return m.mean(1);
}

}  // namespace

void Oracle::Note(Fault f, std::int64_t step, std::string detail) {
  Manifestation& m = found_[f];
  if (m.step >= 0) return;
  m.step = step;
  m.detail = std::move(detail);
}

Manifestation Oracle::Of(Fault f) const {
  auto it = found_.find(f);
  return it == found_.end() ? Manifestation{} : it->second;
}

bool Oracle::WantsFullTrainLoss(std::int64_t step) const {
  return step % kLossSampleEvery == kLossSampleEvery - 1 && Of(Fault::kLossNotDecreasing).step < 0;
}

void Oracle::ObserveTrainStep(std::int64_t step, Net& net, const torch::Tensor& logits,
                              const torch::Tensor& log_probs, const torch::Tensor& labels,
                              Gradients gradients) {
  torch::NoGradGuard no_grad;
  // Non-finite values anywhere in the step.
  std::string bad;
  for (const Tap& t : net.taps()) {
    if (!AllFinite(t.input)) bad = t.name + "_input";
    if (bad.empty() && !AllFinite(t.output)) bad = t.name + "_output";
    if (!bad.empty()) break;
  }
  if (bad.empty() && !AllFinite(logits)) bad = "logits";
  if (bad.empty() && !AllFinite(log_probs)) bad = "log-probabilities";
  double grad_sq = 0.0;
  double min_grad = INFINITY;
  std::string min_grad_name;
  for (const auto& p : net.module().named_parameters()) {
    if (bad.empty() && !AllFinite(p.value())) bad = p.key();
    const torch::Tensor g = p.value().grad();
    // An overflow the loop skipped: its gradients are no measure of anything.
    if (!g.defined() || gradients.update_skipped) continue;
    if (bad.empty() && !AllFinite(g)) bad = "gradient of " + p.key();
    const torch::Tensor gd = D(g) / gradients.scale;
    grad_sq += gd.pow(2).sum().item<double>();
    if (p.key().find("weight") != std::string::npos) {
      const double mean_abs = gd.abs().mean().item<double>();
      if (mean_abs < min_grad) min_grad = mean_abs, min_grad_name = p.key();
    }
  }
  if (!bad.empty()) Note(Fault::kNanFromOp, step, "non-finite values in " + bad);

  if (min_grad < 1e-7) {
    Note(Fault::kVanishingGradient, step,
         "mean |g| of " + min_grad_name + " = " + Fmt("%.3g", min_grad));
  }

  const double norm = std::sqrt(grad_sq);
  if (gradients.update_skipped) {
    // No gradient norm at a skipped overflow.
  } else if (!std::isfinite(norm)) {
    Note(Fault::kExplodingGradient, step, "gradient norm is not finite");
  } else if (grad_norms_.size() >= 5) {
    std::vector<double> last(grad_norms_.end() - std::min<std::size_t>(10, grad_norms_.size()),
                             grad_norms_.end());
    std::nth_element(last.begin(), last.begin() + last.size() / 2, last.end());
    const double median = last[last.size() / 2];
    if (norm > 10.0 * median) {
      if (grown_since_ < 0) grown_since_ = step;
      if (step - grown_since_ + 1 >= 2) {
        Note(Fault::kExplodingGradient, grown_since_,
             "gradient norm " + Fmt("%.3g = %.3gx its recent median", norm, norm / median));
      }
    } else {
      grown_since_ = -1;
    }
  }
  if (std::isfinite(norm) && !gradients.update_skipped) grad_norms_.push_back(norm);

  std::vector<std::pair<double, std::string>> input_vars;
  for (const Tap& t : net.taps()) {
    if (!t.input.defined()) continue;
    if (t.kind == Nonlinearity::kRelu) {
      // A unit is dead in this batch when none of its outputs is positive.
      const torch::Tensor alive = UnitFraction(D(t.output) > 0) > 0;
      const double dead = 1.0 - alive.to(torch::kFloat64).mean().item<double>();
      if (dead > 0.5) {
        Note(Fault::kDeadRelu, step, t.name + Fmt(": %.0f%% of units dead", 100 * dead));
      }
    } else {
      const torch::Tensor x = D(t.input);
      torch::Tensor deriv;
      if (t.kind == Nonlinearity::kTanh) {
        deriv = 1 - torch::tanh(x).pow(2);
      } else {
        const torch::Tensor s = torch::sigmoid(x);
        deriv = s * (1 - s);
      }
      const torch::Tensor saturated_units = UnitFraction(deriv < 1e-7) >= 0.95;
      const double share = saturated_units.to(torch::kFloat64).mean().item<double>();
      if (share > 0.5) {
        Note(Fault::kSaturatedActivation, step,
             t.name + Fmt(": %.0f%% of units saturated", 100 * share));
      }
    }
    const double var = D(t.input).var(/*unbiased=*/false).item<double>();
    if (std::isfinite(var)) input_vars.emplace_back(var, t.name);
  }
  if (step < 10 && input_vars.size() >= 2) {
    const auto [lo, hi] = std::minmax_element(input_vars.begin(), input_vars.end());
    const double ratio = lo->first > 0 ? hi->first / lo->first : INFINITY;
    if (ratio > 10.0) {
      Note(Fault::kPoorInitialization, step,
           "input variances differ " + Fmt("%.3gx", ratio) + " (" + hi->second + " vs " +
               lo->second + ")");
    }
  }

  const torch::Tensor counts = torch::bincount(labels.detach().to(torch::kInt64).flatten());
  if (label_counts_.size() < static_cast<std::size_t>(counts.size(0))) {
    label_counts_.resize(static_cast<std::size_t>(counts.size(0)), 0);
  }
  std::int64_t total = 0, mx = 0, mn = 0;
  for (std::int64_t i = 0; i < counts.size(0); ++i) {
    label_counts_[static_cast<std::size_t>(i)] += counts[i].item<std::int64_t>();
  }
  for (std::int64_t c : label_counts_) {
    total += c;
    if (c == 0) continue;
    mx = std::max(mx, c);
    mn = mn == 0 ? c : std::min(mn, c);
  }
  if (total >= 500 && mn > 0 && static_cast<double>(mx) > 10.0 * static_cast<double>(mn)) {
    Note(Fault::kClassImbalance, step,
         Fmt("class counts %.0f vs %.0f", static_cast<double>(mx), static_cast<double>(mn)));
  }
}

void Oracle::ObserveUpdate(std::int64_t step, const std::vector<torch::Tensor>& before, Net& net) {
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> now = net.hidden_weights();
  std::string tiny;
  for (std::size_t i = 0; i < now.size() && i < before.size() && tiny.empty(); ++i) {
    const double w = D(now[i]).norm().item<double>();
    const double dw = (D(now[i]) - D(before[i])).norm().item<double>();
    if (w > 0 && dw / w < 1e-8) {
      tiny = Fmt("hidden weight %.0f: |dw|/|w| = %.3g", static_cast<double>(i + 1), dw / w);
    }
  }
  if (tiny.empty()) {
    tiny_since_ = -1;
    return;
  }
  if (tiny_since_ < 0) tiny_since_ = step;
  if (step - tiny_since_ + 1 >= 3) Note(Fault::kTinyUpdate, tiny_since_, tiny);
}

void Oracle::ObserveFullTrainLoss(std::int64_t step, double loss) {
  full_losses_.push_back(loss);
  const std::size_t window = kLossWindowSteps / kLossSampleEvery;
  if (step + 1 < kLearningHorizon || full_losses_.size() < 2 * window) return;
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  const double first = median({full_losses_.begin(), full_losses_.begin() + window});
  const double last = median({full_losses_.end() - window, full_losses_.end()});
  // The chance level: the cross-entropy of predicting the labels' frequencies.
  double total = 0.0, chance = 0.0;
  for (std::int64_t c : label_counts_) total += static_cast<double>(c);
  for (std::int64_t c : label_counts_) {
    if (c > 0) chance -= c / total * std::log(c / total);
  }
  if (!(last < 0.99 * first) && first >= 0.75 * chance) {
    Note(Fault::kLossNotDecreasing, step,
         Fmt("median full training loss %.4g over the last 20 steps, %.4g over the first 20 "
             "(chance %.4g)",
             last, first, chance));
  }
}

void Oracle::ObserveEval(std::int64_t step, double validation_loss, double train_loss) {
  if (!std::isfinite(validation_loss) || !std::isfinite(train_loss)) return;
  evals_.emplace_back(validation_loss, train_loss);
  if (evals_.size() > kOverfitTrainWindow) evals_.pop_front();
  recent_.push_back(validation_loss);
  if (recent_.size() > kCreepEvaluations + 1) recent_.pop_front();
  bool creeps = recent_.size() == kCreepEvaluations + 1;
  for (std::size_t i = 1; i < recent_.size(); ++i) creeps = creeps && recent_[i] > recent_[i - 1];
  double v = 0.0, t = 0.0;
  std::size_t v_n = 0, age = evals_.size();
  for (const auto& [ev, et] : evals_) {
    if (age-- <= kOverfitWindow) {
      v += ev;
      ++v_n;
    }
    t += et;
  }
  v /= static_cast<double>(v_n);
  t /= static_cast<double>(evals_.size());
  if (!has_best_ || v < best_validation_) {
    has_best_ = true;
    best_validation_ = v;
    train_at_best_ = t;
    return;
  }
  if (t < 0.6 * train_at_best_ &&
      (v > 1.25 * best_validation_ || (creeps && validation_loss > 1.05 * best_validation_))) {
    Note(Fault::kOverfitting, step,
         Fmt("validation loss %.4g, best %.4g", v, best_validation_) +
             Fmt("; training loss %.4g, %.4g then", t, train_at_best_));
  }
}

}  // namespace tstat::detection
