// BackendConformanceTest: the backend-independent conformance suite.
//
// The conformance_*.cc files hold only TEST_Ps; a backend's test target
// compiles them (TSTAT_CONFORMANCE_SOURCES, tests/kernels/
// conformance_sources.cmake) and instantiates the suite with its
// BackendUnderTest values, e.g.
//   INSTANTIATE_TEST_SUITE_P(Cpu, BackendConformanceTest,
//                            ::testing::Values(...), BackendName);
// Every tensor reaches the backend through param.place, so the same tests run
// on device memory; the reference always reads the original host copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/backend_under_test.h"
#include "tests/support/compare.h"
#include "tests/support/data.h"
#include "tests/support/reference.h"
#include "tstat/engine.h"

namespace tstat::testing {

class BackendConformanceTest : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    ASSERT_NE(backend_, nullptr) << "BackendUnderTest.make returned null";
  }

  Backend& backend() { return *backend_; }

  // Places a host tensor where the backend reads it (through param.place) and
  // keeps the placement alive until the end of the test.
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

  // Runs a batch; a failure of Reduce() itself is a test failure (the results
  // are then whatever the backend left).
  std::vector<ReductionResult> Reduce(const std::vector<ReductionRequest>& requests) {
    std::vector<ReductionResult> results;
    const Status s = backend_->Reduce(requests, &results);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(results.size(), requests.size());
    results.resize(requests.size());
    return results;
  }

  ReductionResult ReduceOne(const HostTensor& t, const StatsOptions& options = {}) {
    return Reduce({Request(t, options)})[0];
  }

  // The reference result of `t` under `options` (reads the host copy).
  static ReductionResult Expected(const HostTensor& t, const StatsOptions& options = {}) {
    return ReferenceReduce(t.View(), options);
  }

  // Reduces `t` alone and compares with the reference.
  ::testing::AssertionResult MatchesReference(const HostTensor& t,
                                              const StatsOptions& options = {}) {
    return ResultMatches(ReduceOne(t, options), Expected(t, options), ToleranceFor(t.dtype()));
  }

  // A request that must be rejected: its status code and a message that
  // contains `field`.
  ::testing::AssertionResult RejectedNaming(const ReductionResult& r, const std::string& field) {
    if (r.status.code() != StatusCode::kInvalidArgument) {
      return ::testing::AssertionFailure()
             << "expected invalid_argument naming '" << field << "', got " << r.status.ToString();
    }
    if (r.status.message().find(field) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message does not name '" << field << "': " << r.status.message();
    }
    return ::testing::AssertionSuccess();
  }

  // Memory space the backend does not accept (for the wrong-space test).
  MemorySpace ForeignSpace() const {
    return backend_->kind() == BackendKind::kCpu ? MemorySpace::kCuda : MemorySpace::kHost;
  }

  std::unique_ptr<Backend> backend_;
  std::vector<PlacedTensor> placed_;
};

}  // namespace tstat::testing
