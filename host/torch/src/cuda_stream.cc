// CurrentCudaStream for LibTorch builds with CUDA (TSTAT_TORCH_HAVE_CUDA).
#include <c10/cuda/CUDAStream.h>

#include "tstat_torch/adapter.h"

namespace tstat::torch_adapter {

CUstream_st* CurrentCudaStream(const torch::Device& device) {
  if (!device.is_cuda()) return nullptr;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  return c10::cuda::getCurrentCUDAStream(index).stream();
}

}  // namespace tstat::torch_adapter
