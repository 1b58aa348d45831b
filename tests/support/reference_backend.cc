// The reference as a Backend (reference_backend.h).
#include "tests/support/reference_backend.h"

#include <cmath>
#include <string>

#include "tests/support/reference.h"

namespace tstat::testing {
namespace {

Status Bad(const std::string& message) { return Status::InvalidArgument(message); }

class ReferenceBackend : public Backend {
 public:
  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string description() const override { return "reference (cpu, serial long double)"; }
  Status Reduce(const std::vector<ReductionRequest>& requests,
                std::vector<ReductionResult>* results, CUstream_st* /*stream*/) override {
    results->clear();
    results->resize(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const Status s = ReferenceValidate(requests[i]);
      if (!s.ok()) {
        (*results)[i].status = s;
        continue;
      }
      (*results)[i] = ReferenceReduce(requests[i]);
    }
    return Status::OK();
  }
};

}  // namespace

Status ReferenceValidate(const ReductionRequest& request) {
  const TensorView& t = request.tensor;
  const StatsOptions& o = request.options;
  if (!IsValidDType(t.dtype)) return Bad("tensor.dtype is not a DType");
  if (t.numel < 0) return Bad("tensor.numel is negative");
  if (t.numel > 0 && t.data == nullptr) return Bad("tensor.data is null with numel > 0");
  if (!t.shape.empty()) {
    std::int64_t product = 1;
    for (std::int64_t d : t.shape) {
      if (d < 0) return Bad("tensor.shape has a negative dimension");
      product *= d;
    }
    if (product != t.numel) return Bad("tensor.shape does not multiply to numel");
  }
  if (t.space != MemorySpace::kHost) return Bad("tensor.space must be host");
  if (o.label_classes < 0 || o.label_classes > (1 << 24)) {
    return Bad("options.label_classes out of range");
  }
  if (o.label_classes > 0) {
    if (!IsIntegerDType(t.dtype)) return Bad("options.label_classes needs an integer dtype");
    if (o.per_channel_axis >= 0 || o.linear_histogram.bins != 0) {
      return Bad("options.label_classes excludes per-channel and linear histograms");
    }
  }
  if (std::isnan(o.band_lo)) return Bad("options.band_lo is NaN");
  if (std::isnan(o.band_hi)) return Bad("options.band_hi is NaN");
  if (!(o.small_eps >= 0)) return Bad("options.small_eps must be >= 0");
  const LinearHistogramOptions& h = o.linear_histogram;
  if (h.bins < 0 || h.bins > kMaxLinearBins) return Bad("options.linear_histogram.bins out of range");
  if (h.fixed_range) {
    if (h.bins == 0) return Bad("options.linear_histogram.bins is 0 with fixed_range");
    if (!std::isfinite(h.lo)) return Bad("options.linear_histogram.lo is not finite");
    if (!std::isfinite(h.hi)) return Bad("options.linear_histogram.hi is not finite");
    if (!(h.lo < h.hi)) return Bad("options.linear_histogram.lo must be < hi");
  }
  const int rank = t.shape.empty() ? 1 : static_cast<int>(t.shape.size());
  if (o.per_channel_axis < -1 || o.per_channel_axis >= rank) {
    return Bad("options.per_channel_axis out of range");
  }
  if (o.sample_count < 0 || o.sample_count > (std::int64_t{1} << 24)) {
    return Bad("options.sample_count out of range");
  }
  return Status::OK();
}

std::unique_ptr<Backend> CreateReferenceBackend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace tstat::testing
