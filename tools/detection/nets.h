// The models of the detection matrix: small classifiers of 8x8 digit images
// (a ReLU MLP, a CNN, a tanh or sigmoid MLP, a residual MLP), none of them the
// demo's. Each forward pass keeps, for every nonlinearity, its input and
// output ("taps"), which the matrix hands to tstat under README's naming
// conventions (<tap>_input, <tap>_output) and which the oracles read in
// double precision.
// Thread safety: one training thread per net.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tstat::detection {

enum class Arch {
  kMlpRelu,      // 64-128-64-10, ReLU, He init
  kMlpTanh,      // 64-64-64-10, tanh, Xavier init
  kCnn,          // conv 1->8, conv 8->16 (3x3, ReLU), max-pool, fc 256->10
  kResNet,       // fc 64->64 + two residual blocks of two layers, ReLU
  kDeepSigmoid,  // ten sigmoid layers of 32 units, torch's default init
  kWideMlp,      // 64-256-256-10, ReLU, He init (overfits a small training set)
};
const char* ArchName(Arch a);

enum class Nonlinearity { kRelu, kTanh, kSigmoid };

// One nonlinearity of the last forward pass.
struct Tap {
  std::string name;  // "relu1", "block1.relu_a", "tanh2"
  Nonlinearity kind = Nonlinearity::kRelu;
  torch::Tensor input, output;  // detached; undefined before the first pass
};

class Net {
 public:
  virtual ~Net() = default;
  // Logits [n, 10] of x [n, 64] (pixels); keeps the taps of this pass.
  virtual torch::Tensor Forward(const torch::Tensor& x) = 0;
  virtual torch::nn::Module& module() = 0;
  // The taps, in forward order.
  std::vector<Tap>& taps() { return taps_; }
  // The weights of the layers that feed a nonlinearity (for the oracles and
  // fault injection), in forward order; biases likewise.
  virtual std::vector<torch::Tensor> hidden_weights() = 0;
  virtual std::vector<torch::Tensor> hidden_biases() = 0;

 protected:
  // Applies `kind` to `z`, recording the tap `index`.
  torch::Tensor Apply(std::size_t index, const torch::Tensor& z);
  void AddTap(std::string name, Nonlinearity kind) {
    taps_.push_back({std::move(name), kind, {}, {}});
  }

 private:
  std::vector<Tap> taps_;
};

// How the weights of a net start.
enum class Init {
  kDefault,  // the architecture's healthy choice (He for ReLU, Xavier for tanh)
  kTiny,     // N(0, 0.01^2) everywhere: signals shrink layer by layer
};

// A new net of `arch`, initialized from torch's global generator.
std::unique_ptr<Net> MakeNet(Arch arch, Init init);

}  // namespace tstat::detection
