// Host entry points of the batch kernels. Each Launch* enqueues one kernel on
// `stream` (nothing when its grid would be empty), checks the launch
// (TSTAT_CUDA_CHECK_LAUNCH) and returns without waiting. All take the batch's
// device tables and arrays as one BatchPointers value (a kernel parameter, so
// no extra copy). Stream-ordered; thread-safe as far as the CUDA runtime is.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/aux_ops.h"
#include "kernels/plan/launch_tables.h"
#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"
#include "tstat/status.h"

namespace tstat::kernels {

// Device addresses of one batch's tables (inputs) and arrays (scratch/outputs).
struct BatchPointers {
  const DeviceRequest* requests;
  const WorkItem* stats_items;
  const WorkItem* linear_items;
  const WorkItem* label_items;
  const ChannelItem* channel_items;
  const MergeJob* merge_jobs;
  const SampleJob* sample_jobs;
  const WorkItem* delta_items;
  const WorkItem* confusion_items;
  const WorkItem* value_items;
  const ValueEntry* value_table;
  std::int64_t num_merge_jobs;
  std::int64_t merge_segments;
  std::int64_t num_sample_jobs;
  std::int64_t sample_total;
  StatsPartial* partials;
  StatsPartial* finals;
  double* samples;
  unsigned long long* counters;  // uint64 counters (unsigned long long for atomicAdd)
  DeltaPartial* delta_partials;
};

Status LaunchStatsKernel(const BatchPointers& batch, std::int64_t blocks, cudaStream_t stream);
Status LaunchChannelKernel(const BatchPointers& batch, std::int64_t blocks, cudaStream_t stream);
Status LaunchMergeKernel(const BatchPointers& batch, cudaStream_t stream);
Status LaunchLinearHistKernel(const BatchPointers& batch, std::int64_t blocks, int shared_bins,
                              cudaStream_t stream);
Status LaunchLabelKernel(const BatchPointers& batch, std::int64_t blocks, int shared_bins,
                         cudaStream_t stream);
Status LaunchSampleKernel(const BatchPointers& batch, cudaStream_t stream);
// aux_kernels.cu
Status LaunchDeltaKernel(const BatchPointers& batch, std::int64_t blocks, cudaStream_t stream);
Status LaunchConfusionKernel(const BatchPointers& batch, std::int64_t blocks, int shared_bins,
                             cudaStream_t stream);
Status LaunchValueCountKernel(const BatchPointers& batch, std::int64_t blocks, cudaStream_t stream);

}  // namespace tstat::kernels
