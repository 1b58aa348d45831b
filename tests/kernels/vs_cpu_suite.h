// BackendVsCpuTest: a backend against the CPU backend on the same random data.
// Counts, histograms, label counts and samples must be exactly equal; the
// floating-point stats (sum, mean, m2, l1, l2) within 1e-6 relative (they sum
// in different orders); min/max/amax exactly (they are element values).
// Every dtype, with specials (NaN, Inf, zeros, subnormals), every tail of the
// vectorized loads (sizes 1..40 and around powers of two), misaligned starts,
// per-channel stats in both channel mappings, linear histograms, and label
// counts of every integer type. A backend's test file instantiates it:
//
//   INSTANTIATE_TEST_SUITE_P(Mine, BackendVsCpuTest,
//       ::testing::Combine(::testing::Values(MyBackend()), ::testing::ValuesIn(AllDTypes())),
//       BackendVsCpuName);
//   INSTANTIATE_TEST_SUITE_P(Mine, BackendVsCpuLabelsTest, ::testing::Values(MyBackend()),
//                            BackendName);
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "tests/support/backend_under_test.h"
#include "tstat/dtype.h"

namespace tstat::testing {

using BackendAndDType = std::tuple<BackendUnderTest, DType>;

class BackendVsCpuTest : public ::testing::TestWithParam<BackendAndDType> {};
class BackendVsCpuLabelsTest : public ::testing::TestWithParam<BackendUnderTest> {};

std::string BackendVsCpuName(const ::testing::TestParamInfo<BackendAndDType>& info);

}  // namespace tstat::testing
