// Batch driver of the CPU stat set.
//
// The batch is cut into tiles (kTileElems elements of one tensor). Tiles are
// laid end to end over all tensors and split into contiguous *parts* of
// roughly equal weight (elements plus a per-tile overhead), so 10,000 small
// tensors cost one parallel region, not 10,000. With T threads there are
// kPartsPerThread * T parts, claimed by the threads one at a time: a thread
// that is preempted (the machine is shared with data loaders, other jobs)
// delays the step by at most the part it holds, not by a fixed share of the
// batch. A part is reduced in order; whenever the part of a tensor that lies
// in it is finished it emits a piece. A piece that is a whole tensor is
// written straight into the result; pieces of tensors split between parts are
// merged afterwards in part order, so the result depends on T but not on
// OpenMP's scheduling or on which thread took which part.
#include "kernels/cpu/cpu_stats.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "kernels/cpu/cpu_tile_call.h"
#include "kernels/cpu/cpu_tile_types.h"
#include "kernels/stats_ops.h"

namespace tstat::kernels::cpu {
namespace {

constexpr std::int64_t kTileOverheadElems = 256;  // fixed cost of a tile, in elements
constexpr int kPartsPerThread = 4;

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
  std::size_t elem;
  TileCall call;
};

JobParams MakeParams(const ReductionRequest& r, const TileKernels& kern) {
  return {static_cast<const unsigned char*>(r.tensor.data), DTypeSize(r.tensor.dtype),
          MakeTileCall(r, kern)};
}

// Part w gets tiles [bounds[w], bounds[w+1]).
std::vector<std::size_t> PartitionTiles(const std::vector<Tile>& tiles, int parts) {
  std::int64_t total = 0;
  for (const Tile& t : tiles) total += t.length + kTileOverheadElems;
  std::vector<std::size_t> bounds(parts + 1, tiles.size());
  bounds[0] = 0;
  std::int64_t acc = 0;
  int w = 1;
  for (std::size_t i = 0; i < tiles.size() && w < parts; ++i) {
    acc += tiles[i].length + kTileOverheadElems;
    // Close the parts whose share of the weight is reached.
    while (w < parts && acc * parts >= total * w) bounds[w++] = i + 1;
  }
  return bounds;
}

// Zeroes the bins of `h` that can be non-zero: those in its span (whoever
// changed bins outside the span widened it, stats.h).
void ZeroSpan(ExponentHistogram* h) {
  std::fill(h->counts.begin() + h->SpanFirst(), h->counts.begin() + h->SpanLast(), 0);
}

void FinishJob(const StatsPartial& p, const ExponentHistogram* hist, const StatsJob& job) {
  job.result->stats = ToTensorStats(p);
  if (!job.result->exponent_histogram) return;
  if (hist != nullptr) {
    *job.result->exponent_histogram = *hist;
    job.result->exponent_histogram->SetSpan();
  } else {  // an empty tensor: no bins, the default span
    ZeroSpan(&*job.result->exponent_histogram);
    job.result->exponent_histogram->ClearSpan();
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
    params.push_back(MakeParams(r, kern));
    // Results of whole tensors are written in place: engaged here. A reused
    // histogram keeps its storage and is zeroed (its span) in the parallel
    // region by the core that fills it: 2.2 KB zeroed here per tensor was
    // serial work, ~0.1 ms of a 1,000-tensor step.
    jobs[j].result->stats = TensorStats{};
    std::optional<ExponentHistogram>& hist = jobs[j].result->exponent_histogram;
    if (!r.options.exponent_histogram) {
      hist.reset();
    } else if (!hist) {
      hist.emplace();
    }
    for (std::int64_t b = 0; b < r.tensor.numel; b += kTileElems) {
      tiles.push_back({j, b, std::min<std::int64_t>(kTileElems, r.tensor.numel - b)});
    }
  }
  // Empty tensors have no tile.
  for (std::uint32_t j = 0; j < jobs.size(); ++j) {
    if (jobs[j].request->tensor.numel == 0) FinishJob(StatsPartial::Identity(), nullptr, jobs[j]);
  }
  if (tiles.empty()) return;

  const int threads = std::max(1, std::min<int>(workers, static_cast<int>(tiles.size())));
  // One thread: one part (nothing to balance, no pieces to merge).
  const int parts =
      threads == 1 ? 1 : std::min<int>(threads * kPartsPerThread, static_cast<int>(tiles.size()));
  const std::vector<std::size_t> bounds = PartitionTiles(tiles, parts);
  // Pieces of tensors that a part does not hold whole (at most two per part).
  std::vector<std::vector<Piece>> split(parts);
  std::atomic<int> next_part{0};

#pragma omp parallel num_threads(threads)
  {
    auto state = std::make_unique<TileState>();
    state->Init();
    ExponentHistogram scratch;
    for (int w = next_part.fetch_add(1, std::memory_order_relaxed); w < parts;
         w = next_part.fetch_add(1, std::memory_order_relaxed)) {
      std::size_t i = bounds[w];
      const std::size_t end = bounds[w + 1];
      while (i < end) {
        const std::uint32_t j = tiles[i].job;
        const StatsJob& job = jobs[j];
        const JobParams& p = params[j];
        const bool whole = tiles[i].begin == 0 && (end == tiles.size() || tiles[end - 1].job != j ||
                                                   tiles[end - 1].begin + tiles[end - 1].length ==
                                                       job.request->tensor.numel);
        // A whole tensor writes its histogram in place; a split one into a piece.
        Piece* piece = nullptr;
        std::uint64_t* dest;
        if (whole && job.result->exponent_histogram) {
          ZeroSpan(&*job.result->exponent_histogram);
          dest = job.result->exponent_histogram->counts.data();
        } else if (whole) {
          scratch.counts.fill(0);
          dest = scratch.counts.data();
        } else {
          split[w].push_back(Piece{j, StatsPartial::Identity(), ExponentHistogram{}});
          piece = &split[w].back();
          dest = piece->hist.counts.data();
        }
        state->Begin(p.call.float_path, dest);
        for (; i < end && tiles[i].job == j; ++i) {
          p.call(p.base + static_cast<std::size_t>(tiles[i].begin) * p.elem, tiles[i].length,
                 state.get());
        }
        state->Flush();
        if (piece != nullptr) {
          piece->partial = state->partial;
        } else {
          job.result->stats = ToTensorStats(state->partial);
          // Here the bins are in this core's cache; the session trims them
          // later, on its own core, by this span (ExponentBins). The tile
          // zeroed every bin outside the old span and added only to those
          // it touched.
          if (job.result->exponent_histogram) {
            job.result->exponent_histogram->SetSpanWithin(state->hist_lo, state->hist_hi + 1);
          }
        }
      }
    }
  }

  // Tensors split between parts: merge their pieces in part order. Only
  // these get merge state: a StatsPartial per job, allocated and freed in
  // every call, had glibc grow and trim its heap (and fault pages in) on
  // every reduction of many small tensors.
  std::size_t pieces = 0;
  for (const std::vector<Piece>& s : split) pieces += s.size();
  if (pieces == 0) return;
  std::vector<int> slot(jobs.size(), -1);  // of a split job in merged, merged_hist
  std::vector<StatsPartial> merged;
  std::vector<ExponentHistogram> merged_hist;
  for (int w = 0; w < parts; ++w) {
    for (const Piece& pc : split[w]) {
      if (slot[pc.job] < 0) {
        slot[pc.job] = static_cast<int>(merged.size());
        merged.push_back(StatsPartial::Identity());
        merged_hist.emplace_back();
      }
      const auto k = static_cast<std::size_t>(slot[pc.job]);
      merged[k] = Merge(merged[k], pc.partial);
      auto& h = merged_hist[k].counts;
      for (int b = 0; b < kExpHistBins; ++b) h[b] += pc.hist.counts[b];
    }
  }
  for (std::uint32_t j = 0; j < jobs.size(); ++j) {
    if (slot[j] >= 0) FinishJob(merged[slot[j]], &merged_hist[slot[j]], jobs[j]);
  }
}

}  // namespace tstat::kernels::cpu
