// AuxReductionTest: the backend-independent suite of the auxiliary
// reductions (delta against previous values, confusion matrix, value counts).
//
// delta_suite.cc and confusion_suite.cc hold only TEST_Ps; a backend's test
// target compiles them and instantiates the suite with its BackendUnderTest,
//   INSTANTIATE_TEST_SUITE_P(Cpu, AuxReductionTest, ::testing::Values(...),
//                            BackendName);
// Every tensor, previous-values buffer and predictions buffer reaches the
// backend through param.place (so the suite runs on device memory too); the
// references (tests/support/reference_delta.h) read the host copies.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "tests/support/backend_under_test.h"
#include "tests/support/data.h"
#include "tests/support/reference_delta.h"
#include "tstat/engine.h"

namespace tstat::testing {

class AuxReductionTest : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    ASSERT_NE(backend_, nullptr) << "BackendUnderTest.make returned null";
  }

  // Where the backend reads `t` (kept alive until the end of the test).
  TensorView Place(const HostTensor& t) {
    PlacedTensor p = GetParam().place(t.data(), t.dtype(), t.shape(), t.numel());
    placed_.push_back(p);
    return p.view;
  }

  ReductionRequest Request(const HostTensor& t, const StatsOptions& options = {}) {
    ReductionRequest r;
    r.tensor = Place(t);
    r.options = options;
    return r;
  }

  // x with options.delta against `previous`.
  ReductionRequest DeltaRequest(const HostTensor& x, const HostTensor& previous, double atol,
                                double rtol) {
    ReductionRequest r = Request(x);
    r.options.delta.previous = Place(previous).data;
    r.options.delta.atol = atol;
    r.options.delta.rtol = rtol;
    return r;
  }

  // Labels with label_classes and a confusion matrix against `predictions`.
  ReductionRequest ConfusionRequest(const HostTensor& labels, int classes,
                                    const HostTensor& predictions, bool argmax) {
    ReductionRequest r = Request(labels);
    r.options.label_classes = classes;
    r.options.confusion.predictions = Place(predictions).data;
    r.options.confusion.predictions_dtype = predictions.dtype();
    r.options.confusion.argmax = argmax;
    return r;
  }

  // A failure of Reduce() itself is a test failure.
  std::vector<ReductionResult> Reduce(const std::vector<ReductionRequest>& requests) {
    std::vector<ReductionResult> results;
    const Status s = backend_->Reduce(requests, &results);
    EXPECT_TRUE(s.ok()) << s.ToString();
    results.resize(requests.size());
    return results;
  }
  ReductionResult ReduceOne(const ReductionRequest& r) { return Reduce({r})[0]; }

  // The delta reference of a request made by DeltaRequest(x, previous, ...).
  static DeltaStats ExpectedDelta(const HostTensor& x, const HostTensor& previous, double atol,
                                  double rtol) {
    return ReferenceDelta(x.data(), previous.data(), x.dtype(), x.numel(), atol, rtol);
  }
  static ConfusionMatrix ExpectedConfusion(const HostTensor& labels, int classes,
                                           const HostTensor& predictions, bool argmax) {
    return ReferenceConfusion(labels.data(), labels.dtype(), labels.numel(), classes,
                              predictions.data(), predictions.dtype(), argmax);
  }

  std::unique_ptr<Backend> backend_;
  std::vector<PlacedTensor> placed_;
};

// Relative tolerance of delta norms against the reference: every backend
// forms x - p and the sums in double.
inline constexpr double kDeltaRtol = 1e-9;

// Sizes that cover empty, single, sub-vector, tail and multi-chunk tensors,
// plus one drawn from a seeded generator (the same every run).
inline std::vector<std::int64_t> AuxSizes() {
  std::mt19937_64 rng(0x5eed0a11u);
  return {0, 1, 31, 1025, 70000, 2 + static_cast<std::int64_t>(rng() % 50000)};
}

}  // namespace tstat::testing
