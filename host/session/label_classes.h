// Inferred label classes (CaptureOptions::infer_label_classes): how many
// classes the label counts of a labels tensor cover when the config does not
// say (stats.label_classes). Start: the last dimension of a registered
// predictions tensor ("predictions" or "logits" with rank >= 2), else 2.
// Then: a host tensor's largest label (read before the reduction, so none is
// lost), or a CUDA tensor's largest label seen in a result (its stats.max;
// labels at or past the classes of that step are counted as out of range).
// A tensor whose labels reach kMaxInferredLabelClasses is not a set of class
// labels (token ids, say): its label counts stop (classes 0).
// Thread safety: GrowLabelClasses may run on the collector thread; the
// atomic is shared with the session.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "tstat/engine.h"
#include "tstat/tensor_view.h"

namespace tstat::host {

inline constexpr int kMaxInferredLabelClasses = 1024;

// The classes that cover labels up to `largest` (largest + 1), or 0 past
// kMaxInferredLabelClasses.
inline int ClassesFor(std::int64_t largest) {
  return largest >= kMaxInferredLabelClasses ? 0 : static_cast<int>(largest + 1);
}

// The largest value of an integer host tensor (-1 when it is empty or every
// value is negative).
std::int64_t LargestHostLabel(const TensorView& v);

// After a reduction with label counts: grows *classes when the result saw a
// label at or past them.
void GrowLabelClasses(std::atomic<int>* classes, const ReductionResult& r);

}  // namespace tstat::host
