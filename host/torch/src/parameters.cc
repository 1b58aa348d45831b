// RegisterParameters: a module's parameters and their (lazy, moving) gradients.
#include <memory>
#include <string>

#include "host/torch/src/capture_view.h"
#include "tstat_torch/adapter.h"

namespace tstat::torch_adapter {
namespace {

bool IsBias(const std::string& name) {
  const std::size_t dot = name.rfind('.');
  const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
  return last.find("bias") != std::string::npos;
}

// dtype/space/device of the registration (data comes from the callback).
Result<TensorView> RegistrationView(const torch::Tensor& p) {
  torch::Tensor keep;
  TensorView v;
  TSTAT_RETURN_IF_ERROR(internal::CaptureView(p, &keep, &v));
  v.data = nullptr;
  return v;
}

}  // namespace

Result<std::vector<std::uint32_t>> RegisterParameters(Session& session,
                                                      const torch::nn::Module& module,
                                                      const ParameterOptions& options) {
  std::vector<std::uint32_t> ids;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const std::string name = options.prefix + item.key();
    // A shallow copy shares the parameter's TensorImpl: set_data() and
    // module.to() are seen by the callbacks, and .grad() is the live gradient.
    const torch::Tensor param = item.value();
    Result<TensorView> view = RegistrationView(param);
    if (!view.ok()) return view.status().WithContext("parameter \"" + name + "\"");

    TensorSpec spec(name, view.value(), {IsBias(item.key()) ? "biases" : "weights"});
    auto keep = std::make_shared<torch::Tensor>();
    spec.view_fn = [param, keep](TensorView* v) {
      // A frozen parameter (requires_grad false) is skipped while frozen:
      // nothing trains it, and its update of 0 is no fault of training.
      if (!param.requires_grad()) return internal::CaptureView(torch::Tensor(), keep.get(), v);
      return internal::CaptureView(param, keep.get(), v);
    };
    Result<std::uint32_t> id = session.RegisterTensor(spec);
    if (!id.ok()) return id.status();
    ids.push_back(id.value());

    if (!options.gradients || !param.requires_grad()) continue;
    TensorSpec grad_spec("gradient/" + name, view.value(), {"gradients"});
    auto grad_keep = std::make_shared<torch::Tensor>();
    grad_spec.view_fn = [param, grad_keep](TensorView* v) {
      // Undefined before the first backward (and after zero_grad(set_to_none)).
      return internal::CaptureView(param.grad(), grad_keep.get(), v);
    };
    Result<std::uint32_t> grad_id = session.RegisterTensor(grad_spec);
    if (!grad_id.ok()) return grad_id.status();
    ids.push_back(grad_id.value());
  }
  return ids;
}

}  // namespace tstat::torch_adapter
