// The demo's scenarios: one healthy training run and one per injected fault,
// each described by plain data (model, optimizer, data) so the table of
// scenarios reads as a specification. The training itself is in trainer.cc.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tstat::demo {

enum class Activation { kRelu, kTanh, kSigmoid };
const char* ActivationName(Activation a);  // "relu", "tanh", "sigmoid"

enum class WeightInit {
  kHe,        // kaiming normal (fan_in, gain for the activation): the healthy choice
  kConstant,  // every weight = init_value
  kNormal,    // N(0, init_value^2)
};

struct ModelSpec {
  Activation activation = Activation::kRelu;
  std::vector<int> hidden = {64, 64};  // widths of the hidden layers
  WeightInit init = WeightInit::kHe;
  double init_value = 0.0;  // kConstant: the weight; kNormal: the std
  double hidden_bias = 0.0;  // initial bias of every hidden layer
  double input_scale = 1.0;  // pixels are in [0, 1]; x input_scale before layer 1
  // The loss: true = log(softmax(logits)) then -(onehot * logp).sum() (the
  // textbook formula, NaN once a probability underflows to 0); false =
  // log_softmax + nll (the stable form).
  bool naive_log_softmax = false;
  double logit_scale = 1.0;  // logits x logit_scale before the softmax (a temperature)
};

struct DataSpec {
  std::int64_t train_rows = 0;     // 0 = the whole training split
  bool skew_labels = false;        // keep classes 0 and 1, and 1 in 20 of the others
};

struct Scenario {
  std::string name;
  std::string fault;                        // what was injected, one line
  std::vector<std::string> expected_rules;  // rule names meant to find it
  ModelSpec model;
  DataSpec data;
  double learning_rate = 0.1;  // full-batch gradient descent
};

// Every scenario, healthy first, in the order the demo runs them.
const std::vector<Scenario>& AllScenarios();
std::vector<std::string> ScenarioNames();

struct RunPlan {
  std::int64_t train_steps = 0;  // planned TRAIN steps
  std::int64_t eval_every = 0;   // an EVAL step after every this many TRAIN steps
};
// The plan of the full demo, or of --quick; `steps` > 0 overrides train_steps.
RunPlan MakeRunPlan(bool quick, std::int64_t steps);

}  // namespace tstat::demo
