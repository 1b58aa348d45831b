// CUDA errors as tstat::Status. Every CUDA runtime call of the backend goes
// through TSTAT_CUDA_RETURN_IF_ERROR, every kernel launch is followed by
// TSTAT_CUDA_CHECK_LAUNCH (cudaPeekAtLastError; with the TSTAT_DEBUG_SYNC build
// option also a cudaStreamSynchronize, so an asynchronous fault is reported at
// the launch that caused it). Messages carry file:line, the failed call and
// cudaGetErrorString. Nothing here prints or aborts. Thread-safe (stateless).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "tstat/status.h"

#ifndef TSTAT_DEBUG_SYNC
#define TSTAT_DEBUG_SYNC 0
#endif

namespace tstat::kernels {

inline Status CudaErrorStatus(cudaError_t error, const char* what, const char* file, int line) {
  // A failed call is also the runtime's "last error": cleared here, or the next
  // launch check (cudaPeekAtLastError) would report this error as its own (a
  // failed workspace cudaMalloc made the next batch's kernels "fail").
  (void)cudaGetLastError();
  return Status::CudaError(std::string(file) + ":" + std::to_string(line) + ": " + what +
                           " failed: " + cudaGetErrorString(error) + " (" +
                           cudaGetErrorName(error) + ")");
}

// After a launch: the launch error, if any (cleared so that a non-sticky
// configuration error does not leak into the next batch); in debug-sync
// builds also the kernel's own execution error.
inline Status CheckLaunch(cudaStream_t stream, const char* kernel, const char* file, int line) {
  const cudaError_t launch = cudaPeekAtLastError();
  if (launch != cudaSuccess) {
    (void)cudaGetLastError();
    return CudaErrorStatus(launch, kernel, file, line);
  }
#if TSTAT_DEBUG_SYNC
  const cudaError_t run = cudaStreamSynchronize(stream);
  if (run != cudaSuccess) return CudaErrorStatus(run, kernel, file, line);
#else
  (void)stream;
#endif
  return Status::OK();
}

}  // namespace tstat::kernels

#define TSTAT_CUDA_RETURN_IF_ERROR(call)                                                      \
  do {                                                                                        \
    const cudaError_t tstat_cuda_error_ = (call);                                             \
    if (tstat_cuda_error_ != cudaSuccess) {                                                   \
      return ::tstat::kernels::CudaErrorStatus(tstat_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                                         \
  } while (0)

#define TSTAT_CUDA_CHECK_LAUNCH(stream, kernel) \
  TSTAT_RETURN_IF_ERROR(::tstat::kernels::CheckLaunch((stream), (kernel), __FILE__, __LINE__))
