// The conformance suite run against the reference itself: every test must pass
// here, or the test (or the reference) is wrong rather than a backend.
#include <gtest/gtest.h>

#include "tests/kernels/backend_conformance.h"
#include "tests/support/reference_backend.h"

namespace tstat::testing {
namespace {

BackendUnderTest Reference() {
  BackendUnderTest b;
  b.name = "Reference";
  b.make = [] { return CreateReferenceBackend(); };
  b.place = PlaceOnHost;
  return b;
}

INSTANTIATE_TEST_SUITE_P(Reference, BackendConformanceTest, ::testing::Values(Reference()),
                         BackendName);

}  // namespace
}  // namespace tstat::testing
