// RunCudaCaptureCase (capture_cuda_bench.h): a session over K device tensors;
// EndStep timed on the host with an idle GPU and behind a long kernel.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/bench_temp_dir.h"
#include "benchmarks/bench_timing.h"
#include "benchmarks/capture_cuda_bench.h"
#include "benchmarks/cuda_bench_common.cuh"
#include "tstat/engine.h"
#include "tstat/session.h"

namespace tstat::bench {
namespace {

// Deterministic values in [-0.5, 0.5): a multiplicative hash of the index.
__global__ void FillKernel(float* out, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const unsigned int h = static_cast<unsigned int>(i) * 2654435761u;
    out[i] = static_cast<float>(h >> 8) * (1.0f / 16777216.0f) - 0.5f;
  }
}

// One thread that spins for `ns` nanoseconds of the GPU's global timer.
__global__ void SpinKernel(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

}  // namespace

Result<CudaCaptureBenchResult> RunCudaCaptureCase(const CudaCaptureBenchOptions& o) {
  TSTAT_RETURN_IF_ERROR(CheckCudaOrdinal(o.device, "--cuda-device"));
  if (o.tensors < 1 || o.elements < 1 || o.steps < 1 || !(o.busy_ms > 0)) {
    return Status::InvalidArgument("tensors, elements, steps and busy time must be positive");
  }
  TSTAT_BENCH_CUDA(cudaSetDevice(o.device));
  const auto elements = static_cast<std::size_t>(o.elements);
  const std::size_t per_buffer =
      o.separate_allocations ? elements : static_cast<std::size_t>(o.tensors) * elements;
  std::vector<std::unique_ptr<DeviceMemory>> buffers(o.separate_allocations ? o.tensors : 1);
  for (std::unique_ptr<DeviceMemory>& b : buffers) {
    b = std::make_unique<DeviceMemory>();
    TSTAT_BENCH_CUDA(cudaMalloc(&b->ptr, per_buffer * sizeof(float)));
    FillKernel<<<1024, 256>>>(static_cast<float*>(b->ptr), per_buffer);
    TSTAT_BENCH_CUDA(cudaPeekAtLastError());
  }
  TSTAT_BENCH_CUDA(cudaDeviceSynchronize());

  TSTAT_ASSIGN_OR_RETURN(std::string dir, MakeTempDir(o.dir, "tstat-bench-capture-cuda"));
  ScopedTempDir cleanup(dir);
  SessionConfig config;
  config.out_dir = dir + "/run";
  config.pipeline.cuda_device = o.device;
  config.save_config = SaveConfig::Every(1);  // stats of every tensor at every step
  config.rules.enabled = o.in_process_rules;
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(config));
  for (std::int64_t i = 0; i < o.tensors; ++i) {
    TensorView v;
    v.data = o.separate_allocations
                 ? static_cast<const float*>(buffers[static_cast<std::size_t>(i)]->ptr)
                 : static_cast<const float*>(buffers[0]->ptr) + i * o.elements;
    v.dtype = DType::kFloat32;
    v.numel = o.elements;
    v.space = MemorySpace::kCuda;
    v.device = o.device;
    TSTAT_RETURN_IF_ERROR(
        session->RegisterTensor({"layer" + std::to_string(i) + ".weight", v, {"weights"}})
            .status());
  }

  Stream stream;
  Event before, after, spin_done;
  TSTAT_BENCH_CUDA(cudaStreamCreateWithFlags(&stream.s, cudaStreamNonBlocking));
  TSTAT_BENCH_CUDA(cudaEventCreate(&before.e));
  TSTAT_BENCH_CUDA(cudaEventCreate(&after.e));
  TSTAT_BENCH_CUDA(cudaEventCreateWithFlags(&spin_done.e, cudaEventDisableTiming));

  // Warm-up: the first steps allocate the backend's and the pipeline's
  // buffers (cudaMalloc synchronizes the device).
  for (int i = 0; i < 5; ++i) TSTAT_RETURN_IF_ERROR(session->EndStep(stream.s));
  TSTAT_BENCH_CUDA(cudaStreamSynchronize(stream.s));

  CudaCaptureBenchResult r;
  r.tensors = o.tensors;
  r.elements = o.elements;
  r.allocations = static_cast<std::int64_t>(buffers.size());
  r.in_process_rules = o.in_process_rules;
  r.steps = o.steps;
  r.busy_ms = o.busy_ms;
  std::vector<double> idle_s, busy_s, device_s;
  for (int s = 0; s < o.steps; ++s) {
    TSTAT_BENCH_CUDA(cudaStreamSynchronize(stream.s));
    TSTAT_BENCH_CUDA(cudaEventRecord(before.e, stream.s));
    const double t0 = NowSeconds();
    TSTAT_RETURN_IF_ERROR(session->EndStep(stream.s));
    idle_s.push_back(NowSeconds() - t0);
    TSTAT_BENCH_CUDA(cudaEventRecord(after.e, stream.s));
    TSTAT_BENCH_CUDA(cudaEventSynchronize(after.e));
    float ms = 0.0f;
    TSTAT_BENCH_CUDA(cudaEventElapsedTime(&ms, before.e, after.e));
    device_s.push_back(ms * 1e-3);
  }
  const auto spin_ns = static_cast<unsigned long long>(o.busy_ms * 1e6);
  for (int s = 0; s < o.steps; ++s) {
    TSTAT_BENCH_CUDA(cudaStreamSynchronize(stream.s));
    SpinKernel<<<1, 1, 0, stream.s>>>(spin_ns);
    TSTAT_BENCH_CUDA(cudaPeekAtLastError());
    TSTAT_BENCH_CUDA(cudaEventRecord(spin_done.e, stream.s));
    const double t0 = NowSeconds();
    TSTAT_RETURN_IF_ERROR(session->EndStep(stream.s));
    busy_s.push_back(NowSeconds() - t0);
    const cudaError_t q = cudaEventQuery(spin_done.e);
    if (q == cudaSuccess) {
      ++r.busy_steps_waited;
    } else if (q != cudaErrorNotReady) {
      TSTAT_BENCH_CUDA(q);
    }
  }
  TSTAT_BENCH_CUDA(cudaStreamSynchronize(stream.s));
  TSTAT_RETURN_IF_ERROR(session->Close());
  const PipelineCounters c = session->counters();
  const std::uint64_t want =
      static_cast<std::uint64_t>(5 + 2 * o.steps) * static_cast<std::uint64_t>(o.tensors);
  if (c.records_written != want || c.records_lost || c.write_errors) {
    return Status::Internal("capture on CUDA: " + std::to_string(c.records_written) + " of " +
                            std::to_string(want) + " records written, " +
                            std::to_string(c.records_lost) + " lost, " +
                            std::to_string(c.write_errors) + " write errors");
  }
  r.records_written = c.records_written;
  r.end_step_s = Quantile(idle_s, 0.5);
  r.end_step_p90_s = Quantile(idle_s, 0.9);
  r.end_step_max_s = Quantile(idle_s, 1.0);
  r.busy_end_step_s = Quantile(busy_s, 0.5);
  r.device_step_s = Quantile(device_s, 0.5);
  r.returned_while_busy = r.busy_steps_waited == 0;
  return r;
}

}  // namespace tstat::bench
