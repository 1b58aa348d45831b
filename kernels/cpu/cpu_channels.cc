// Per-channel stats on the CPU. Channels are processed in blocks of
// kChannelBlock; for each outer index a block's channels are contiguous in
// memory (kChannelBlock * inner elements), so the pass streams through memory
// whatever the axis. Each channel is accumulated by one thread, in (outer,
// inner) order, with the same ElementAccumulator the CUDA threads use.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_dispatch.h"
#include "kernels/cpu/cpu_passes.h"
#include "kernels/request_check.h"
#include "kernels/stats_ops.h"

namespace tstat::kernels::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;

template <DType D>
void ChannelsTyped(const ReductionRequest& r, int workers, PerChannelStats* out) {
  using T = ComputeType<D>;
  const StatsOptions& o = r.options;
  const Thresholds<T> th = MakeThresholds<T>(o.band_lo, o.band_hi, o.small_eps, MinNormalOf(D));
  std::int64_t outer, channels, inner;
  ChannelDims(r.tensor, o.per_channel_axis, &outer, &channels, &inner);
  out->axis = o.per_channel_axis;
  out->channels.assign(static_cast<std::size_t>(channels), TensorStats{});
  const auto* base = static_cast<const unsigned char*>(r.tensor.data);
  const std::int64_t blocks = (channels + kChannelBlock - 1) / kChannelBlock;
  const bool parallel = r.tensor.numel >= kParallelMinElems && blocks > 1;

#pragma omp parallel for schedule(static) num_threads(workers) if (parallel)
  for (std::int64_t cb = 0; cb < blocks; ++cb) {
    const std::int64_t c0 = cb * kChannelBlock;
    const std::int64_t c1 = std::min(channels, c0 + kChannelBlock);
    ElementAccumulator<T> acc[kChannelBlock];
    for (std::int64_t c = c0; c < c1; ++c) acc[c - c0].Init();
    NoHistogram no_hist;
    for (std::int64_t oi = 0; oi < outer; ++oi) {
      for (std::int64_t c = c0; c < c1; ++c) {
        const std::int64_t first = (oi * channels + c) * inner;
        ElementAccumulator<T>& a = acc[c - c0];
        for (std::int64_t i = 0; i < inner; ++i) a.Add(LoadCompute<D>(base, first + i), th, no_hist);
      }
    }
    for (std::int64_t c = c0; c < c1; ++c) out->channels[c] = ToTensorStats(acc[c - c0].Finish());
  }
}

}  // namespace

void ComputePerChannel(const ReductionRequest& r, int workers, PerChannelStats* out) {
  DispatchDType(r.tensor.dtype, [&](auto tag) { ChannelsTyped<decltype(tag)::value>(r, workers, out); });
}

}  // namespace tstat::kernels::cpu
