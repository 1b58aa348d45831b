// CudaBackend implementation: batch layout in the device workspace, staging of
// the launch tables, the launch sequence, and result collection.
//
// Workspace layout of one batch (every section 256-byte aligned):
//   [inputs: requests | stats items | linear items | label items |
//            channel items | merge jobs | sample jobs | delta items |
//            confusion items | value items | value table]  <- one H2D copy
//   [scratch: chunk partials]
//   [outputs: finals | samples | delta partials | counters] <- one D2H copy
// The counters section is zeroed with one cudaMemsetAsync before the launches.
// Everything is queued on the caller's stream; Collect() waits on an event.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_resources.cuh"
#include "kernels/cuda/cuda_status.cuh"
#include "kernels/cuda/device_memory_check.h"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/plan/launch_plan.h"
#include "kernels/plan/plan_results.h"
#include "kernels/plan/tuning.h"

namespace tstat::kernels {
namespace {

constexpr std::size_t kSectionAlign = 256;
// First allocation sizes; they grow geometrically from here.
constexpr std::size_t kInitialWorkspaceBytes = std::size_t{4} << 20;
constexpr std::size_t kInitialPinnedBytes = std::size_t{1} << 20;

struct BatchLayout {
  std::size_t requests, stats_items, linear_items, label_items, channel_items, merge_jobs,
      sample_jobs, delta_items, confusion_items, value_items, value_table, inputs_end;
  std::size_t partials;
  std::size_t outputs, finals, samples, delta_partials, counters, end;
};

std::size_t Place(std::size_t* cursor, std::size_t bytes) {
  const std::size_t at = *cursor;
  *cursor = (at + bytes + kSectionAlign - 1) / kSectionAlign * kSectionAlign;
  return at;
}
template <class T>
std::size_t PlaceVector(std::size_t* cursor, const std::vector<T>& v) {
  return Place(cursor, v.size() * sizeof(T));
}

BatchLayout Layout(const LaunchPlan& p) {
  BatchLayout l;
  std::size_t c = 0;
  l.requests = PlaceVector(&c, p.requests);
  l.stats_items = PlaceVector(&c, p.stats_items);
  l.linear_items = PlaceVector(&c, p.linear_items);
  l.label_items = PlaceVector(&c, p.label_items);
  l.channel_items = PlaceVector(&c, p.channel_items);
  l.merge_jobs = PlaceVector(&c, p.merge_jobs);
  l.sample_jobs = PlaceVector(&c, p.sample_jobs);
  l.delta_items = PlaceVector(&c, p.delta_items);
  l.confusion_items = PlaceVector(&c, p.confusion_items);
  l.value_items = PlaceVector(&c, p.value_items);
  l.value_table = PlaceVector(&c, p.value_table);
  l.inputs_end = c;
  l.partials = Place(&c, static_cast<std::size_t>(p.num_partials) * sizeof(StatsPartial));
  l.outputs = c;
  l.finals = Place(&c, static_cast<std::size_t>(p.num_finals) * sizeof(StatsPartial));
  l.samples = Place(&c, static_cast<std::size_t>(p.sample_total) * sizeof(double));
  l.delta_partials =
      Place(&c, static_cast<std::size_t>(p.num_delta_partials) * sizeof(DeltaPartial));
  l.counters = Place(&c, static_cast<std::size_t>(p.num_counters) * sizeof(std::uint64_t));
  l.end = c;
  return l;
}

template <class T>
void Stage(unsigned char* staging, std::size_t offset, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(staging + offset, v.data(), v.size() * sizeof(T));
}

BatchPointers Pointers(unsigned char* ws, const BatchLayout& l, const LaunchPlan& p) {
  BatchPointers b;
  b.requests = reinterpret_cast<const DeviceRequest*>(ws + l.requests);
  b.stats_items = reinterpret_cast<const WorkItem*>(ws + l.stats_items);
  b.linear_items = reinterpret_cast<const WorkItem*>(ws + l.linear_items);
  b.label_items = reinterpret_cast<const WorkItem*>(ws + l.label_items);
  b.channel_items = reinterpret_cast<const ChannelItem*>(ws + l.channel_items);
  b.merge_jobs = reinterpret_cast<const MergeJob*>(ws + l.merge_jobs);
  b.sample_jobs = reinterpret_cast<const SampleJob*>(ws + l.sample_jobs);
  b.delta_items = reinterpret_cast<const WorkItem*>(ws + l.delta_items);
  b.confusion_items = reinterpret_cast<const WorkItem*>(ws + l.confusion_items);
  b.value_items = reinterpret_cast<const WorkItem*>(ws + l.value_items);
  b.value_table = reinterpret_cast<const ValueEntry*>(ws + l.value_table);
  b.num_merge_jobs = static_cast<std::int64_t>(p.merge_jobs.size());
  b.merge_segments = p.merge_segments;
  b.num_sample_jobs = static_cast<std::int64_t>(p.sample_jobs.size());
  b.sample_total = p.sample_total;
  b.partials = reinterpret_cast<StatsPartial*>(ws + l.partials);
  b.finals = reinterpret_cast<StatsPartial*>(ws + l.finals);
  b.samples = reinterpret_cast<double*>(ws + l.samples);
  b.counters = reinterpret_cast<unsigned long long*>(ws + l.counters);
  b.delta_partials = reinterpret_cast<DeltaPartial*>(ws + l.delta_partials);
  return b;
}

}  // namespace

struct CudaBackend::State {
  int device = 0;
  std::string description;
  DeviceBuffer workspace;
  PinnedBuffer staging;  // input tables, host side of the H2D copy
  PinnedBuffer outputs;  // host side of the D2H copy
  CudaEvent done;        // recorded on the caller's stream after the D2H copy
  bool pending = false;
  LaunchPlan plan;  // of the pending batch
  BatchLayout layout{};
  int last_launches = 0;
  DeviceMemoryCheck memory_check;
  std::vector<Status> memory_status;  // per request of the batch being planned

