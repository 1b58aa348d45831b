// One scenario's training loop. Full-batch gradient descent (one step = the
// whole training split), an EVAL pass over the validation split every
// plan.eval_every steps, everything captured at every step.
//
// Order inside a TRAIN step: forward, backward, capture (EndStep), then the
// optimizer update. Capturing before the update means the weights saved at
// step s are the ones step s's forward pass used, so a NaN produced by step
// s's loss shows up first in that step's activations and gradients, where
// nan_origin can name it, not in weights that were already updated with it.
#include "tools/demo/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "tools/demo/mlp.h"
#include "tstat/session.h"
#include "tstat_torch/adapter.h"

namespace tstat::demo {
namespace {

constexpr std::uint64_t kSplitSeed = 20240521;
constexpr std::int64_t kValidationRows = 360;

struct Split {
  torch::Tensor train_x, train_y, val_x, val_y;
};

// A fixed shuffle (SplitMix64, not libtorch's RNG, so the split never depends
// on the model's seed), the last kValidationRows rows for validation, then
// the scenario's cuts of the training rows.
Split MakeSplit(const Dataset& data, const DataSpec& spec) {
  const std::int64_t n = data.rows();
  std::vector<std::int64_t> order(n);
  for (std::int64_t i = 0; i < n; ++i) order[i] = i;
  std::uint64_t state = kSplitSeed;
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::swap(order[i], order[z % static_cast<std::uint64_t>(i + 1)]);
  }
  const std::int64_t val_rows = std::min<std::int64_t>(kValidationRows, n / 5);
  std::vector<std::int64_t> train(order.begin(), order.end() - val_rows);
  std::vector<std::int64_t> val(order.end() - val_rows, order.end());
  if (spec.skew_labels) {
    std::vector<std::int64_t> kept;
    std::map<std::int64_t, int> seen;
    for (std::int64_t r : train) {
      const std::int64_t label = data.labels[r];
      if (label <= 1 || seen[label]++ % 20 == 0) kept.push_back(r);
    }
    train = std::move(kept);
  }
  if (spec.train_rows > 0 && spec.train_rows < static_cast<std::int64_t>(train.size())) {
    train.resize(spec.train_rows);
  }
  auto gather = [&data](const std::vector<std::int64_t>& rows, torch::Tensor* x,
                        torch::Tensor* y) {
    const auto m = static_cast<std::int64_t>(rows.size());
    *x = torch::empty({m, kDigitPixels}, torch::kFloat32);
    *y = torch::empty({m}, torch::kInt64);
    float* px = x->data_ptr<float>();
    std::int64_t* py = y->data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < m; ++i) {
      std::copy_n(data.pixels.begin() + rows[i] * kDigitPixels, kDigitPixels,
                  px + i * kDigitPixels);
      py[i] = data.labels[rows[i]];
    }
  };
  Split s;
  gather(train, &s.train_x, &s.train_y);
  gather(val, &s.val_x, &s.val_y);
  return s;
}

// What a user writes: a run directory and the rules turned on. The session
// captures what the default rules need (per-unit stats of activations, label
// counts, deltas of weights, every step) and the rest at the default
// schedule.
SessionConfig MakeSessionConfig(const std::string& run_dir) {
  SessionConfig c;
  c.out_dir = run_dir;
  c.rules.enabled = true;
  return c;
}

// The view of a slot's current tensor; nothing (skipped) before the first pass.
Status ViewOfSlot(const torch::Tensor& t, TensorView* view) {
  if (!t.defined()) {
    view->data = nullptr;
    return Status::OK();
  }
  TSTAT_ASSIGN_OR_RETURN(*view, torch_adapter::ViewOf(t));
  return Status::OK();
}

// Registers, in capture order: the forward activations, the labels, then the
// parameters and their gradients (the adapter's RegisterParameters). The
// activations are registered here rather than through the adapter's lazy
// TensorSlot so that they come first in capture order, which is the order
// nan_origin reads to name where a NaN started.
Status RegisterModel(Session* session, Mlp& model, const torch::Tensor* labels) {
  auto add = [session](std::string name, std::function<torch::Tensor()> tensor,
                       DType dtype) -> Status {
    TensorSpec spec;
    spec.name = std::move(name);
    spec.view.dtype = dtype;
    spec.view_fn = [tensor](TensorView* view) { return ViewOfSlot(tensor(), view); };
    return session->RegisterTensor(spec).status();
  };
  for (CapturedActivation& slot : model->activations()) {
    CapturedActivation* s = &slot;
    TSTAT_RETURN_IF_ERROR(add(s->name, [s] { return s->value; }, DType::kFloat32));
  }
  TSTAT_RETURN_IF_ERROR(add("labels", [labels] { return *labels; }, DType::kInt64));
  return torch_adapter::RegisterParameters(*session, *model).status();
}

