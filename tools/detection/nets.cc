// The matrix's nets (nets.h).
#include "tools/detection/nets.h"

#include <cmath>
#include <utility>

namespace tstat::detection {
namespace {

constexpr int kPixels = 64;
constexpr int kClasses = 10;

// He (ReLU) or Xavier (tanh, sigmoid) normal init of a weight [out, in, ...].
void InitWeight(torch::Tensor w, Nonlinearity kind, Init init) {
  torch::NoGradGuard no_grad;
  if (init == Init::kTiny) {
    w.normal_(0.0, 0.01);
    return;
  }
  const double fan_in = static_cast<double>(w.numel() / w.size(0));
  const double fan_out = static_cast<double>(w.numel() / w.size(1));
  const double std =
      kind == Nonlinearity::kRelu ? std::sqrt(2.0 / fan_in) : std::sqrt(2.0 / (fan_in + fan_out));
  w.normal_(0.0, std);
}

void InitLinear(const torch::nn::Linear& l, Nonlinearity kind, Init init) {
  InitWeight(l->weight, kind, init);
  torch::NoGradGuard no_grad;
  l->bias.zero_();
}

class Mlp final : public Net {
 public:
  Mlp(Nonlinearity kind, const std::vector<int>& widths, Init init, bool torch_default_init)
      : kind_(kind) {
    const char* prefix = kind == Nonlinearity::kRelu   ? "relu"
                         : kind == Nonlinearity::kTanh ? "tanh"
                                                       : "sigmoid";
    int in = kPixels;
    for (std::size_t i = 0; i <= widths.size(); ++i) {
      const int out = i < widths.size() ? widths[i] : kClasses;
      torch::nn::Linear l =
          holder_.register_module("fc" + std::to_string(i + 1), torch::nn::Linear(in, out));
      if (!torch_default_init) InitLinear(l, kind, init);
      layers_.push_back(l);
      if (i < widths.size()) AddTap(prefix + std::to_string(i + 1), kind);
      in = out;
    }
  }
  torch::Tensor Forward(const torch::Tensor& x) override {
    torch::Tensor h = x;
    for (std::size_t i = 0; i + 1 < layers_.size(); ++i) h = Apply(i, layers_[i]->forward(h));
    return layers_.back()->forward(h);
  }
  torch::nn::Module& module() override { return holder_; }
  std::vector<torch::Tensor> hidden_weights() override {
    std::vector<torch::Tensor> out;
    for (std::size_t i = 0; i + 1 < layers_.size(); ++i) out.push_back(layers_[i]->weight);
    return out;
  }
  std::vector<torch::Tensor> hidden_biases() override {
    std::vector<torch::Tensor> out;
    for (std::size_t i = 0; i + 1 < layers_.size(); ++i) out.push_back(layers_[i]->bias);
    return out;
  }

