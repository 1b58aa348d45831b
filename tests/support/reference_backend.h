// ReferenceBackend: a Backend whose results are the reference's (reference.h)
// and whose request validation is written from the documented rules,
// independently of kernels/request_check.
//
// It exists to test the tests: the conformance suite instantiated with it must
// pass (a failure there is a defect of the suite or of the reference, not of a
// real backend). Host tensors only; slow (long double, serial).
#pragma once

#include <memory>

#include "tstat/engine.h"

namespace tstat::testing {

// kInvalidArgument naming the offending field, or OK.
Status ReferenceValidate(const ReductionRequest& request);

std::unique_ptr<Backend> CreateReferenceBackend();

}  // namespace tstat::testing
