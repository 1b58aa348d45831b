// The benchmark CNN and its training step (see overhead_model.h).
#include "benchmarks/overhead_model.h"

#include <string>

namespace tstat::bench {

namespace nn = torch::nn;

ResidualBlockImpl::ResidualBlockImpl(int64_t in_channels, int64_t out_channels, int64_t stride) {
  conv1 = register_module(
      "conv1", nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 3).stride(stride).padding(1).bias(false)));
  bn1 = register_module("bn1", nn::BatchNorm2d(out_channels));
  conv2 = register_module(
      "conv2", nn::Conv2d(nn::Conv2dOptions(out_channels, out_channels, 3).padding(1).bias(false)));
  bn2 = register_module("bn2", nn::BatchNorm2d(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    shortcut = register_module(
        "shortcut", nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 1).stride(stride).bias(false)));
  }
}

torch::Tensor ResidualBlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = torch::relu(bn1(conv1(x)));
  h = bn2(conv2(h));
  return torch::relu(h + (shortcut ? shortcut(x) : x));
}

OverheadNetImpl::OverheadNetImpl() {
  // 32x32x16 -> 32x32x16 -> 16x16x32 -> 16x16x32 -> 8x8x64 -> 8x8x64.
  stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)));
  const int64_t shapes[][3] = {{16, 16, 1}, {16, 32, 2}, {32, 32, 1}, {32, 64, 2}, {64, 64, 1}};
  for (const auto& s : shapes) {
    blocks.push_back(register_module("block" + std::to_string(blocks.size() + 1),
                                     ResidualBlock(s[0], s[1], s[2])));
  }
  head = register_module("head", nn::Linear(64, kOverheadClasses));
}

OverheadCapture::OverheadCapture(Session* s, const OverheadNet& net) : session(s) {
  stem = std::make_unique<torch_adapter::ModuleCapture>(s, "stem", torch_adapter::ModuleCapture::kOutputs);
  // Outputs of every block; a block's input is the previous block's output
  // (the same tensor), so only block1's input is captured.
  for (std::size_t i = 0; i < net->blocks.size(); ++i) {
    blocks.push_back(std::make_unique<torch_adapter::ModuleCapture>(
        s, "block" + std::to_string(i + 1),
        i == 0 ? torch_adapter::ModuleCapture::kInputsAndOutputs
               : torch_adapter::ModuleCapture::kOutputs));
  }
  classes = std::make_unique<torch_adapter::ClassificationCapture>(s);
}

SyntheticBatch MakeSyntheticBatch(int64_t batch, std::uint64_t seed) {
  torch::manual_seed(seed);
  SyntheticBatch b;
  b.labels = torch::randint(0, kOverheadClasses, {batch}, torch::kLong);
  const torch::Tensor patterns = torch::randn({kOverheadClasses, 3, 32, 32});
  b.images = torch::randn({batch, 3, 32, 32}) + patterns.index_select(0, b.labels);
  return b;
}

Status TrainStep(OverheadNet& net, torch::optim::Optimizer& optimizer,
                         const SyntheticBatch& batch, OverheadCapture* capture) {
  if (capture != nullptr) TSTAT_RETURN_IF_ERROR(capture->session->BeginStep());
  optimizer.zero_grad();
  torch::Tensor h = capture ? capture->stem->Forward(net->stem, batch.images)
                            : net->stem->forward(batch.images);
  h = torch::relu(h);
  for (std::size_t i = 0; i < net->blocks.size(); ++i) {
    h = capture ? capture->blocks[i]->Forward(net->blocks[i], h) : net->blocks[i]->forward(h);
  }
  const torch::Tensor logits = net->head(h.mean({2, 3}));
  const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, batch.labels);
  loss.backward();
  optimizer.step();
  if (capture == nullptr) return Status::OK();
  TSTAT_RETURN_IF_ERROR(capture->classes->Capture(batch.labels, logits));
  TSTAT_RETURN_IF_ERROR(torch_adapter::SaveLoss(*capture->session, "loss", loss));
  TSTAT_RETURN_IF_ERROR(torch_adapter::EndStep(*capture->session));
  return Status::OK();
}

}  // namespace tstat::bench
