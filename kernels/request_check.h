// Validation of one ReductionRequest, shared by every backend so that bad
// input gets the same clear error (naming the argument) everywhere.
#pragma once

#include <cstdint>

#include "tstat/engine.h"

namespace tstat::kernels {

inline constexpr int kMaxLabelClasses = 1 << 24;
inline constexpr std::int64_t kMaxSampleCount = 1 << 24;
inline constexpr std::int64_t kMaxNumel = std::int64_t{1} << 50;
// A confusion matrix has label_classes^2 cells (uint64 counters): at most
// 2048 classes (32 MiB), so one request cannot exhaust device memory.
inline constexpr int kMaxConfusionClasses = 2048;

// OK, or kInvalidArgument / kNotSupported with a message that names the field.
// `backend` decides which memory space is accepted.
Status CheckRequest(const ReductionRequest& request, BackendKind backend);

// [outer, C, inner] of the tensor for its per-channel axis (request must have
// passed CheckRequest with per_channel_axis >= 0).
void ChannelDims(const TensorView& t, int axis, std::int64_t* outer, std::int64_t* channels,
                 std::int64_t* inner);

}  // namespace tstat::kernels