// One hit per rule, at the step its first episode was reported; at the same
// step the scenario's expected rules come first (they fired together; the
// table leads with the one the scenario is about).
std::vector<RuleHit> Summarize(const std::vector<Episode>& episodes,
                               const std::vector<std::string>& expected) {
  std::vector<RuleHit> hits;
  for (const Episode& e : episodes) {
    auto it = std::find_if(hits.begin(), hits.end(),
                           [&e](const RuleHit& h) { return h.rule == e.rule; });
    if (it != hits.end()) {
      ++it->episodes;
      continue;
    }
    hits.push_back({e.rule, e.type, e.severity, e.reported, e.tensor, e.opening.message, 1});
  }
  auto is_expected = [&expected](const RuleHit& h) {
    return std::find(expected.begin(), expected.end(), h.rule) != expected.end();
  };
  std::stable_sort(hits.begin(), hits.end(), [&](const RuleHit& a, const RuleHit& b) {
    if (a.step.global_step != b.step.global_step) return a.step.global_step < b.step.global_step;
    return is_expected(a) && !is_expected(b);
  });
  return hits;
}

}  // namespace

std::int64_t ScenarioResult::first_finding_step() const {
  return found.empty() ? -1 : found.front().step.global_step;
}

bool ScenarioResult::passed() const {
  if (expected_rules.empty()) return found.empty();
  for (const std::string& rule : expected_rules) {
    const bool hit = std::any_of(found.begin(), found.end(),
                                 [&rule](const RuleHit& h) { return h.rule == rule; });
    if (!hit) return false;
  }
  return true;
}

Result<ScenarioResult> RunScenario(const Scenario& scenario, const Dataset& data,
                                   const RunPlan& plan, const std::string& run_dir) {
  const auto start = std::chrono::steady_clock::now();
  ScenarioResult result;
  result.scenario = scenario.name;
  result.fault = scenario.fault;
  result.expected_rules = scenario.expected_rules;
  result.steps_planned = plan.train_steps;
  result.run_dir = run_dir;

  torch::manual_seed(0);
  const Split split = MakeSplit(data, scenario.data);
  Mlp model(scenario.model, kDigitPixels, kDigitClasses);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(scenario.learning_rate));

  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                         Session::Create(MakeSessionConfig(run_dir)));
  torch::Tensor labels;  // the labels of the current step, captured as "labels"
  TSTAT_RETURN_IF_ERROR(RegisterModel(session.get(), model, &labels));

  for (std::int64_t step = 0; step < plan.train_steps; ++step) {
    TSTAT_RETURN_IF_ERROR(session->SetMode(Mode::kTrain));
    TSTAT_RETURN_IF_ERROR(session->BeginStep());
    optimizer.zero_grad();
    labels = split.train_y;
    torch::Tensor loss = model->Loss(model->forward(split.train_x), labels);
    loss.backward();
    const double loss_value = loss.item<double>();
    if (step == 0) result.first_loss = loss_value;
    result.last_loss = loss_value;
    TSTAT_RETURN_IF_ERROR(session->SaveScalar("loss", loss_value));
    TSTAT_RETURN_IF_ERROR(session->EndStep());
    ++result.steps_run;
    if (session->ShouldStop()) break;
    optimizer.step();

    if (plan.eval_every > 0 && (step + 1) % plan.eval_every == 0) {
      torch::NoGradGuard no_grad;
      TSTAT_RETURN_IF_ERROR(session->SetMode(Mode::kEval));
      TSTAT_RETURN_IF_ERROR(session->BeginStep());
      labels = split.val_y;
      torch::Tensor val_loss = model->Loss(model->forward(split.val_x), labels);
      TSTAT_RETURN_IF_ERROR(session->SaveScalar("loss", val_loss.item<double>()));
      TSTAT_RETURN_IF_ERROR(session->EndStep());
      if (session->ShouldStop()) break;
    }
  }
  result.stop_reason = session->stop_reason();
  TSTAT_RETURN_IF_ERROR(session->Close());
  result.found = Summarize(session->episodes(), scenario.expected_rules);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace tstat::demo
