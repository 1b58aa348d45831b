// What one CUDA thread does, written once for the kernels and their CPU
// emulation (kernels/emulated_backend.cc): the walk over a thread's elements of
// a chunk (head scalars, 16-byte vector loads of raw bytes, tail scalars, via
// SplitChunk/VisitChunk; decoding in kernels/plan/element_access.h) and the
// per-thread bodies of every kernel: chunk stats with an exponent-histogram
// sink, per-channel stats in both thread mappings, linear-histogram binning,
// label counting, the sample gather, and the auxiliary reductions (delta over
// pairs of chunks, confusion-matrix cells, value counts).
//
// Each body takes the thread index t and the block size T and returns (or adds
// into a sink) exactly what that thread contributes; block-level combination
// (shared memory, cub::BlockReduce, atomics) is the caller's. Sinks are any
// type with Add(int bin): shared-memory atomics on the device, a plain array in
// the emulator. Pure functions of their inputs; no CUDA headers needed (device
// intrinsics are used only under __CUDA_ARCH__).
#pragma once

#include <cstdint>

#include "kernels/aux_ops.h"
#include "kernels/hd.h"
#include "kernels/plan/element_access.h"
#include "kernels/plan/launch_tables.h"
#include "kernels/stats_ops.h"
#include "kernels/work_plan.h"

// Host-device functions that must not be inlined on the device (one copy per
// kernel instead of one per call site); plain inline functions on the host.
#if defined(__CUDACC__)
#define TSTAT_HD_NOINLINE inline __host__ __device__ __noinline__
#else
#define TSTAT_HD_NOINLINE inline
#endif

