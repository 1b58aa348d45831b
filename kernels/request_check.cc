#include "kernels/request_check.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tstat::kernels {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

Status Invalid(const std::string& what) { return Status::InvalidArgument(what); }

// Whether [a, a + n) and [b, b + n) share a byte.
bool Overlap(const void* a, const void* b, std::size_t n) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + n && y < x + n;
}

// options.delta: floating tensors only; tolerances finite and >= 0; `next`
// on the CPU, with previous, previous itself or apart from both.
Status CheckDelta(const TensorView& t, const DeltaOptions& d, BackendKind backend) {
  if (d.previous == nullptr) {
    if (d.next != nullptr) return Invalid("options.delta.next needs options.delta.previous");
    return Status::OK();  // off
  }
  if (d.next != nullptr) {
    if (backend != BackendKind::kCpu) {
      return Status::NotSupported(
          "options.delta.next: only the CPU backend copies a tensor in its delta pass");
    }
    const std::size_t bytes = static_cast<std::size_t>(t.numel) * DTypeSize(t.dtype);
    if (d.next != d.previous &&
        (Overlap(d.next, d.previous, bytes) || Overlap(d.next, t.data, bytes))) {
      return Invalid(
          "options.delta.next overlaps the tensor or options.delta.previous "
          "(it must be previous itself or apart from both)");
    }
  }
  if (!IsFloatingDType(t.dtype)) {
    return Invalid(std::string("options.delta.previous needs a floating tensor (f32, f16, bf16, "
                               "f64, f8e4m3, f8e5m2), got ") +
                   DTypeName(t.dtype));
  }
  if (!std::isfinite(d.atol) || d.atol < 0.0) {
    return Invalid("options.delta.atol must be finite and >= 0 (got " + Num(d.atol) + ")");
  }
  if (!std::isfinite(d.rtol) || d.rtol < 0.0) {
    return Invalid("options.delta.rtol must be finite and >= 0 (got " + Num(d.rtol) + ")");
  }
  return Status::OK();
}

// options.confusion: needs label counts; integer predictions, or floating
// logits [numel, label_classes] with argmax.
Status CheckConfusion(const TensorView& t, const StatsOptions& o) {
  const ConfusionOptions& c = o.confusion;
  if (c.predictions == nullptr) return Status::OK();  // off
  if (o.label_classes <= 0) {
    return Invalid("options.confusion.predictions needs options.label_classes > 0");
  }
  if (o.label_classes > kMaxConfusionClasses) {
    return Invalid("options.label_classes " + std::to_string(o.label_classes) + " exceeds " +
                   std::to_string(kMaxConfusionClasses) +
                   ", the most classes options.confusion.predictions supports");
  }
  if (!IsValidDType(c.predictions_dtype)) {
    return Invalid("options.confusion.predictions_dtype has unsupported value " +
                   std::to_string(static_cast<int>(c.predictions_dtype)));
  }
  if (c.argmax && !IsFloatingDType(c.predictions_dtype)) {
    return Invalid(std::string("options.confusion.predictions_dtype must be floating with argmax "
                               "(logits), got ") +
                   DTypeName(c.predictions_dtype));
  }
  if (!c.argmax && !IsIntegerDType(c.predictions_dtype)) {
    return Invalid(std::string("options.confusion.predictions_dtype must be an integer type "
                               "(i32, i64, u8) without argmax, got ") +
                   DTypeName(c.predictions_dtype));
  }
  if (c.argmax && t.numel > kMaxNumel / o.label_classes) {
    return Invalid("options.confusion.predictions: logits of " + std::to_string(t.numel) + " x " +
                   std::to_string(o.label_classes) + " elements exceed the limit 2^50");
  }
  return Status::OK();
}

// options.count_values: at most kMaxCountValues values, integer tensors only.
Status CheckCountValues(const TensorView& t, const StatsOptions& o) {
  if (o.count_values.empty()) return Status::OK();
  if (o.count_values.size() > static_cast<std::size_t>(kMaxCountValues)) {
    return Invalid("options.count_values has " + std::to_string(o.count_values.size()) +
                   " values, more than " + std::to_string(kMaxCountValues));
  }
  if (!IsIntegerDType(t.dtype)) {
    return Invalid(
        std::string("options.count_values needs an integer tensor (i32, i64, u8), got ") +
        DTypeName(t.dtype));
  }
  return Status::OK();
}

}  // namespace

