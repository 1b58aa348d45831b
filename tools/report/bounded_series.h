// BoundedSeries: a series of (step, values) points kept in bounded memory,
// for drawing: whatever the run's length, at most `max_points / 3` buckets of
// consecutive points, each keeping its first and last point, the points with
// the smallest and the largest finite first value, and its first point whose
// first value is not finite (NaN, infinity). When a point would make one
// bucket too many, adjacent buckets are merged in pairs (and each new bucket
// takes twice as many points), which keeps those points exact: the extremes,
// every step's neighbourhood at the start and the end, and where values went
// non-finite survive any length. Deterministic: the same points added give
// the same kept points, however they were split between calls.
// Thread safety: plain data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tstat::report {

class BoundedSeries {
 public:
  static constexpr int kMaxValues = 4;
  // `values` values per point (1..kMaxValues); buckets are chosen by the first.
  explicit BoundedSeries(std::size_t max_points = 2000, int values = 1);

  void Add(std::int64_t x, const double* values);
  void Add(std::int64_t x, double value) { Add(x, &value); }

  std::uint64_t count() const { return count_; }  // points added
  bool empty() const { return count_ == 0; }
  double last() const;  // the last point's first value (NaN when empty)

  // The kept points ascending by x: x, and one column per value.
  void Points(std::vector<std::int64_t>* x, std::vector<std::vector<double>>* columns) const;
  // The kept points' first values.
  std::vector<double> KeptValues() const;

 private:
  struct Point {
    std::int64_t x = 0;
    double v[kMaxValues] = {};
  };
  struct Bucket {
    Point first, last, lo, hi, odd;
    bool has_finite = false, has_odd = false;
    std::uint64_t n = 0;
  };
  static void Merge(const Bucket& b, Bucket* into);

  std::size_t max_buckets_;
  int values_;
  std::uint64_t per_bucket_ = 1;
  std::uint64_t count_ = 0;
  std::vector<Bucket> buckets_;
};

}  // namespace tstat::report
