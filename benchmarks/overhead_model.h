// The CNN `tstat bench overhead` trains: ResNet-style blocks (two 3x3 convs
// with batch norm and an identity or 1x1-projection shortcut) on synthetic
// 32x32 RGB images, 10 classes, SGD. Sized so one training step takes tens of
// milliseconds on a 2-core CPU with OpenBLAS.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "tstat/session.h"
#include "tstat_torch/adapter.h"

namespace tstat::bench {

struct ResidualBlockImpl : torch::nn::Module {
  ResidualBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, shortcut{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
};
TORCH_MODULE(ResidualBlock);

struct OverheadNetImpl : torch::nn::Module {
  OverheadNetImpl();
  torch::nn::Conv2d stem{nullptr};
  std::vector<ResidualBlock> blocks;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(OverheadNet);

// The capture side of a training step: a module capture per block (inputs
// and outputs), the stem's output, labels and logits, and the loss.
struct OverheadCapture {
  OverheadCapture(Session* session, const OverheadNet& net);
  Session* session;
  std::unique_ptr<torch_adapter::ModuleCapture> stem;
  std::vector<std::unique_ptr<torch_adapter::ModuleCapture>> blocks;
  std::unique_ptr<torch_adapter::ClassificationCapture> classes;
};

// A fixed synthetic batch: images N(0, 1) plus a class-dependent pattern, so
// the loss goes down.
struct SyntheticBatch {
  torch::Tensor images;  // [batch, 3, 32, 32] float32
  torch::Tensor labels;  // [batch] int64
};
SyntheticBatch MakeSyntheticBatch(int64_t batch, std::uint64_t seed);

inline constexpr int kOverheadClasses = 10;

// One training step; with `capture` the tstat calls of a captured step
// (BeginStep, forward captures, SaveLoss, EndStep).
Status TrainStep(OverheadNet& net, torch::optim::Optimizer& optimizer,
                         const SyntheticBatch& batch, OverheadCapture* capture);

}  // namespace tstat::bench
