// Comparing what a backend returned with the reference, and two results with
// each other bit for bit.
//
// StatsMatch: counts exactly; min/max/amax exactly (they are element values;
// +0 == -0); sum, mean, m2, l1, l2 within the Tolerance of data.h, judged
// against a condition scale so that cancelling sums are not held to a relative
// bound they cannot meet:
//   sum  : max(|sum|, l1)              mean: max(|mean|, l1/n)
//   m2   : max(m2, n*amax^2)           l1  : l1
//   l2   : max(l2, sqrt(n)*amax)
// plus n*2^-1072 (sqrt of it for l2) for the part of double arithmetic that
// underflows into subnormals (float64 subnormal inputs).
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "tests/support/data.h"
#include "tstat/engine.h"

namespace tstat::testing {

::testing::AssertionResult StatsMatch(const TensorStats& got, const TensorStats& want,
                                      const Tolerance& tol);

// Everything in a ReductionResult: status OK on both sides, the same optional
// parts present, histograms/labels/sample positions exactly equal, sample
// values equal (NaN matches NaN), stats and per-channel stats by StatsMatch.
::testing::AssertionResult ResultMatches(const ReductionResult& got, const ReductionResult& want,
                                         const Tolerance& tol);

// Bit-for-bit equality of two results (doubles compared by their bits).
::testing::AssertionResult ResultsBitwiseEqual(const ReductionResult& a, const ReductionResult& b);

// Same value: both NaN, or ==.
bool SameValue(double a, double b);

// One-line summary of a TensorStats, for failure messages.
std::string DescribeStats(const TensorStats& s);

}  // namespace tstat::testing
