// The CPU backend's passes besides the stat set: per-channel stats, linear
// histogram (second pass), label counts, element sample. Each takes a request
// that passed CheckRequest and uses at most `workers` threads; results are
// independent of the thread count.
#pragma once

#include "tstat/engine.h"

namespace tstat::kernels::cpu {

void ComputePerChannel(const ReductionRequest& r, int workers, PerChannelStats* out);
// `stats` (the tensor's stat set) supplies the automatic range.
void ComputeLinearHistogram(const ReductionRequest& r, const TensorStats& stats, int workers,
                            LinearHistogram* out);
void ComputeLabelCounts(const ReductionRequest& r, int workers, LabelCounts* out);
void ComputeSample(const ReductionRequest& r, ElementSample* out);

// Below this many elements a pass runs on the calling thread: a parallel
// region costs more than it saves.
inline constexpr std::int64_t kParallelMinElems = 1 << 16;

}  // namespace tstat::kernels::cpu
