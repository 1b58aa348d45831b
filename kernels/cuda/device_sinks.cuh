// Device-side bin sinks for the per-thread bodies of kernels/plan/cuda_thread_work.h
// and the block helpers around them: shared-memory uint32 bins with integer
// atomics, global uint64 bins with integer atomics, and the block-cooperative
// zero/flush of shared bins (only non-zero bins touch global memory). No float
// atomics anywhere. Device code only; the callers __syncthreads() between
// zeroing, counting and flushing.
#pragma once

#include <cstdint>

namespace tstat::kernels {

struct SharedBins {
  unsigned int* bins;
  __device__ __forceinline__ void Add(int b) { atomicAdd(bins + b, 1u); }
};

struct GlobalBins {
  unsigned long long* counts;
  __device__ __forceinline__ void Add(int b) { atomicAdd(counts + b, 1ull); }
};

__device__ __forceinline__ void ZeroSharedBins(unsigned int* bins, int n) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) bins[i] = 0;
}

__device__ __forceinline__ void FlushSharedBins(const unsigned int* bins, int n,
                                                unsigned long long* counts) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
    const unsigned int c = bins[i];
    if (c != 0) atomicAdd(counts + i, static_cast<unsigned long long>(c));
  }
}

}  // namespace tstat::kernels