  ~State() {
    if (pending) (void)cudaEventSynchronize(done.get());  // buffers still in use
  }

  // Queues the copies and launches of `plan` (already laid out and staged).
  Status Launch(cudaStream_t stream) {
    const BatchLayout& l = layout;
    unsigned char* ws = workspace.data();
    if (l.inputs_end > 0) {
      TSTAT_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(ws, staging.data(), l.inputs_end, cudaMemcpyHostToDevice, stream));
    }
    if (l.end > l.counters) {
      TSTAT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ws + l.counters, 0, l.end - l.counters, stream));
    }
    const BatchPointers b = Pointers(ws, l, plan);
    TSTAT_RETURN_IF_ERROR(
        LaunchStatsKernel(b, static_cast<std::int64_t>(plan.stats_items.size()), stream));
    TSTAT_RETURN_IF_ERROR(
        LaunchChannelKernel(b, static_cast<std::int64_t>(plan.channel_items.size()), stream));
    TSTAT_RETURN_IF_ERROR(LaunchMergeKernel(b, stream));
    TSTAT_RETURN_IF_ERROR(LaunchLinearHistKernel(
        b, static_cast<std::int64_t>(plan.linear_items.size()), plan.linear_shared_bins, stream));
    TSTAT_RETURN_IF_ERROR(LaunchLabelKernel(b, static_cast<std::int64_t>(plan.label_items.size()),
                                            plan.label_shared_bins, stream));
    TSTAT_RETURN_IF_ERROR(LaunchSampleKernel(b, stream));
    TSTAT_RETURN_IF_ERROR(
        LaunchDeltaKernel(b, static_cast<std::int64_t>(plan.delta_items.size()), stream));
    TSTAT_RETURN_IF_ERROR(
        LaunchConfusionKernel(b, static_cast<std::int64_t>(plan.confusion_items.size()),
                              plan.confusion_shared_bins, stream));
    TSTAT_RETURN_IF_ERROR(
        LaunchValueCountKernel(b, static_cast<std::int64_t>(plan.value_items.size()), stream));
    if (l.end > l.outputs) {
      TSTAT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(outputs.data(), ws + l.outputs, l.end - l.outputs,
                                                 cudaMemcpyDeviceToHost, stream));
    }
    TSTAT_CUDA_RETURN_IF_ERROR(cudaEventRecord(done.get(), stream));
    return Status::OK();
  }
};

namespace {

// What every request's kernels will read (the tensor, the previous values of
// a delta, the predictions of a confusion matrix) must be memory that
// `device` can read: a fault there would end the CUDA context.
void CheckMemory(const std::vector<ReductionRequest>& requests, int device,
                 DeviceMemoryCheck* check, std::vector<Status>* status) {
  check->Reset();
  status->assign(requests.size(), Status::OK());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const TensorView& t = requests[i].tensor;
    // Sizes CheckRequest would reject are left to it (and never multiplied).
    if (t.space != MemorySpace::kCuda || t.device != device || t.numel <= 0 ||
        t.numel > kMaxNumel) {
      continue;
    }
    const std::size_t n = static_cast<std::size_t>(t.numel);
    Status& st = (*status)[i];
    st = check->Check(t.data, n * DTypeSize(t.dtype), device);
    const StatsOptions& o = requests[i].options;
    if (st.ok() && o.delta.previous != nullptr) {
      st = check->Check(o.delta.previous, n * DTypeSize(t.dtype), device, "options.delta.previous");
    }
    if (st.ok() && o.confusion.predictions != nullptr && o.label_classes > 0 &&
        o.label_classes <= kMaxConfusionClasses) {
      const std::size_t per_row =
          o.confusion.argmax ? static_cast<std::size_t>(o.label_classes) : 1;
      st = check->Check(o.confusion.predictions,
                        n * per_row * DTypeSize(o.confusion.predictions_dtype), device,
                        "options.confusion.predictions");
    }
  }
}

}  // namespace

CudaBackend::CudaBackend(std::unique_ptr<State> state) : state_(std::move(state)) {}

