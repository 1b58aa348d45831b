// The reduction engine: many tensors in, their statistics out, in one call.
//
// A Backend reduces a batch of tensors. The CPU backend (OpenMP) runs the
// stat set of the whole batch in one parallel region; the CUDA backend runs it
// as one kernel launch over a work table of all tensors, plus a fixed number
// of small launches for the optional passes (merge, linear histogram,
// per-channel, labels, sample, delta, confusion, value counts: at most 9 per
// batch, whatever the number of tensors), stream-ordered on the caller's
// stream.
//
// Errors: a request that is invalid (null data, bad axis, zero bins, ...) gets
// its own non-OK ReductionResult::status naming the argument, and the other
// requests of the batch still run. A failure of the backend itself (a CUDA
// error) is returned by Reduce()/Enqueue() and affects the whole batch.
//
// Thread safety: a Backend instance is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tstat/export.h"
#include "tstat/stats.h"
#include "tstat/status.h"
#include "tstat/tensor_view.h"

struct CUstream_st;  // cudaStream_t without including cuda_runtime.h

namespace tstat {

struct ReductionRequest {
  TensorView tensor;
  StatsOptions options;
};

struct ReductionResult {
  Status status;                       // per-request validation result
  TensorStats stats;                   // not filled when label_classes > 0
  std::optional<ExponentHistogram> exponent_histogram;
  std::optional<LinearHistogram> linear_histogram;
  std::optional<PerChannelStats> per_channel;
  std::optional<LabelCounts> label_counts;
  std::optional<ElementSample> sample;
  std::optional<DeltaStats> delta;            // when options.delta.previous is set
  std::optional<ConfusionMatrix> confusion;   // when options.confusion.predictions is set
  std::vector<std::uint64_t> value_counts;    // one per options.count_values
};

enum class BackendKind : std::uint8_t { kCpu = 0, kCuda = 1 };

class TSTAT_EXPORT Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;
  // Human-readable: "cpu (2 threads)", "cuda (NVIDIA H100, sm_90)".
  virtual std::string description() const = 0;

  // Reduces every request and waits for the results. `results` is resized to
  // requests.size(). Host tensors only on the CPU backend; CUDA tensors only on
  // the CUDA backend (a mismatched request gets kInvalidArgument).
  virtual Status Reduce(const std::vector<ReductionRequest>& requests,
                        std::vector<ReductionResult>* results,
                        CUstream_st* stream = nullptr) = 0;
};

// Vector instruction set of the CPU backend's stat-set kernels.
enum class CpuIsa : std::uint8_t { kAuto = 0, kAvx512 = 1, kAvx2 = 2, kBaseline = 3 };

struct CpuBackendOptions {
  int threads = 0;  // 0: DefaultCpuThreads()
  // kAuto: the widest the CPU supports. A requested set the CPU lacks falls back
  // to the widest supported one; description() names the one that runs. All
  // sets give identical counts and histograms (moments agree within 1e-7).
  CpuIsa isa = CpuIsa::kAuto;
};

// The CPU backend's thread count when none is configured: the first value of
// OMP_NUM_THREADS if it is set, otherwise every processor this process may
// run on. Deliberately not the calling thread's omp_set_num_threads value:
// frameworks set that for their own pools (LibTorch sets 1 on a machine it
// thinks has one core), which would make every capture single-threaded.
TSTAT_EXPORT int DefaultCpuThreads();

// Always available.
TSTAT_EXPORT std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options = {});

// kNotSupported when tstat was built without CUDA, kUnavailable when no CUDA
// device is present.
TSTAT_EXPORT Result<std::unique_ptr<Backend>> CreateCudaBackend(int device = 0);

// True when this build contains the CUDA backend.
TSTAT_EXPORT bool BuiltWithCuda();
// Number of usable CUDA devices (0 without CUDA or without a device).
TSTAT_EXPORT int CudaDeviceCount();

// Library version, "MAJOR.MINOR.PATCH".
TSTAT_EXPORT const char* Version();

}  // namespace tstat