 private:
  Nonlinearity kind_;
  torch::nn::Module holder_;
  std::vector<torch::nn::Linear> layers_;
};

class Cnn final : public Net {
 public:
  explicit Cnn(Init init) {
    conv1_ = holder_.register_module(
        "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)));
    conv2_ = holder_.register_module(
        "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)));
    fc_ = holder_.register_module("fc", torch::nn::Linear(16 * 4 * 4, kClasses));
    for (auto* c : {&conv1_, &conv2_}) {
      InitWeight((*c)->weight, Nonlinearity::kRelu, init);
      torch::NoGradGuard no_grad;
      (*c)->bias.zero_();
    }
    InitLinear(fc_, Nonlinearity::kTanh, init);  // Xavier for the classifier
    AddTap("relu1", Nonlinearity::kRelu);
    AddTap("relu2", Nonlinearity::kRelu);
  }
  torch::Tensor Forward(const torch::Tensor& x) override {
    torch::Tensor h = x.view({-1, 1, 8, 8});
    h = Apply(0, conv1_->forward(h));
    h = Apply(1, conv2_->forward(h));
    h = torch::max_pool2d(h, 2);
    return fc_->forward(h.flatten(1));
  }
  torch::nn::Module& module() override { return holder_; }
  std::vector<torch::Tensor> hidden_weights() override { return {conv1_->weight, conv2_->weight}; }
  std::vector<torch::Tensor> hidden_biases() override { return {conv1_->bias, conv2_->bias}; }

 private:
  torch::nn::Module holder_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc_{nullptr};
};

class ResNet final : public Net {
 public:
  explicit ResNet(Init init) {
    in_ = holder_.register_module("fc_in", torch::nn::Linear(kPixels, kWidth));
    InitLinear(in_, Nonlinearity::kRelu, init);
    AddTap("relu0", Nonlinearity::kRelu);
    for (int b = 1; b <= kBlocks; ++b) {
      const std::string p = "block" + std::to_string(b);
      torch::nn::Linear a = holder_.register_module(p + "_fc_a", torch::nn::Linear(kWidth, kWidth));
      torch::nn::Linear c = holder_.register_module(p + "_fc_b", torch::nn::Linear(kWidth, kWidth));
      InitLinear(a, Nonlinearity::kRelu, init);
      InitLinear(c, Nonlinearity::kRelu, init);
      {
        // The residual branch starts small, so the sum keeps its scale.
        torch::NoGradGuard no_grad;
        c->weight.mul_(0.5);
      }
      fc_a_.push_back(a);
      fc_b_.push_back(c);
      AddTap(p + ".relu_a", Nonlinearity::kRelu);
      AddTap(p + ".relu_out", Nonlinearity::kRelu);
    }
    head_ = holder_.register_module("head", torch::nn::Linear(kWidth, kClasses));
    InitLinear(head_, Nonlinearity::kTanh, init);
  }
  torch::Tensor Forward(const torch::Tensor& x) override {
    torch::Tensor h = Apply(0, in_->forward(x));
    for (int b = 0; b < kBlocks; ++b) {
      torch::Tensor r = Apply(1 + 2 * b, fc_a_[b]->forward(h));
      h = Apply(2 + 2 * b, h + fc_b_[b]->forward(r));
    }
    return head_->forward(h);
  }
  torch::nn::Module& module() override { return holder_; }
  std::vector<torch::Tensor> hidden_weights() override {
    std::vector<torch::Tensor> out{in_->weight};
    for (int b = 0; b < kBlocks; ++b) {
      out.push_back(fc_a_[b]->weight);
      out.push_back(fc_b_[b]->weight);
    }
    return out;
  }
  std::vector<torch::Tensor> hidden_biases() override {
    std::vector<torch::Tensor> out{in_->bias};
    for (int b = 0; b < kBlocks; ++b) {
      out.push_back(fc_a_[b]->bias);
      out.push_back(fc_b_[b]->bias);
    }
    return out;
  }

 private:
  static constexpr int kWidth = 64;
  static constexpr int kBlocks = 2;
  torch::nn::Module holder_;
  torch::nn::Linear in_{nullptr}, head_{nullptr};
  std::vector<torch::nn::Linear> fc_a_, fc_b_;
};

}  // namespace

const char* ArchName(Arch a) {
  switch (a) {
    case Arch::kMlpRelu:
      return "mlp_relu";
    case Arch::kMlpTanh:
      return "mlp_tanh";
    case Arch::kCnn:
      return "cnn";
    case Arch::kResNet:
      return "resnet";
    case Arch::kDeepSigmoid:
      return "deep_sigmoid";
    case Arch::kWideMlp:
      return "wide_mlp";
  }
  return "?";
}

torch::Tensor Net::Apply(std::size_t index, const torch::Tensor& z) {
  Tap& t = taps_[index];
  torch::Tensor out = t.kind == Nonlinearity::kRelu   ? torch::relu(z)
                      : t.kind == Nonlinearity::kTanh ? torch::tanh(z)
                                                      : torch::sigmoid(z);
  t.input = z.detach();
  t.output = out.detach();
  return out;
}

std::unique_ptr<Net> MakeNet(Arch arch, Init init) {
  switch (arch) {
    case Arch::kMlpRelu:
      return std::make_unique<Mlp>(Nonlinearity::kRelu, std::vector<int>{128, 64}, init, false);
    case Arch::kMlpTanh:
      return std::make_unique<Mlp>(Nonlinearity::kTanh, std::vector<int>{64, 64}, init, false);
    case Arch::kCnn:
      return std::make_unique<Cnn>(init);
    case Arch::kResNet:
      return std::make_unique<ResNet>(init);
    case Arch::kDeepSigmoid:
      return std::make_unique<Mlp>(Nonlinearity::kSigmoid, std::vector<int>(10, 32), init, true);
    case Arch::kWideMlp:
      return std::make_unique<Mlp>(Nonlinearity::kRelu, std::vector<int>{256, 256}, init, false);
  }
  return nullptr;
}

}  // namespace tstat::detection
