// See bounded_series.h.
#include "tools/report/bounded_series.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tstat::report {

BoundedSeries::BoundedSeries(std::size_t max_points, int values)
    : max_buckets_(std::max<std::size_t>(2, max_points / 3)),
      values_(std::clamp(values, 1, kMaxValues)) {}

void BoundedSeries::Add(std::int64_t x, const double* values) {
  Point p;
  p.x = x;
  for (int i = 0; i < values_; ++i) p.v[i] = values[i];
  if (buckets_.empty() || buckets_.back().n == per_bucket_) {
    if (buckets_.size() == max_buckets_) {
      // One bucket too many: merge pairs, each bucket now twice as long.
      std::size_t kept = 0;
      for (std::size_t i = 0; i < buckets_.size(); i += 2) {
        Bucket merged = buckets_[i];
        if (i + 1 < buckets_.size()) Merge(buckets_[i + 1], &merged);
        buckets_[kept++] = merged;
      }
      buckets_.resize(kept);
      per_bucket_ *= 2;
    }
    if (buckets_.empty() || buckets_.back().n == per_bucket_) {
      Bucket b;
      b.first = p;
      buckets_.push_back(b);
    }
  }
  Bucket& b = buckets_.back();
  b.last = p;
  ++b.n;
  ++count_;
  const double v = p.v[0];
  if (std::isfinite(v)) {
    if (!b.has_finite || v < b.lo.v[0]) b.lo = p;
    if (!b.has_finite || v > b.hi.v[0]) b.hi = p;
    b.has_finite = true;
  } else if (!b.has_odd) {
    b.odd = p;
    b.has_odd = true;
  }
}

void BoundedSeries::Merge(const Bucket& b, Bucket* into) {
  into->last = b.last;
  into->n += b.n;
  if (b.has_finite) {
    if (!into->has_finite || b.lo.v[0] < into->lo.v[0]) into->lo = b.lo;
    if (!into->has_finite || b.hi.v[0] > into->hi.v[0]) into->hi = b.hi;
    into->has_finite = true;
  }
  if (b.has_odd && !into->has_odd) {
    into->odd = b.odd;
    into->has_odd = true;
  }
}

double BoundedSeries::last() const {
  return buckets_.empty() ? std::numeric_limits<double>::quiet_NaN() : buckets_.back().last.v[0];
}

void BoundedSeries::Points(std::vector<std::int64_t>* x,
                           std::vector<std::vector<double>>* columns) const {
  std::vector<const Point*> kept;
  for (const Bucket& b : buckets_) {
    const Point* candidates[] = {&b.first, b.has_finite ? &b.lo : nullptr,
                                 b.has_finite ? &b.hi : nullptr, b.has_odd ? &b.odd : nullptr,
                                 &b.last};
    const std::size_t start = kept.size();
    for (const Point* p : candidates) {
      if (p == nullptr) continue;
      bool seen = false;
      for (std::size_t i = start; i < kept.size(); ++i) seen = seen || kept[i]->x == p->x;
      if (!seen) kept.push_back(p);
    }
    std::sort(kept.begin() + static_cast<std::ptrdiff_t>(start), kept.end(),
              [](const Point* l, const Point* r) { return l->x < r->x; });
  }
  x->clear();
  columns->assign(static_cast<std::size_t>(values_), {});
  for (const Point* p : kept) {
    x->push_back(p->x);
    for (int i = 0; i < values_; ++i) (*columns)[static_cast<std::size_t>(i)].push_back(p->v[i]);
  }
}

std::vector<double> BoundedSeries::KeptValues() const {
  std::vector<std::int64_t> x;
  std::vector<std::vector<double>> columns;
  Points(&x, &columns);
  return columns.empty() ? std::vector<double>() : columns[0];
}

}  // namespace tstat::report