Status CheckRequest(const ReductionRequest& r, BackendKind backend) {
  const TensorView& t = r.tensor;
  const StatsOptions& o = r.options;
  if (!IsValidDType(t.dtype)) {
    return Invalid("tensor.dtype has unsupported value " +
                   std::to_string(static_cast<int>(t.dtype)));
  }
  if (t.numel < 0) return Invalid("tensor.numel is negative (" + std::to_string(t.numel) + ")");
  if (t.numel > kMaxNumel) {
    return Invalid("tensor.numel " + std::to_string(t.numel) + " exceeds the limit 2^50");
  }
  if (t.numel > 0 && t.data == nullptr) {
    return Invalid("tensor.data is null but numel is " + std::to_string(t.numel));
  }
  if (!t.shape.empty()) {
    if (t.shape.size() > 16) return Invalid("tensor.shape has more than 16 dimensions");
    std::int64_t prod = 1;
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (t.shape[i] < 0) {
        return Invalid("tensor.shape[" + std::to_string(i) + "] is negative (" +
                       std::to_string(t.shape[i]) + ")");
      }
      if (t.shape[i] != 0 && prod > kMaxNumel / t.shape[i]) {
        return Invalid("tensor.shape product exceeds the limit 2^50");
      }
      prod *= t.shape[i];
    }
    if (prod != t.numel) {
      return Invalid("tensor.shape product " + std::to_string(prod) + " differs from numel " +
                     std::to_string(t.numel));
    }
  }
  const bool want_space_host = backend == BackendKind::kCpu;
  if (want_space_host && t.space != MemorySpace::kHost) {
    return Invalid("tensor.space is cuda but this is the CPU backend");
  }
  if (!want_space_host && t.space != MemorySpace::kCuda) {
    return Invalid("tensor.space is host but this is the CUDA backend");
  }

  if (o.label_classes < 0 || o.label_classes > kMaxLabelClasses) {
    return Invalid("options.label_classes " + std::to_string(o.label_classes) +
                   " is outside [0, 2^24]");
  }
  if (o.label_classes > 0) {
    if (!IsIntegerDType(t.dtype)) {
      return Invalid(
          std::string("options.label_classes needs an integer tensor (i32, i64, u8), got ") +
          DTypeName(t.dtype));
    }
    // Label counts come with the stat set, not with per-channel or linear
    // histogram statistics.
    if (o.per_channel_axis >= 0 || o.linear_histogram.bins != 0) {
      return Invalid(
          "options.label_classes cannot be combined with per_channel_axis or "
          "linear_histogram");
    }
  }
  if (std::isnan(o.band_lo) || std::isnan(o.band_hi)) {
    return Invalid("options.band_lo/band_hi must not be NaN");
  }
  if (!(o.small_eps >= 0.0)) {
    return Invalid("options.small_eps must be >= 0 (got " + Num(o.small_eps) + ")");
  }
  const LinearHistogramOptions& h = o.linear_histogram;
  if (h.bins < 0 || h.bins > kMaxLinearBins) {
    return Invalid("options.linear_histogram.bins " + std::to_string(h.bins) + " is outside [0, " +
                   std::to_string(kMaxLinearBins) + "]");
  }
  if (h.fixed_range) {
    if (h.bins == 0) {
      return Invalid("options.linear_histogram.bins is 0 but fixed_range is set");
    }
    if (!std::isfinite(h.lo) || !std::isfinite(h.hi)) {
      return Invalid("options.linear_histogram.lo/hi must be finite (got " + Num(h.lo) + ", " +
                     Num(h.hi) + ")");
    }
    if (!(h.lo < h.hi)) {
      return Invalid("options.linear_histogram.lo (" + Num(h.lo) + ") must be < hi (" + Num(h.hi) +
                     ")");
    }
  }
  if (o.per_channel_axis < -1) {
    return Invalid("options.per_channel_axis " + std::to_string(o.per_channel_axis) +
                   " is negative (use -1 for off)");
  }
  if (o.per_channel_axis >= 0) {
    const int rank = t.shape.empty() ? 1 : static_cast<int>(t.shape.size());
    if (o.per_channel_axis >= rank) {
      return Invalid("options.per_channel_axis " + std::to_string(o.per_channel_axis) +
                     " is out of range for a tensor of rank " + std::to_string(rank));
    }
  }
  if (o.sample_count < 0 || o.sample_count > kMaxSampleCount) {
    return Invalid("options.sample_count " + std::to_string(o.sample_count) +
                   " is outside [0, 2^24]");
  }
  TSTAT_RETURN_IF_ERROR(CheckDelta(t, o.delta, backend));
  TSTAT_RETURN_IF_ERROR(CheckConfusion(t, o));
  TSTAT_RETURN_IF_ERROR(CheckCountValues(t, o));
  return Status::OK();
}

void ChannelDims(const TensorView& t, int axis, std::int64_t* outer, std::int64_t* channels,
                 std::int64_t* inner) {
  if (t.shape.empty()) {
    *outer = 1;
    *channels = t.numel;
    *inner = 1;
    return;
  }
  std::int64_t o = 1, i = 1;
  for (int d = 0; d < axis; ++d) o *= t.shape[d];
  for (std::size_t d = axis + 1; d < t.shape.size(); ++d) i *= t.shape[d];
  *outer = o;
  *channels = t.shape[axis];
  *inner = i;
}

}  // namespace tstat::kernels
