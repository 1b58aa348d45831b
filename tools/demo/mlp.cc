#include "tools/demo/mlp.h"

#include <cmath>

namespace tstat::demo {
namespace {

torch::Tensor Activate(Activation a, const torch::Tensor& z) {
  switch (a) {
    case Activation::kRelu:
      return torch::relu(z);
    case Activation::kTanh:
      return torch::tanh(z);
    case Activation::kSigmoid:
      return torch::sigmoid(z);
  }
  return z;
}

// He (kaiming normal, fan_in) gain for each activation.
double InitGain(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return std::sqrt(2.0);
    case Activation::kTanh:
      return 5.0 / 3.0;
    case Activation::kSigmoid:
      return 1.0;
  }
  return 1.0;
}

}  // namespace

MlpImpl::MlpImpl(const ModelSpec& spec, int inputs, int classes) : spec_(spec) {
  int in = inputs;
  std::vector<int> widths = spec.hidden;
  widths.push_back(classes);
  for (std::size_t i = 0; i < widths.size(); ++i) {
    const std::string name = "fc" + std::to_string(i + 1);
    layers_.push_back(register_module(name, torch::nn::Linear(in, widths[i])));
    in = widths[i];
    if (i + 1 < widths.size()) {
      const std::string act = ActivationName(spec.activation);
      activations_.push_back({name + "." + act + "_input", {}});
      activations_.push_back({name + "." + act + "_output", {}});
    }
  }
  activations_.push_back({"logits_output", {}});
  activations_.push_back({"head.log_probs_output", {}});
  Initialize(spec);
}

void MlpImpl::Initialize(const ModelSpec& spec) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    torch::Tensor w = layers_[i]->weight;
    const bool hidden = i + 1 < layers_.size();
    switch (spec.init) {
      case WeightInit::kHe: {
        const double gain = hidden ? InitGain(spec.activation) : 1.0;
        w.normal_(0.0, gain / std::sqrt(static_cast<double>(w.size(1))));
        break;
      }
      case WeightInit::kConstant:
        w.fill_(spec.init_value);
        break;
      case WeightInit::kNormal:
        w.normal_(0.0, spec.init_value);
        break;
    }
    layers_[i]->bias.fill_(hidden ? spec.hidden_bias : 0.0);
  }
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = spec_.input_scale == 1.0 ? x : x * spec_.input_scale;
  std::size_t slot = 0;
  for (std::size_t i = 0; i + 1 < layers_.size(); ++i) {
    torch::Tensor z = layers_[i]->forward(h);
    h = Activate(spec_.activation, z);
    activations_[slot++].value = z.detach();
    activations_[slot++].value = h.detach();
  }
  torch::Tensor logits = layers_.back()->forward(h);
  if (spec_.logit_scale != 1.0) logits = logits * spec_.logit_scale;
  activations_[slot].value = logits.detach();
  return logits;
}

torch::Tensor MlpImpl::Loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  torch::Tensor log_probs;
  torch::Tensor loss;
  if (spec_.naive_log_softmax) {
    // The fault: log of a softmax that can round to exactly 0, then
    // 0 * -inf = NaN for every class that is not the label.
    log_probs = torch::log(torch::softmax(logits, 1));
    torch::Tensor onehot = torch::one_hot(labels, logits.size(1)).to(torch::kFloat32);
    loss = -(onehot * log_probs).sum(1).mean();
  } else {
    log_probs = torch::log_softmax(logits, 1);
    loss = torch::nll_loss(log_probs, labels);
  }
  activations_.back().value = log_probs.detach();
  return loss;
}

}  // namespace tstat::demo
