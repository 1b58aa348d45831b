// Inferred label classes (label_classes.h).
#include "host/session/label_classes.h"

#include <algorithm>
#include <cmath>

namespace tstat::host {
namespace {

template <class T>
std::int64_t Largest(const void* data, std::int64_t n) {
  const T* p = static_cast<const T*>(data);
  std::int64_t m = -1;
  for (std::int64_t i = 0; i < n; ++i)
    m = std::max<std::int64_t>(m, static_cast<std::int64_t>(p[i]));
  return m;
}

}  // namespace

std::int64_t LargestHostLabel(const TensorView& v) {
  if (v.data == nullptr || v.numel <= 0) return -1;
  switch (v.dtype) {
    case DType::kInt32:
      return Largest<std::int32_t>(v.data, v.numel);
    case DType::kInt64:
      return Largest<std::int64_t>(v.data, v.numel);
    case DType::kUInt8:
      return Largest<std::uint8_t>(v.data, v.numel);
    default:
      return -1;
  }
}

void GrowLabelClasses(std::atomic<int>* classes, const ReductionResult& r) {
  if (classes == nullptr || !r.label_counts || r.label_counts->out_of_range == 0) return;
  const double largest = r.stats.max;
  if (!std::isfinite(largest)) return;
  const int now = classes->load();
  if (now == 0 || largest < now) return;
  classes->store(ClassesFor(static_cast<std::int64_t>(largest)));
}

}  // namespace tstat::host
