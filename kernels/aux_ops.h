// Per-element and merge operations of the auxiliary reductions that every
// backend runs beside the stat set: the delta against previously saved values
// (DeltaPartial), the confusion-matrix cell of a (label, prediction) pair with
// the first-maximum argmax of a logits row, and the value table behind value
// counts. Shared by the CPU passes (kernels/cpu/cpu_{delta,confusion,
// value_counts}.cc), the CUDA kernels and their emulation, so a pair is
// judged identically everywhere.
//
// Numerics of the delta: x and previous are exact in double (every input
// dtype is); d = x - previous is rounded once to double and "changed" is
// |d| > atol + rtol * |previous| evaluated in double with no fused multiply-add
// (the build disables contraction on host and device). l1, sum(d^2) and amax
// are plain double sums/maxima over finite pairs; partials merge in a fixed
// order (block order on the CPU, chunk order on CUDA). For f64 inputs whose
// difference exceeds DBL_MAX the norms are +Inf.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/hd.h"
#include "tstat/stats.h"

// As in kernels/plan/element_access.h: the templates below call whatever
// their functors/sinks provide (device or host code).
#ifndef TSTAT_EXEC_CHECK_DISABLE
#if defined(__CUDACC__)
#define TSTAT_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define TSTAT_EXEC_CHECK_DISABLE
#endif
#endif

namespace tstat::kernels {

// ---------------------------------------------------------------------------
// Delta.
struct DeltaPartial {
  std::uint64_t count;      // pairs
  std::uint64_t changed;    // pairs counted as changed
  std::uint64_t nonfinite;  // pairs with a non-finite side
  double l1, l2sq, amax;    // of d over finite pairs

  TSTAT_HD static DeltaPartial Identity() {
    DeltaPartial p;
    p.count = p.changed = p.nonfinite = 0;
    p.l1 = p.l2sq = p.amax = 0.0;
    return p;
  }
};

// `a` comes first in the merge order.
TSTAT_HD DeltaPartial MergeDelta(const DeltaPartial& a, const DeltaPartial& b) {
  DeltaPartial r;
  r.count = a.count + b.count;
  r.changed = a.changed + b.changed;
  r.nonfinite = a.nonfinite + b.nonfinite;
  r.l1 = a.l1 + b.l1;
  r.l2sq = a.l2sq + b.l2sq;
  r.amax = a.amax > b.amax ? a.amax : b.amax;
  return r;
}

struct DeltaMergeOp {
  TSTAT_HD DeltaPartial operator()(const DeltaPartial& a, const DeltaPartial& b) const {
    return MergeDelta(a, b);
  }
};

struct DeltaTolerance {
  double atol, rtol;
};

// Adds the pair (x, previous p), both exact values. A pair with a non-finite
// side counts as changed unless x == p (the same infinity; NaN never equals).
TSTAT_HD void AddDeltaPair(double x, double p, const DeltaTolerance& tol, DeltaPartial* acc) {
  acc->count += 1;
  if (x - x == 0.0 && p - p == 0.0) {  // both finite
    const double d = x - p;
    const double ad = d < 0.0 ? -d : d;
    const double ap = p < 0.0 ? -p : p;
    const double limit = tol.atol + tol.rtol * ap;
    acc->changed += (ad > limit) ? 1u : 0u;
    acc->l1 += ad;
    acc->l2sq += d * d;
    acc->amax = ad > acc->amax ? ad : acc->amax;
  } else {
    acc->nonfinite += 1;
    acc->changed += (x == p) ? 0u : 1u;
  }
}

inline DeltaStats ToDeltaStats(const DeltaPartial& p) {
  DeltaStats s;
  s.count = p.count;
  s.changed_count = p.changed;
  s.nonfinite_pairs = p.nonfinite;
  s.l1 = p.l1;
  s.l2 = std::sqrt(p.l2sq);
  s.amax = p.amax;
  return s;
}

// ---------------------------------------------------------------------------
// Confusion matrix.

// Index of the first maximum of a row of `classes` values (load(k) returns
// value k), or -1 when any value of the row is NaN.
TSTAT_EXEC_CHECK_DISABLE
template <class Load>
TSTAT_HD std::int64_t FirstArgmax(std::int64_t classes, Load&& load) {
  auto best = load(0);
  if (best != best) return -1;
  std::int64_t arg = 0;
  for (std::int64_t k = 1; k < classes; ++k) {
    const auto v = load(k);
    if (v != v) return -1;
    if (v > best) {
      best = v;
      arg = k;
    }
  }
  return arg;
}

// Cell label * classes + prediction, or -1 when either is outside [0, classes)
// (a prediction of -1 marks a NaN logits row).
TSTAT_HD std::int64_t ConfusionCell(std::int64_t label, std::int64_t prediction,
                                    std::int64_t classes) {
  if (label < 0 || label >= classes || prediction < 0 || prediction >= classes) return -1;
  return label * classes + prediction;
}

// ---------------------------------------------------------------------------
// Value counts: the values of options.count_values as a table sorted by
// value, each entry remembering its position in count_values (duplicates get
// an entry each, so every position receives its own count).
struct ValueEntry {
  std::int64_t value;
  std::int64_t index;  // position in options.count_values
};

inline std::vector<ValueEntry> BuildValueTable(const std::vector<std::int64_t>& values) {
  std::vector<ValueEntry> table(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    table[i] = ValueEntry{values[i], static_cast<std::int64_t>(i)};
  }
  std::sort(table.begin(), table.end(), [](const ValueEntry& a, const ValueEntry& b) {
    return a.value != b.value ? a.value < b.value : a.index < b.index;
  });
  return table;
}

// Calls sink.Add(index) for every entry of the sorted table equal to v.
TSTAT_EXEC_CHECK_DISABLE
template <class Sink>
TSTAT_HD void MatchValue(const ValueEntry* table, int n, std::int64_t v, Sink& sink) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table[mid].value < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (; lo < n && table[lo].value == v; ++lo) sink.Add(static_cast<int>(table[lo].index));
}

}  // namespace tstat::kernels
