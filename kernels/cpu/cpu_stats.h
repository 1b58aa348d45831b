// The CPU stat-set pass over a whole batch in one OpenMP parallel region.
#pragma once

#include <vector>

#include "tstat/engine.h"

namespace tstat::kernels::cpu {

// One tensor whose stat set (and exponent histogram) is wanted.
struct StatsJob {
  const ReductionRequest* request;
  ReductionResult* result;  // stats and exponent_histogram are filled
};

struct TileKernels;

// Reduces every job with the tile kernels `kern` on `workers` threads, which
// fix the partition (and thus the merge order): results are bitwise identical
// for the same `workers` and kernels, whatever OpenMP does.
void ReduceStatsBatch(const std::vector<StatsJob>& jobs, int workers, const TileKernels& kern);

}  // namespace tstat::kernels::cpu
