// CudaDeviceCapture: DeviceCapture over kernels::CudaBackend.
//
// Enqueue, on the caller's stream: one CudaBackend::Enqueue (the whole
// batch's reductions), one device-to-device cudaMemcpyAsync per raw snapshot
// into a device staging buffer, then an event. Collect: CudaBackend::Collect,
// then the staging buffer is copied to host memory on a private non-blocking
// stream (so the copy never waits for the training stream's later work).
// The staging buffer grows geometrically and is never freed while work is
// pending. Every call saves and restores the calling thread's current device.
// Compiled only when tstat is built with CUDA (host code; needs cudart).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "host/device/device_capture.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device_guard.h"
#include "kernels/cuda/device_memory_check.h"

namespace tstat::host {
namespace {

#define TSTAT_CUDA_TRY(expr, what) TSTAT_RETURN_IF_ERROR(kernels::CudaCallStatus((expr), (what)))

using Guard = kernels::CudaDeviceGuard;

constexpr std::size_t kAlign = 256;

class CudaDeviceCapture final : public DeviceCapture {
 public:
  CudaDeviceCapture(int device, std::unique_ptr<kernels::CudaBackend> backend)
      : device_(device), backend_(std::move(backend)) {}

  ~CudaDeviceCapture() override {
    Guard guard(device_);
    if (staging_ != nullptr) (void)cudaFree(staging_);
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    if (copy_stream_ != nullptr) (void)cudaStreamDestroy(copy_stream_);
  }

  Status Init() {
    Guard guard(device_);
    TSTAT_RETURN_IF_ERROR(guard.status());
    TSTAT_CUDA_TRY(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    TSTAT_CUDA_TRY(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                   "cudaStreamCreate");
    return Status::OK();
  }

  Status Enqueue(const std::vector<ReductionRequest>& requests, const std::vector<TensorView>& raws,
                 CUstream_st* stream) override {
    Guard guard(device_);
    TSTAT_RETURN_IF_ERROR(guard.status());
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    TSTAT_CUDA_TRY(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
    if (capture != cudaStreamCaptureStatusNone) {
      return Status::FailedPrecondition(
          "EndStep on a stream that is capturing a CUDA graph: call it outside the capture, "
          "after cudaGraphLaunch on the same stream");
    }
    raw_offsets_.clear();
    raw_sizes_.clear();
    std::size_t total = 0;
    for (const TensorView& v : raws) {
      const std::size_t bytes = static_cast<std::size_t>(v.numel) * DTypeSize(v.dtype);
      raw_offsets_.push_back(total);
      raw_sizes_.push_back(bytes);
      total += (bytes + kAlign - 1) / kAlign * kAlign;
    }
    if (total > staging_bytes_) {
      // Growth is rare (geometric); cudaFree/cudaMalloc synchronize the device.
      const std::size_t want = std::max(total, 2 * staging_bytes_);
      if (staging_ != nullptr) TSTAT_CUDA_TRY(cudaFree(staging_), "cudaFree");
      staging_ = nullptr;
      staging_bytes_ = 0;
      TSTAT_CUDA_TRY(cudaMalloc(&staging_, want), "cudaMalloc (raw snapshot staging)");
      staging_bytes_ = want;
    }
    if (!requests.empty()) TSTAT_RETURN_IF_ERROR(backend_->Enqueue(requests, stream));
    pending_reduce_ = !requests.empty();
    for (std::size_t i = 0; i < raws.size(); ++i) {
      if (raw_sizes_[i] == 0) continue;
      TSTAT_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(staging_) + raw_offsets_[i], raws[i].data,
                                     raw_sizes_[i], cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync (raw snapshot to staging)");
    }
    TSTAT_CUDA_TRY(cudaEventRecord(event_, stream), "cudaEventRecord");
    return Status::OK();
  }

  void CheckRaws(const std::vector<TensorView>& raws, std::vector<Status>* status) override {
    raw_check_.Reset();
    status->clear();
    if (raws.empty()) return;
    Guard guard(device_);
    for (const TensorView& v : raws) {
      const std::size_t bytes = static_cast<std::size_t>(v.numel) * DTypeSize(v.dtype);
      status->push_back(v.device == device_
                            ? raw_check_.Check(v.data, bytes, device_)
                            : Status::InvalidArgument(
                                  "tensor.device is " + std::to_string(v.device) +
                                  ", not the session's CUDA device " + std::to_string(device_)));
    }
  }

  Status Collect(std::vector<ReductionResult>* results,
                 std::vector<std::vector<std::uint8_t>>* raws) override {
    Guard guard(device_);
    TSTAT_RETURN_IF_ERROR(guard.status());
    results->clear();
    Status s;
    if (pending_reduce_) s = backend_->Collect(results);
    pending_reduce_ = false;
    raws->assign(raw_sizes_.size(), {});
    TSTAT_CUDA_TRY(cudaStreamWaitEvent(copy_stream_, event_, 0), "cudaStreamWaitEvent");
    for (std::size_t i = 0; i < raw_sizes_.size(); ++i) {
      (*raws)[i].resize(raw_sizes_[i]);
      if (raw_sizes_[i] == 0) continue;
      TSTAT_CUDA_TRY(
          cudaMemcpyAsync((*raws)[i].data(), static_cast<char*>(staging_) + raw_offsets_[i],
                          raw_sizes_[i], cudaMemcpyDeviceToHost, copy_stream_),
          "cudaMemcpyAsync (raw snapshot to host)");
    }
    TSTAT_CUDA_TRY(cudaStreamSynchronize(copy_stream_), "cudaStreamSynchronize");
    return s;
  }

 private:
  int device_;
  std::unique_ptr<kernels::CudaBackend> backend_;
  cudaEvent_t event_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  void* staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
  std::vector<std::size_t> raw_offsets_, raw_sizes_;
  bool pending_reduce_ = false;
  kernels::DeviceMemoryCheck raw_check_;
};

}  // namespace

Result<std::unique_ptr<DeviceCapture>> CreateCudaDeviceCapture(int device) {
  const int count = CudaDeviceCount();
  if (count == 0) return Status::Unavailable("no CUDA device is available (no GPU or no driver)");
  if (device < 0 || device >= count) {
    return Status::InvalidArgument("pipeline.cuda_device " + std::to_string(device) +
                                   " is out of range (" + std::to_string(count) + " devices)");
  }
  TSTAT_ASSIGN_OR_RETURN(std::unique_ptr<kernels::CudaBackend> backend,
                         kernels::CudaBackend::Create(device));
  auto capture = std::make_unique<CudaDeviceCapture>(device, std::move(backend));
  TSTAT_RETURN_IF_ERROR(capture->Init());
  return std::unique_ptr<DeviceCapture>(std::move(capture));
}

}  // namespace tstat::host
