// The demo's model: a multi-layer perceptron that keeps the tensors of its
// last forward pass (each hidden layer's activation input and output, the
// logits and the log-probabilities) so the session can capture them at
// EndStep. Names follow smdebug's conventions so the built-in rules' default
// selections find them: "fc1.relu_input", "fc1.relu_output", ...
// Thread safety: one training thread.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "tools/demo/scenario.h"

namespace tstat::demo {

// A forward pass's tensors that the session captures, by name.
struct CapturedActivation {
  std::string name;
  torch::Tensor value;  // detached, contiguous, float32; undefined before the first pass
};

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(const ModelSpec& spec, int inputs, int classes);

  // Logits [n, classes]; keeps the activations of this pass.
  torch::Tensor forward(const torch::Tensor& x);
  // The scenario's loss of `logits` against `labels` (int64 [n]); keeps the
  // log-probabilities as the "head.log_probs_output" activation.
  torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& labels);

  // Slots in capture (forward) order; their tensors change at every pass.
  std::vector<CapturedActivation>& activations() { return activations_; }

 private:
  void Initialize(const ModelSpec& spec);

  ModelSpec spec_;
  std::vector<torch::nn::Linear> layers_;
  std::vector<CapturedActivation> activations_;
};
TORCH_MODULE(Mlp);

}  // namespace tstat::demo
