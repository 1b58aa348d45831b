// The scenario table. Every run trains by full-batch gradient descent on the
// same split of the digits, so a healthy loss falls at every step (no
// mini-batch noise for the loss rules to mistake for a stall) and each fault
// is the one change listed in its entry.
#include "tools/demo/scenario.h"

namespace tstat::demo {

const char* ActivationName(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kSigmoid:
      return "sigmoid";
  }
  return "?";
}

namespace {

std::vector<Scenario> MakeScenarios() {
  std::vector<Scenario> s;
  auto add = [&s](std::string name, std::string fault, std::vector<std::string> rules) {
    Scenario sc;
    sc.name = std::move(name);
    sc.fault = std::move(fault);
    sc.expected_rules = std::move(rules);
    s.push_back(sc);
    return &s.back();
  };
  add("healthy", "none: 64-64-64-10 ReLU MLP, He init, lr 0.1", {});

  Scenario* sc =
      add("vanishing_gradient", "12 sigmoid hidden layers of 32 units", {"vanishing_gradient"});
  sc->model.activation = Activation::kSigmoid;
  sc->model.hidden = std::vector<int>(12, 32);

  sc = add("exploding_gradient", "learning rate 40 instead of 0.1", {"exploding_tensor"});
  sc->learning_rate = 40.0;

  sc = add("dead_relu", "hidden biases initialized to -3", {"dead_relu"});
  sc->model.hidden_bias = -3.0;

  sc = add("tanh_saturation", "tanh net, pixels scaled 0..255 instead of 0..1",
           {"saturated_activation"});
  sc->model.activation = Activation::kTanh;
  sc->model.input_scale = 255.0;

  sc = add("poor_initialization", "every weight initialized to the constant 0.1",
           {"poor_weight_initialization"});
  sc->model.init = WeightInit::kConstant;
  sc->model.init_value = 0.1;

  // Updates of 0 are seen at once; the loss judged flat after its horizon
  // (200 steps: past the short plan).
  sc = add("learning_rate_zero", "learning rate 0", {"weight_update_ratio"});
  sc->learning_rate = 0.0;

  // lr 0.5: it memorizes the 30 images within the short plan (--quick).
  sc = add("overfitting", "30 training images instead of 1,437, learning rate 0.5", {"overfit"});
  sc->data.train_rows = 30;
  sc->learning_rate = 0.5;

  sc = add("class_imbalance", "classes 2-9 cut to 1 in 20 of their images", {"class_imbalance"});
  sc->data.skew_labels = true;

  sc = add("nan_log_zero", "loss written as log(softmax(logits / 0.05)): log of an underflowed 0",
           {"nan_origin", "exploding_tensor"});
  sc->model.naive_log_softmax = true;
  sc->model.logit_scale = 20.0;
  return s;
}

}  // namespace

const std::vector<Scenario>& AllScenarios() {
  static const std::vector<Scenario> scenarios = MakeScenarios();
  return scenarios;
}

std::vector<std::string> ScenarioNames() {
  std::vector<std::string> names;
  for (const Scenario& s : AllScenarios()) names.push_back(s.name);
  return names;
}

RunPlan MakeRunPlan(bool quick, std::int64_t steps) {
  RunPlan plan;
  plan.train_steps = quick ? 100 : 300;
  plan.eval_every = 10;
  if (steps > 0) plan.train_steps = steps;
  return plan;
}

}  // namespace tstat::demo
