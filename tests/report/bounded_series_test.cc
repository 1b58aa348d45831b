// BoundedSeries (tools/report/bounded_series.h): the points a report keeps
// of a series of any length, against the series itself.
#include "tools/report/bounded_series.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tstat::report {
namespace {

std::vector<std::int64_t> KeptSteps(const BoundedSeries& s) {
  std::vector<std::int64_t> x;
  std::vector<std::vector<double>> v;
  s.Points(&x, &v);
  return x;
}

TEST(BoundedSeriesTest, ShortSeriesAreKeptWhole) {
  BoundedSeries s(30);
  for (int i = 0; i < 10; ++i) s.Add(i, i * 0.5);
  std::vector<std::int64_t> x;
  std::vector<std::vector<double>> v;
  s.Points(&x, &v);
  ASSERT_EQ(x.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(x[i], i);
    EXPECT_EQ(v[0][i], i * 0.5);
  }
  EXPECT_EQ(s.count(), 10u);
  EXPECT_EQ(s.last(), 4.5);
}

TEST(BoundedSeriesTest, LongSeriesKeepTheirExtremesEndsAndNonFiniteValuesInBoundedPoints) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 1.0);
  for (int n : {100, 1000, 12345, 100000}) {
    BoundedSeries s(300);
    std::vector<double> y(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = noise(rng);
    const int spike = n / 3, dip = 2 * n / 3, nan_at = n / 2;
    y[static_cast<std::size_t>(spike)] = 1e6;
    y[static_cast<std::size_t>(dip)] = -1e6;
    y[static_cast<std::size_t>(nan_at)] = std::numeric_limits<double>::quiet_NaN();
    for (int i = 0; i < n; ++i) s.Add(10 * i, y[static_cast<std::size_t>(i)]);
    const std::vector<std::int64_t> kept = KeptSteps(s);
    EXPECT_LE(kept.size(), 500u) << n;  // 100 buckets x at most 5 points
    EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
    EXPECT_TRUE(std::adjacent_find(kept.begin(), kept.end()) == kept.end());
    for (int step : {0, n - 1, spike, dip, nan_at}) {
      EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), 10 * step)) << n << " " << step;
    }
    EXPECT_EQ(s.count(), static_cast<std::uint64_t>(n));
    // Every kept value is the series' value at its step.
    std::vector<std::int64_t> x;
    std::vector<std::vector<double>> v;
    s.Points(&x, &v);
    for (std::size_t k = 0; k < x.size(); ++k) {
      const double want = y[static_cast<std::size_t>(x[k] / 10)];
      EXPECT_TRUE(v[0][k] == want || (std::isnan(v[0][k]) && std::isnan(want)));
    }
  }
}

TEST(BoundedSeriesTest, TheSamePointsInAnySplitGiveTheSameKeptPoints) {
  // A live run is added to step by step; a finished one all at once: the
  // same kept points either way (what the dashboard and the report draw).
  BoundedSeries whole(60, 2), parts(60, 2);
  for (int i = 0; i < 5000; ++i) {
    const double v[2] = {std::sin(i * 0.01) * i, static_cast<double>(i)};
    whole.Add(i, v);
    parts.Add(i, v);
  }
  std::vector<std::int64_t> a, b;
  std::vector<std::vector<double>> va, vb;
  whole.Points(&a, &va);
  parts.Points(&b, &vb);
  EXPECT_EQ(a, b);
  EXPECT_EQ(va, vb);
  // The second value travels with its point.
  for (std::size_t k = 0; k < a.size(); ++k) EXPECT_EQ(va[1][k], static_cast<double>(a[k]));
}

}  // namespace
}  // namespace tstat::report