namespace tstat::kernels {

// Calls f(bits) for every element thread t of T visits in a chunk that starts
// at `chunk` (split = SplitChunk(chunk, length, Dec::kSize)), in kernel order.
TSTAT_EXEC_CHECK_DISABLE
template <int kSize, class F>
TSTAT_HD void ForEachThreadElement(const unsigned char* chunk, const ChunkSplit& split,
                                   bool aligned, int t, int T, F&& f) {
  constexpr int kPerVec = kVectorBytes / kSize;
  VisitChunk(
      split, t, T, [&](std::int64_t i) { f(LoadBits<kSize>(chunk + i * kSize, aligned)); },
      [&](std::int64_t first) {
        const Vec16 v = LoadVec16(chunk + first * kSize);
        TSTAT_UNROLL
        for (int j = 0; j < kPerVec; ++j) f(VecElement<kSize>(v, j));
      });
}

template <class T>
TSTAT_HD bool IsFiniteValue(T x) {
  const T ax = x < 0 ? -x : x;
  return ax < static_cast<T>(INFINITY);  // false for NaN and +-Inf
}

// ---------------------------------------------------------------------------
// Stats pass: the partial of thread t of T over its elements of one chunk,
// exponent bins of its finite non-zero values fed to `hist`.
TSTAT_EXEC_CHECK_DISABLE
template <class Dec, class Hist>
TSTAT_HD StatsPartial ThreadChunkStats(const unsigned char* chunk, const ChunkSplit& split,
                                       bool aligned, int t, int T,
                                       const Thresholds<typename Dec::Compute>& th, Hist& hist) {
  // 32-bit counters: a chunk holds at most 2^31 elements (LaunchPolicy::kMaxStatsNumel).
  ElementAccumulator<typename Dec::Compute, std::uint32_t> acc;
  acc.Init();
  ForEachThreadElement<Dec::kSize>(chunk, split, aligned, t, T, [&](std::uint64_t bits) {
    acc.Add(Dec::Decode(bits), th, hist);
  });
  return acc.Finish();
}

// Linear-histogram pass 2: bins of thread t's finite values go to `bins`;
// values outside a fixed range are returned as below/above counts.
struct OutsideCounts {
  std::uint64_t below, above;
};
TSTAT_EXEC_CHECK_DISABLE
template <class Dec, class Bins>
TSTAT_HD OutsideCounts ThreadChunkLinearHist(const unsigned char* chunk, const ChunkSplit& split,
                                             bool aligned, int t, int T, const LinearRange& range,
                                             Bins& bins) {
  OutsideCounts out{0, 0};
  ForEachThreadElement<Dec::kSize>(chunk, split, aligned, t, T, [&](std::uint64_t bits) {
    const typename Dec::Compute x = Dec::Decode(bits);
    if (!IsFiniteValue(x)) return;
    const int b = LinearBin(static_cast<double>(x), range.lo, range.hi, range.scale, range.bins);
    if (b < 0) {
      ++out.below;
    } else if (b >= range.bins) {
      ++out.above;
    } else {
      bins.Add(b);
    }
  });
  return out;
}

// Label counts: labels in [0, classes) go to `bins`; returns how many of
// thread t's labels were out of range.
TSTAT_EXEC_CHECK_DISABLE
template <class Dec, class Bins>
TSTAT_HD std::uint64_t ThreadChunkLabels(const unsigned char* chunk, const ChunkSplit& split,
                                         bool aligned, int t, int T, std::int64_t classes,
                                         Bins& bins) {
  std::uint64_t out_of_range = 0;
  ForEachThreadElement<Dec::kSize>(chunk, split, aligned, t, T, [&](std::uint64_t bits) {
    const std::int64_t label = Dec::Label(bits);
    if (label >= 0 && label < classes) {
      bins.Add(static_cast<int>(label));
    } else {
      ++out_of_range;
    }
  });
  return out_of_range;
}

// ---------------------------------------------------------------------------
// Per-channel, wide mapping: thread t of T walks elements k = t, t+T, ... of
// the rows*inner elements of channel c in rows [row_begin, +rows), k -> (row
// k / inner, position k % inner), tracked incrementally (no 64-bit division per
// element). Consecutive threads read consecutive addresses within a row.
template <class Dec>
TSTAT_HD StatsPartial ThreadChannelWide(const unsigned char* data, bool aligned,
                                        const ChannelGeometry& g, std::int64_t c,
                                        std::int64_t row_begin, std::int64_t rows, int t, int T,
                                        const Thresholds<typename Dec::Compute>& th) {
  ElementAccumulator<typename Dec::Compute> acc;
  acc.Init();
  NoHistogram none;
  const std::int64_t total = rows * g.inner;
  if (t < total) {
    std::int64_t o = row_begin + t / g.inner;
    std::int64_t i = t % g.inner;
    const std::int64_t step_o = T / g.inner, step_i = T % g.inner;
    for (std::int64_t k = t; k < total; k += T) {
      const std::int64_t e = ChannelElementIndex(g, o, c, i);
      acc.Add(Dec::Decode(LoadBits<Dec::kSize>(data + e * Dec::kSize, aligned)), th, none);
      o += step_o;
      i += step_i;
      if (i >= g.inner) {
        i -= g.inner;
        ++o;
      }
    }
  }
  return acc.Finish();
}

// Per-channel, narrow mapping: lane `lane` of `lanes` of channel c reads rows
// row_begin + lane, + lane + lanes, ... (all `inner` elements of each).
template <class Dec>
TSTAT_HD StatsPartial ThreadChannelNarrow(const unsigned char* data, bool aligned,
                                          const ChannelGeometry& g, std::int64_t c,
                                          std::int64_t row_begin, std::int64_t rows, int lane,
                                          int lanes, const Thresholds<typename Dec::Compute>& th) {
  ElementAccumulator<typename Dec::Compute> acc;
  acc.Init();
  NoHistogram none;
  for (std::int64_t r = lane; r < rows; r += lanes) {
    const std::int64_t first = ChannelElementIndex(g, row_begin + r, c, 0);
    for (std::int64_t i = 0; i < g.inner; ++i) {
      acc.Add(Dec::Decode(LoadBits<Dec::kSize>(data + (first + i) * Dec::kSize, aligned)), th,
              none);
    }
  }
  return acc.Finish();
}

// Which (channel, lane) thread t of a narrow-mapping block works on; false
// when the thread has none (the last channel group, or T % group leftovers).
TSTAT_HD bool NarrowThreadRole(const ChannelItem& item, int t, std::int64_t* channel, int* lane) {
  const int j = t % item.group;
  *lane = t / item.group;
  *channel = item.c0 + j;
  return j < item.channels && *lane < item.lanes;
}

// The partial of channel c0 + j of a narrow-mapping block, from the per-thread
// partials of the block (indexed by thread): its lanes folded in lane order.
TSTAT_HD StatsPartial NarrowChannelMerge(const StatsPartial* per_thread, const ChannelItem& item,
                                         int j) {
  StatsPartial acc = per_thread[j];
  for (int lane = 1; lane < item.lanes; ++lane) acc = Merge(acc, per_thread[lane * item.group + j]);
  return acc;
}

// ---------------------------------------------------------------------------
// Sample gather: sample j of request r, its element converted to double.
TSTAT_HD double GatherSample(const DeviceRequest& r, std::int64_t j) {
  const std::int64_t pos = SamplePosition(r.sample_seed, j, r.numel, r.sample_k);
  double value = 0.0;
  WithDecoder(r.dtype, [&](auto dec) {
    using Dec = decltype(dec);
    const std::uint64_t bits = LoadBits<Dec::kSize>(r.data + pos * Dec::kSize, r.aligned != 0);
    value = static_cast<double>(Dec::Decode(bits));
  });
  return value;
}

// ---------------------------------------------------------------------------
// Auxiliary reductions (kernels/aux_ops.h for the per-pair operations).

// The vector/scalar split of a pair of chunks at addresses a and b (same
// length and element size): the usual split when both share the 16-byte
// phase (so both are read with vector loads at the same indices), all scalar
// otherwise.
TSTAT_HD ChunkSplit PairSplit(std::uintptr_t a, std::uintptr_t b, std::int64_t length,
                              int elem_size) {
  if ((a - b) % kVectorBytes == 0) return SplitChunk(a, length, elem_size);
  ChunkSplit s;
  s.length = length;
  s.head = length;
  s.vectors = 0;
  s.per_vec = 1;
  s.tail_begin = length;
  return s;
}

// Delta: the partial of thread t of T over its pairs (x[i], prev[i]) of one
// chunk (split = PairSplit of the two chunk addresses).
template <class Dec>
TSTAT_HD DeltaPartial ThreadChunkDelta(const unsigned char* x, const unsigned char* prev,
                                       const ChunkSplit& split, bool x_aligned, bool prev_aligned,
                                       int t, int T, const DeltaTolerance& tol) {
  constexpr int kSize = Dec::kSize;
  constexpr int kPerVec = kVectorBytes / kSize;
  DeltaPartial acc = DeltaPartial::Identity();
  const auto add = [&](std::uint64_t xb, std::uint64_t pb) {
    AddDeltaPair(static_cast<double>(Dec::Decode(xb)), static_cast<double>(Dec::Decode(pb)), tol,
                 &acc);
  };
  VisitChunk(
      split, t, T,
      [&](std::int64_t i) {
        add(LoadBits<kSize>(x + i * kSize, x_aligned),
            LoadBits<kSize>(prev + i * kSize, prev_aligned));
      },
      [&](std::int64_t first) {
        const Vec16 vx = LoadVec16(x + first * kSize);
        const Vec16 vp = LoadVec16(prev + first * kSize);
        TSTAT_UNROLL
        for (int j = 0; j < kPerVec; ++j) add(VecElement<kSize>(vx, j), VecElement<kSize>(vp, j));
      });
  return acc;
}

// Where a confusion request's predictions are and how to read them.
struct PredictionSource {
  const unsigned char* data;
  std::int64_t classes;
  int dtype;
  bool aligned;
  bool argmax;  // logits rows of `classes` values
};
TSTAT_HD PredictionSource PredictionSourceOf(const DeviceRequest& r) {
  return PredictionSource{r.conf_pred, r.label_classes, r.conf_dtype, r.conf_aligned != 0,
                          r.conf_argmax != 0};
}

// The predicted class of element i: its class id, or the first maximum of its
// logits row (-1 for a row with NaN). Not inlined on the device: one copy
// serves every call site of a kernel.
TSTAT_HD_NOINLINE std::int64_t PredictionAt(const PredictionSource& s, std::int64_t i) {
  std::int64_t prediction = -1;
  if (s.argmax) {
    WithFloatDecoder(s.dtype, [&](auto dec) {
      using Dec = decltype(dec);
      const unsigned char* row = s.data + i * s.classes * Dec::kSize;
      prediction = FirstArgmax(s.classes, [&](std::int64_t k) {
        return Dec::Decode(LoadBits<Dec::kSize>(row + k * Dec::kSize, s.aligned));
      });
    });
  } else {
    WithLabelDecoder(s.dtype, [&](auto dec) {
      using Dec = decltype(dec);
      prediction = Dec::Label(LoadBits<Dec::kSize>(s.data + i * Dec::kSize, s.aligned));
    });
  }
  return prediction;
}

// Confusion matrix: the cells of thread t's (label, prediction) pairs of a
// chunk that starts at element `begin` go to `bins`; returns how many pairs
// were invalid (label or prediction out of range, NaN logits).
TSTAT_EXEC_CHECK_DISABLE
template <class Dec, class Bins>
TSTAT_HD std::uint64_t ThreadChunkConfusion(const unsigned char* chunk, const ChunkSplit& split,
                                            bool aligned, std::int64_t begin, int t, int T,
                                            const PredictionSource& src, Bins& bins) {
  constexpr int kSize = Dec::kSize;
  constexpr int kPerVec = kVectorBytes / kSize;
  std::uint64_t invalid = 0;
  const auto count = [&](std::uint64_t bits, std::int64_t i) {
    const std::int64_t cell =
        ConfusionCell(Dec::Label(bits), PredictionAt(src, begin + i), src.classes);
    if (cell < 0) {
      ++invalid;
    } else {
      bins.Add(static_cast<int>(cell));
    }
  };
  VisitChunk(
      split, t, T, [&](std::int64_t i) { count(LoadBits<kSize>(chunk + i * kSize, aligned), i); },
      [&](std::int64_t first) {
        const Vec16 v = LoadVec16(chunk + first * kSize);
        TSTAT_NO_UNROLL
        for (int j = 0; j < kPerVec; ++j) count(VecElement<kSize>(v, j), first + j);
      });
  return invalid;
}

// Value counts: for each of thread t's elements, every entry of the sorted
// table equal to it adds one to bins[entry.index].
TSTAT_EXEC_CHECK_DISABLE
template <class Dec, class Bins>
TSTAT_HD void ThreadChunkValueCounts(const unsigned char* chunk, const ChunkSplit& split,
                                     bool aligned, int t, int T, const ValueEntry* table,
                                     int entries, Bins& bins) {
  ForEachThreadElement<Dec::kSize>(chunk, split, aligned, t, T, [&](std::uint64_t bits) {
    MatchValue(table, entries, Dec::Label(bits), bins);
  });
}

}  // namespace tstat::kernels
