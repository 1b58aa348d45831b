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

// Reduces every job. `workers` fixes the partition (and thus the merge order):
// results are bitwise identical for the same `workers`, whatever OpenMP does.
void ReduceStatsBatch(const std::vector<StatsJob>& jobs, int workers);

// Name of the vector ISA the tile kernels use on this CPU ("AVX-512", ...).
const char* TileIsaName();

}  // namespace tstat::kernels::cpu
