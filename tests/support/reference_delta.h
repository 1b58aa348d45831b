// The reference of the auxiliary reductions (delta against previous values,
// confusion matrix, value counts), written from the contract in tstat/stats.h
// and independent of kernels/: elements are decoded with tests/support/data.h,
// norms are accumulated in long double with compensated sums, and every rule
// is applied element by element as documented. Also the comparisons of a
// backend's results with these references.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tstat/engine.h"
#include "tstat/stats.h"

namespace tstat::testing {

// Delta of x against previous (host memory, same floating dtype and numel):
// count every pair; a pair with a non-finite side is a non-finite pair and is
// changed unless both are the same infinity (NaN never equals); a finite pair
// is changed when |x - p| > atol + rtol * |p| (each operation in double, as
// the contract says); l1, l2 and amax of x - p over finite pairs, exactly
// (long double differences and compensated sums).
DeltaStats ReferenceDelta(const void* x, const void* previous, DType dtype, std::int64_t numel,
                          double atol, double rtol);

// Confusion matrix of integer labels against integer predictions (argmax
// false) or against logits rows of `classes` values of a floating dtype
// (argmax true: the first maximum; a row containing NaN is invalid).
ConfusionMatrix ReferenceConfusion(const void* labels, DType label_dtype, std::int64_t numel,
                                   int classes, const void* predictions, DType predictions_dtype,
                                   bool argmax);

// counts[i] = number of elements of the integer tensor equal to values[i].
std::vector<std::uint64_t> ReferenceValueCounts(const void* data, DType dtype, std::int64_t numel,
                                                const std::vector<std::int64_t>& values);

// Counts exactly; l1, l2, amax within |got - want| <= rtol * |want| + 1e-300
// (amax is |x - p| rounded once to double by a backend, exact here).
::testing::AssertionResult DeltaMatches(const DeltaStats& got, const DeltaStats& want, double rtol);
// Everything exactly equal.
::testing::AssertionResult ConfusionEquals(const ConfusionMatrix& got, const ConfusionMatrix& want);
::testing::AssertionResult ValueCountsEqual(const std::vector<std::uint64_t>& got,
                                            const std::vector<std::uint64_t>& want);

// The same double bit for bit (the sign of zero and NaN payloads included).
bool SameBits(double a, double b);

// kInvalidArgument whose message contains `field`.
::testing::AssertionResult RejectedNaming(const ReductionResult& r, const std::string& field);

}  // namespace tstat::testing
