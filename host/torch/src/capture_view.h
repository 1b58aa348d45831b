// The view a capture callback hands to the session: the tensor itself when it
// is contiguous, else a contiguous copy kept alive in `*keep` until the next
// capture of the same tensor (EndStep has finished reading it by then).
#pragma once

#include "tstat_torch/adapter.h"

namespace tstat::torch_adapter::internal {

inline Status CaptureView(const torch::Tensor& t, torch::Tensor* keep, TensorView* out) {
  if (!t.defined()) {
    *keep = torch::Tensor();
    out->data = nullptr;  // not allocated at this step: skipped
    return Status::OK();
  }
  const bool copy = t.layout() == torch::kStrided && !t.is_contiguous();
  *keep = copy ? t.contiguous() : torch::Tensor();
  Result<TensorView> v = ViewOf(copy ? *keep : t);
  if (!v.ok()) return v.status();
  *out = std::move(v).value();
  return Status::OK();
}

}  // namespace tstat::torch_adapter::internal
