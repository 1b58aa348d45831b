// torch::Tensor -> tstat::TensorView, and the current CUDA stream helpers
// that do not need CUDA headers.
#include <string>

#include "tstat_torch/adapter.h"

namespace tstat::torch_adapter {

Result<DType> ToDType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Double: return DType::kFloat64;
    case c10::ScalarType::Int: return DType::kInt32;
    case c10::ScalarType::Long: return DType::kInt64;
    case c10::ScalarType::Byte: return DType::kUInt8;
    default: break;
  }
  return Status::NotSupported(std::string("torch dtype ") + c10::toString(type) +
                              " is not supported (float32, float16, bfloat16, float64, int32, "
                              "int64, uint8 are)");
}

Result<TensorView> ViewOf(const torch::Tensor& t) {
  if (!t.defined()) return Status::InvalidArgument("undefined torch tensor");
  if (t.layout() != torch::kStrided) {
    return Status::NotSupported("torch tensor with a non-strided layout (sparse or mkldnn): "
                                "call .to_dense() first");
  }
  TensorView v;
  const torch::Device device = t.device();
  if (device.is_cpu()) {
    v.space = MemorySpace::kHost;
  } else if (device.is_cuda()) {
    v.space = MemorySpace::kCuda;
    v.device = device.has_index() ? device.index() : 0;
  } else {
    return Status::NotSupported("torch tensor on device " + device.str() +
                                " (CPU and CUDA tensors are supported)");
  }
  Result<DType> dtype = ToDType(t.scalar_type());
  if (!dtype.ok()) return dtype.status();
  if (!t.is_contiguous()) {
    return Status::InvalidArgument("torch tensor is not contiguous: call .contiguous() first");
  }
  v.dtype = dtype.value();
  v.data = t.numel() > 0 ? t.data_ptr() : nullptr;
  v.shape.assign(t.sizes().begin(), t.sizes().end());
  v.numel = t.numel();
  return v;
}

Status EndStep(Session& session, const torch::Device& device) {
  return session.EndStep(CurrentCudaStream(device));
}

Status SaveLoss(Session& session, const std::string& name, const torch::Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1) {
    return Status::InvalidArgument("loss \"" + name + "\" must have exactly one element, has " +
                                   (loss.defined() ? std::to_string(loss.numel()) : "none"));
  }
  return session.SaveScalar(name, loss.detach().item<double>());
}

}  // namespace tstat::torch_adapter
