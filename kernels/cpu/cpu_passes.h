// The CPU backend's passes besides the stat-set batch: the stat set with
// per-channel stats, linear histogram (second pass), label counts, element
// sample, delta, confusion matrix, value counts. Each takes a request that
// passed CheckRequest and uses at most `workers` threads; results are
// independent of the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "tstat/engine.h"

namespace tstat::kernels::cpu {

struct TileKernels;  // cpu_tile_types.h

// Whether ComputeStatsAndPerChannel serves `r`: per-channel stats, not
// label counts.
bool ReducesWithPerChannel(const ReductionRequest& r);
// The stat set, the exponent histogram (when asked) and the per-channel stats
// of such a request in one read, by the stat-set tile kernels `tiles`.
void ComputeStatsAndPerChannel(const ReductionRequest& r, int workers, const TileKernels& tiles,
                               ReductionResult* out);
// `stats` (the tensor's stat set) supplies the automatic range.
void ComputeLinearHistogram(const ReductionRequest& r, const TensorStats& stats, int workers,
                            LinearHistogram* out);
void ComputeLabelCounts(const ReductionRequest& r, int workers, LabelCounts* out);
void ComputeSample(const ReductionRequest& r, ElementSample* out);
// Auxiliary passes (cpu_delta.cc, cpu_confusion.cc, cpu_value_counts.cc):
// delta against options.delta.previous, confusion matrix against
// options.confusion.predictions, counts of options.count_values.
void ComputeDelta(const ReductionRequest& r, int workers, const TileKernels& tiles,
                  DeltaStats* out);
void ComputeConfusion(const ReductionRequest& r, int workers, ConfusionMatrix* out);
void ComputeValueCounts(const ReductionRequest& r, int workers, std::vector<std::uint64_t>* out);

// Below this many elements a pass runs on the calling thread: a parallel
// region costs more than it saves.
inline constexpr std::int64_t kParallelMinElems = 1 << 16;

}  // namespace tstat::kernels::cpu
