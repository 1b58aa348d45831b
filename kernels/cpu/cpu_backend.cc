// The CPU backend: validates each request, runs the stat set of the whole
// batch in one parallel region, then the optional passes per request (delta,
// confusion matrix and value counts are separate passes, not fused into the
// stat-set tiles). Per-channel stats are the exception: they and the stat set
// come from one read (ComputeStatsAndPerChannel), outside the batch.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_passes.h"
#include "kernels/cpu/cpu_stats.h"
#include "kernels/cpu/cpu_tile_types.h"
#include "kernels/request_check.h"
#include "tstat/engine.h"

namespace tstat {
namespace {

// Every member back to its default, without touching the storage of
// disengaged optionals, except the exponent histogram: the stat batch
// engages (or resets) it and zeroes its span where it is filled
// (cpu_stats.cc).
void ResetForReuse(ReductionResult* r) {
  r->status = Status::OK();
  r->stats = TensorStats{};
  r->linear_histogram.reset();
  r->per_channel.reset();
  r->label_counts.reset();
  r->sample.reset();
  r->delta.reset();
  r->confusion.reset();
  r->value_counts.clear();
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : workers_(options.threads > 0 ? options.threads : DefaultCpuThreads()),
        tiles_(&kernels::cpu::SelectTileKernels(options.isa)) {}

  BackendKind kind() const override { return BackendKind::kCpu; }

  std::string description() const override {
    return "cpu (" + std::to_string(workers_) + " threads, " + tiles_->isa + ")";
  }

  Status Reduce(const std::vector<ReductionRequest>& requests,
                std::vector<ReductionResult>* results, CUstream_st* /*stream*/) override {
    if (results == nullptr) return Status::InvalidArgument("results is null");
    // Results from an earlier call are reset, not rebuilt: value-initialising
    // a ReductionResult zeroes all of it, the histogram's array included,
    // which for many small tensors costs as much as reducing them.
    const std::size_t reused = std::min(results->size(), requests.size());
    results->resize(requests.size());
    for (std::size_t i = 0; i < reused; ++i) ResetForReuse(&(*results)[i]);
    std::vector<kernels::cpu::StatsJob> jobs;
    jobs.reserve(requests.size());
    std::vector<bool> valid(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      ReductionResult& out = (*results)[i];
      out.status = kernels::CheckRequest(requests[i], BackendKind::kCpu);
      valid[i] = out.status.ok();
      if (valid[i] && kernels::cpu::ReducesWithPerChannel(requests[i])) continue;
      if (valid[i]) {  // label requests get the stat set too
        jobs.push_back({&requests[i], &out});
        continue;
      }
      out.exponent_histogram.reset();  // not a stat-set job
      out.status = out.status.WithContext("request " + std::to_string(i));
    }
    kernels::cpu::ReduceStatsBatch(jobs, workers_, *tiles_);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (!valid[i]) continue;
      const ReductionRequest& r = requests[i];
      ReductionResult& out = (*results)[i];
      if (r.options.label_classes > 0) {
        kernels::cpu::ComputeLabelCounts(r, workers_, &out.label_counts.emplace());
      } else {
        if (kernels::cpu::ReducesWithPerChannel(r)) {
          kernels::cpu::ComputeStatsAndPerChannel(r, workers_, *tiles_, &out);
        }
        if (r.options.linear_histogram.bins > 0) {
          kernels::cpu::ComputeLinearHistogram(r, out.stats, workers_,
                                               &out.linear_histogram.emplace());
        }
      }
      if (r.options.sample_count > 0) kernels::cpu::ComputeSample(r, &out.sample.emplace());
      if (r.options.delta.previous != nullptr) {
        kernels::cpu::ComputeDelta(r, workers_, *tiles_, &out.delta.emplace());
      }
      if (r.options.confusion.predictions != nullptr) {
        kernels::cpu::ComputeConfusion(r, workers_, &out.confusion.emplace());
      }
      if (!r.options.count_values.empty()) {
        kernels::cpu::ComputeValueCounts(r, workers_, &out.value_counts);
      }
    }
    return Status::OK();
  }

 private:
  int workers_;
  const kernels::cpu::TileKernels* tiles_;
};

}  // namespace

int DefaultCpuThreads() {
  // OMP_NUM_THREADS is a list ("4,2"); its first value is the outer level.
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && n > 0 && n <= 4096) return static_cast<int>(n);
  }
  return std::max(1, omp_get_num_procs());
}

std::unique_ptr<Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace tstat
