// Serial reference of the auxiliary reductions (reference_delta.h).
#include "tests/support/reference_delta.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "tests/support/data.h"

namespace tstat::testing {
namespace {

// Neumaier's compensated sum in long double.
class Sum {
 public:
  void Add(long double x) {
    const long double t = sum_ + x;
    comp_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  long double Get() const { return sum_ + comp_; }

 private:
  long double sum_ = 0, comp_ = 0;
};

bool Near(double got, double want, double rtol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= rtol * std::fabs(want) + 1e-300;
}

// First maximum of row i, -1 when the row holds a NaN.
std::int64_t ReferenceArgmax(const void* logits, DType dtype, std::int64_t row, int classes) {
  std::int64_t best = -1;
  double best_value = 0.0;
  for (int k = 0; k < classes; ++k) {
    const double v = DecodeElement(logits, dtype, row * classes + k);
    if (std::isnan(v)) return -1;
    if (best < 0 || v > best_value) {
      best = k;
      best_value = v;
    }
  }
  return best;
}

}  // namespace

DeltaStats ReferenceDelta(const void* x, const void* previous, DType dtype, std::int64_t numel,
                          double atol, double rtol) {
  DeltaStats s;
  Sum l1, l2;
  long double amax = 0;
  for (std::int64_t i = 0; i < numel; ++i) {
    const double a = DecodeElement(x, dtype, i);
    const double p = DecodeElement(previous, dtype, i);
    ++s.count;
    if (!std::isfinite(a) || !std::isfinite(p)) {
      ++s.nonfinite_pairs;
      const bool same_infinity = std::isinf(a) && a == p;
      if (!same_infinity) ++s.changed_count;
      continue;
    }
    // The decision, as documented: each operation rounded to double.
    const double d = a - p;
    const double limit = atol + rtol * std::fabs(p);
    if (std::fabs(d) > limit) ++s.changed_count;
    const long double exact = static_cast<long double>(a) - static_cast<long double>(p);
    l1.Add(std::fabs(exact));
    l2.Add(exact * exact);
    amax = std::max(amax, std::fabs(exact));
  }
  s.l1 = static_cast<double>(l1.Get());
  s.l2 = static_cast<double>(std::sqrt(l2.Get()));
  s.amax = static_cast<double>(amax);
  return s;
}

ConfusionMatrix ReferenceConfusion(const void* labels, DType label_dtype, std::int64_t numel,
                                   int classes, const void* predictions, DType predictions_dtype,
                                   bool argmax) {
  ConfusionMatrix m;
  m.classes = classes;
  m.counts.assign(static_cast<std::size_t>(classes) * classes, 0);
  for (std::int64_t i = 0; i < numel; ++i) {
    const std::int64_t label = DecodeIntegerElement(labels, label_dtype, i);
    const std::int64_t pred = argmax ? ReferenceArgmax(predictions, predictions_dtype, i, classes)
                                     : DecodeIntegerElement(predictions, predictions_dtype, i);
    if (label < 0 || label >= classes || pred < 0 || pred >= classes) {
      ++m.invalid;
    } else {
      ++m.counts[static_cast<std::size_t>(label * classes + pred)];
    }
  }
  return m;
}

std::vector<std::uint64_t> ReferenceValueCounts(const void* data, DType dtype, std::int64_t numel,
                                                const std::vector<std::int64_t>& values) {
  std::vector<std::uint64_t> counts(values.size(), 0);
  for (std::int64_t i = 0; i < numel; ++i) {
    const std::int64_t v = DecodeIntegerElement(data, dtype, i);
    for (std::size_t k = 0; k < values.size(); ++k) counts[k] += values[k] == v ? 1 : 0;
  }
  return counts;
}

::testing::AssertionResult DeltaMatches(const DeltaStats& got, const DeltaStats& want,
                                        double rtol) {
  std::ostringstream diff;
  diff.precision(17);
  if (got.count != want.count) diff << " count " << got.count << " != " << want.count;
  if (got.changed_count != want.changed_count) {
    diff << " changed_count " << got.changed_count << " != " << want.changed_count;
  }
  if (got.nonfinite_pairs != want.nonfinite_pairs) {
    diff << " nonfinite_pairs " << got.nonfinite_pairs << " != " << want.nonfinite_pairs;
  }
  if (!Near(got.l1, want.l1, rtol)) diff << " l1 " << got.l1 << " vs " << want.l1;
  if (!Near(got.l2, want.l2, rtol)) diff << " l2 " << got.l2 << " vs " << want.l2;
  if (!Near(got.amax, want.amax, rtol)) diff << " amax " << got.amax << " vs " << want.amax;
  if (diff.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "delta differs:" << diff.str();
}

::testing::AssertionResult ConfusionEquals(const ConfusionMatrix& got,
                                           const ConfusionMatrix& want) {
  if (got.classes != want.classes) {
    return ::testing::AssertionFailure() << "classes " << got.classes << " != " << want.classes;
  }
  if (got.invalid != want.invalid) {
    return ::testing::AssertionFailure() << "invalid " << got.invalid << " != " << want.invalid;
  }
  if (got.counts.size() != want.counts.size()) {
    return ::testing::AssertionFailure()
           << "counts.size() " << got.counts.size() << " != " << want.counts.size();
  }
  for (std::size_t k = 0; k < got.counts.size(); ++k) {
    if (got.counts[k] != want.counts[k]) {
      const int c = std::max(want.classes, 1);
      return ::testing::AssertionFailure() << "cell (label " << k / c << ", prediction " << k % c
                                           << "): " << got.counts[k] << " != " << want.counts[k];
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ValueCountsEqual(const std::vector<std::uint64_t>& got,
                                            const std::vector<std::uint64_t>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "value_counts.size() " << got.size() << " != " << want.size();
  }
  for (std::size_t k = 0; k < got.size(); ++k) {
    if (got[k] != want[k]) {
      return ::testing::AssertionFailure()
             << "value_counts[" << k << "] " << got[k] << " != " << want[k];
    }
  }
  return ::testing::AssertionSuccess();
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

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

}  // namespace tstat::testing
