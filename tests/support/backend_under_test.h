// BackendUnderTest: how the backend-independent conformance suite
// (tests/kernels/conformance_*.cc) gets a backend and puts test data
// where that backend can read it. Each backend's test file instantiates the
// suite with its own BackendUnderTest values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tstat/engine.h"

namespace tstat::testing {

struct PlacedTensor {
  TensorView view;                 // what to pass in a ReductionRequest
  std::shared_ptr<void> storage;   // keeps device/host copies alive
};

struct BackendUnderTest {
  std::string name;  // used in test names: letters, digits, underscore
  std::function<std::unique_ptr<Backend>()> make;
  // Copies `bytes` bytes of host data into memory this backend reads and
  // returns a view of it. The default (host) places nothing: view points at
  // the caller's buffer, which the test keeps alive. A device placement must
  // keep the alignment phase of `host` (its address modulo 16, better 256):
  // the conformance suite passes host pointers at byte offsets 1..15 to test
  // misaligned input, and checks that the placed pointer has the same phase.
  std::function<PlacedTensor(const void* host, DType dtype, std::vector<std::int64_t> shape,
                             std::int64_t numel)>
      place;
};

// Host placement: the view aliases `host`.
inline PlacedTensor PlaceOnHost(const void* host, DType dtype, std::vector<std::int64_t> shape,
                                std::int64_t numel) {
  PlacedTensor p;
  p.view.data = host;
  p.view.dtype = dtype;
  p.view.shape = std::move(shape);
  p.view.numel = numel;
  p.view.space = MemorySpace::kHost;
  return p;
}

// gtest prints parameters with this (instead of a hex dump of the struct).
inline void PrintTo(const BackendUnderTest& b, std::ostream* os) { *os << b.name; }

inline std::string BackendName(const ::testing::TestParamInfo<BackendUnderTest>& info) {
  return info.param.name;
}

}  // namespace tstat::testing
