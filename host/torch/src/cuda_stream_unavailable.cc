// CurrentCudaStream for LibTorch builds without CUDA (Debian's libtorch-dev):
// no tensor can live on a GPU, so there is no stream to pass.
#include "tstat_torch/adapter.h"

namespace tstat::torch_adapter {

CUstream_st* CurrentCudaStream(const torch::Device& /*device*/) { return nullptr; }

}  // namespace tstat::torch_adapter
