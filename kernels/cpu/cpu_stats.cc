// Batch driver of the CPU stat set.
//
// The batch is cut into tiles (kTileElems elements of one tensor). Tiles are
// laid end to end over all tensors and split into `workers` contiguous ranges
// of roughly equal weight (elements plus a per-tile overhead), so 10,000 small
// tensors cost one parallel region, not 10,000. A worker reduces its tiles in
// order; whenever it finishes the part of a tensor that lies in its range it
// emits a piece. A piece that is a whole tensor is written straight into the
// result; pieces of tensors split between workers are merged afterwards in
// worker order, which makes the result independent of OpenMP scheduling.
#include "kernels/cpu/cpu_stats.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "kernels/cpu/cpu_tile_types.h"
#include "kernels/stats_ops.h"

namespace tstat::kernels::cpu {
namespace {

constexpr std::int64_t kTileOverheadElems = 256;  // fixed cost of a tile, in elements

struct Tile {
  std::uint32_t job;
  std::int64_t begin, length;
};

struct Piece {
  std::uint32_t job;
  StatsPartial partial;
  ExponentHistogram hist;
};

struct JobParams {
  const unsigned char* base;
  DType dtype;
  bool float_path;
  Thresholds<float> thf;
  Thresholds<double> thd;
};

JobParams MakeParams(const ReductionRequest& r) {
  JobParams p;
  p.base = static_cast<const unsigned char*>(r.tensor.data);
  p.dtype = r.tensor.dtype;
  p.float_path = UsesFloatPath(p.dtype);
  const StatsOptions& o = r.options;
  const double mn = MinNormalOf(p.dtype);
  p.thf = MakeThresholds<float>(o.band_lo, o.band_hi, o.small_eps, mn);
  p.thd = MakeThresholds<double>(o.band_lo, o.band_hi, o.small_eps, mn);
  return p;
}

// Worker w gets tiles [bounds[w], bounds[w+1]).
std::vector<std::size_t> PartitionTiles(const std::vector<Tile>& tiles, int workers) {
  std::int64_t total = 0;
  for (const Tile& t : tiles) total += t.length + kTileOverheadElems;
  std::vector<std::size_t> bounds(workers + 1, tiles.size());
  bounds[0] = 0;
  std::int64_t acc = 0;
  int w = 1;
  for (std::size_t i = 0; i < tiles.size() && w < workers; ++i) {
    acc += tiles[i].length + kTileOverheadElems;
    // Close worker ranges whose share of the weight is reached.
    while (w < workers && acc * workers >= total * w) bounds[w++] = i + 1;
  }
  return bounds;
}

void FinishJob(const StatsPartial& p, const ExponentHistogram* hist, const StatsJob& job) {
  job.result->stats = ToTensorStats(p);
  if (job.request->options.exponent_histogram && hist != nullptr) {
    job.result->exponent_histogram = *hist;
  }
}

}  // namespace

void ReduceStatsBatch(const std::vector<StatsJob>& jobs, int workers, const TileKernels& kern) {
  if (jobs.empty()) return;
  std::vector<JobParams> params;
  params.reserve(jobs.size());
  std::vector<Tile> tiles;
  for (std::uint32_t j = 0; j < jobs.size(); ++j) {
    const ReductionRequest& r = *jobs[j].request;
    params.push_back(MakeParams(r));
    // Results of whole tensors are written in place: engage them now, zeroed.
    jobs[j].result->stats = TensorStats{};
    if (r.options.exponent_histogram) jobs[j].result->exponent_histogram.emplace();
    for (std::int64_t b = 0; b < r.tensor.numel; b += kTileElems) {
      tiles.push_back({j, b, std::min<std::int64_t>(kTileElems, r.tensor.numel - b)});
    }
  }
  // Empty tensors have no tile.
  for (std::uint32_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].request->tensor.numel == 0) FinishJob(StatsPartial::Identity(), nullptr, jobs[j]);
  }
  if (tiles.empty()) return;

  workers = std::max(1, std::min<int>(workers, static_cast<int>(tiles.size())));
  const std::vector<std::size_t> bounds = PartitionTiles(tiles, workers);
  // Pieces of tensors that a worker does not own whole (at most two per worker).
  std::vector<std::vector<Piece>> split(workers);

#pragma omp parallel num_threads(workers)
  {
    auto state = std::make_unique<TileState>();
    state->Init();
    ExponentHistogram scratch;
    const int team = omp_get_num_threads();
    // Workers are a fixed partition; threads take them round-robin so the result
    // does not depend on how many threads OpenMP actually gave us.
    for (int w = omp_get_thread_num(); w < workers; w += team) {
      std::size_t i = bounds[w];
      const std::size_t end = bounds[w + 1];
      while (i < end) {
        const std::uint32_t j = tiles[i].job;
        const StatsJob& job = jobs[j];
        const JobParams& p = params[j];
        const bool whole = tiles[i].begin == 0 &&
                           (end == tiles.size() || tiles[end - 1].job != j ||
                            tiles[end - 1].begin + tiles[end - 1].length == job.request->tensor.numel);
        // A whole tensor writes its histogram in place; a split one into a piece.
        Piece* piece = nullptr;
        std::uint64_t* dest;
        if (whole && job.result->exponent_histogram) {
          dest = job.result->exponent_histogram->counts.data();
        } else if (whole) {
          scratch.counts.fill(0);
          dest = scratch.counts.data();
        } else {
          split[w].push_back(Piece{j, StatsPartial::Identity(), ExponentHistogram{}});
          piece = &split[w].back();
          dest = piece->hist.counts.data();
        }
        state->Begin(p.float_path, dest);
        const std::size_t elem = DTypeSize(p.dtype);
        for (; i < end && tiles[i].job == j; ++i) {
          const unsigned char* base = p.base + tiles[i].begin * static_cast<std::int64_t>(elem);
          if (p.float_path) {
            kern.float_fn[static_cast<int>(p.dtype)](base, tiles[i].length, p.thf, state.get());
          } else {
            kern.double_fn[static_cast<int>(p.dtype)](base, tiles[i].length, p.thd, state.get());
          }
          if (state->NeedsFlush()) state->Flush();
        }
        state->Flush();
        if (piece != nullptr) {
          piece->partial = state->partial;
        } else {
          job.result->stats = ToTensorStats(state->partial);
        }
      }
    }
  }

  // Tensors split between workers: merge their pieces in worker order.
  std::vector<StatsPartial> merged(jobs.size(), StatsPartial::Identity());
  std::vector<ExponentHistogram> merged_hist;
  std::vector<int> hist_index(jobs.size(), -1);
  for (int w = 0; w < workers; ++w) {
    for (const Piece& pc : split[w]) {
      merged[pc.job] = Merge(merged[pc.job], pc.partial);
      if (hist_index[pc.job] < 0) {
        hist_index[pc.job] = static_cast<int>(merged_hist.size());
        merged_hist.emplace_back();
      }
      auto& h = merged_hist[hist_index[pc.job]].counts;
      for (int b = 0; b < kExpHistBins; ++b) h[b] += pc.hist.counts[b];
    }
  }
  for (std::uint32_t j = 0; j < jobs.size(); ++j) {
    if (hist_index[j] >= 0) FinishJob(merged[j], &merged_hist[hist_index[j]], jobs[j]);
  }
}

}  // namespace tstat::kernels::cpu