CudaBackend::~CudaBackend() {
  if (state_ == nullptr) return;
  ScopedDevice scoped;
  (void)scoped.Enter(state_->device);
  state_.reset();
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (device < 0 || device >= count) {
    return Status::InvalidArgument("device " + std::to_string(device) + " is out of range (" +
                                   std::to_string(count) + " CUDA devices)");
  }
  auto state = std::make_unique<State>();
  state->device = device;
  ScopedDevice scoped;
  TSTAT_RETURN_IF_ERROR(scoped.Enter(device));
  cudaDeviceProp prop;
  TSTAT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  state->description = std::string("cuda (") + prop.name + ", sm_" + std::to_string(prop.major) +
                       std::to_string(prop.minor) + ")";
  TSTAT_RETURN_IF_ERROR(state->done.Create());
  TSTAT_RETURN_IF_ERROR(state->workspace.Reserve(kInitialWorkspaceBytes));
  TSTAT_RETURN_IF_ERROR(state->staging.Reserve(kInitialPinnedBytes));
  TSTAT_RETURN_IF_ERROR(state->outputs.Reserve(kInitialPinnedBytes));
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(state)));
}

std::string CudaBackend::description() const { return state_->description; }
bool CudaBackend::pending() const { return state_->pending; }
int CudaBackend::device() const { return state_->device; }
int CudaBackend::last_kernel_launches() const { return state_->last_launches; }

Status CudaBackend::Enqueue(const std::vector<ReductionRequest>& requests, CUstream_st* stream) {
  State& s = *state_;
  if (s.pending) {
    return Status::FailedPrecondition("Enqueue: the previous batch has not been collected");
  }
  ScopedDevice scoped;
  TSTAT_RETURN_IF_ERROR(scoped.Enter(s.device));
  CheckMemory(requests, s.device, &s.memory_check, &s.memory_status);
  TSTAT_RETURN_IF_ERROR(BuildLaunchPlan(requests, BackendKind::kCuda,
                                        LaunchPolicy::kThreadsPerBlock, &s.plan, s.device,
                                        &s.memory_status));
  s.layout = Layout(s.plan);
  const BatchLayout& l = s.layout;
  // No batch is pending, so growing (free + malloc) cannot pull memory from
  // under queued work.
  TSTAT_RETURN_IF_ERROR(s.workspace.Reserve(l.end));
  TSTAT_RETURN_IF_ERROR(s.staging.Reserve(l.inputs_end));
  TSTAT_RETURN_IF_ERROR(s.outputs.Reserve(l.end - l.outputs));
  unsigned char* staging = s.staging.data();
  Stage(staging, l.requests, s.plan.requests);
  Stage(staging, l.stats_items, s.plan.stats_items);
  Stage(staging, l.linear_items, s.plan.linear_items);
  Stage(staging, l.label_items, s.plan.label_items);
  Stage(staging, l.channel_items, s.plan.channel_items);
  Stage(staging, l.merge_jobs, s.plan.merge_jobs);
  Stage(staging, l.sample_jobs, s.plan.sample_jobs);
  Stage(staging, l.delta_items, s.plan.delta_items);
  Stage(staging, l.confusion_items, s.plan.confusion_items);
  Stage(staging, l.value_items, s.plan.value_items);
  Stage(staging, l.value_table, s.plan.value_table);
  const Status launched = s.Launch(stream);
  if (!launched.ok()) {
    // Part of the batch may be queued and still read the staging buffer:
    // drain it before the buffers can be reused (error path only).
    (void)cudaStreamSynchronize(stream);
    return launched;
  }
  s.pending = true;
  s.last_launches = s.plan.KernelLaunches();
  return Status::OK();
}

Status CudaBackend::Collect(std::vector<ReductionResult>* results) {
  State& s = *state_;
  if (results == nullptr) return Status::InvalidArgument("results is null");
  if (!s.pending) return Status::FailedPrecondition("Collect: no batch is pending");
  s.pending = false;
  TSTAT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s.done.get()));
  const BatchLayout& l = s.layout;
  const unsigned char* out = s.outputs.data();
  PlanOutputs outputs;
  outputs.finals = reinterpret_cast<const StatsPartial*>(out + (l.finals - l.outputs));
  outputs.samples = reinterpret_cast<const double*>(out + (l.samples - l.outputs));
  outputs.counters = reinterpret_cast<const std::uint64_t*>(out + (l.counters - l.outputs));
  outputs.delta_partials =
      reinterpret_cast<const DeltaPartial*>(out + (l.delta_partials - l.outputs));
  UnpackResults(s.plan, outputs, results);
  return Status::OK();
}

Status CudaBackend::Reduce(const std::vector<ReductionRequest>& requests,
                           std::vector<ReductionResult>* results, CUstream_st* stream) {
  if (results == nullptr) return Status::InvalidArgument("results is null");
  const Status queued = Enqueue(requests, stream);
  if (!queued.ok()) {
    results->assign(requests.size(), ResultWithStatus(queued));
    return queued;
  }
  return Collect(results);
}

}  // namespace tstat::kernels
