// MannKendallTrend: the Mann-Kendall trend statistic of the most recent
// `capacity` values of a series, kept up to date as values arrive: S is the
// sum of sign(x_j - x_i) over every pair i < j of the window, Z its normal
// score, (S - sign(S)) / sqrt(n (n - 1) (2n + 5) / 18) (ties count 0; the
// variance is the tie-free one, which only shrinks |Z| when there are ties).
// Rank-based: a spike moves S by at most the window's length, whatever its
// size, so minibatch spikes do not hide a trend or make one. Each Add costs
// O(capacity).
// Thread safety: none (one owner).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>

namespace tstat::rules::run {

class MannKendallTrend {
 public:
  explicit MannKendallTrend(std::size_t capacity) : capacity_(capacity < 2 ? 2 : capacity) {}

  void Add(double x) {
    if (window_.size() == capacity_) {
      const double oldest = window_.front();
      window_.pop_front();
      for (double v : window_) s_ -= Sign(v - oldest);
    }
    for (double v : window_) s_ += Sign(x - v);
    window_.push_back(x);
  }

  std::size_t size() const { return window_.size(); }
  std::int64_t s() const { return s_; }

  // The normal score of S; 0 with fewer than 3 values.
  double Z() const {
    const double n = static_cast<double>(window_.size());
    if (n < 3) return 0.0;
    const double sd = std::sqrt(n * (n - 1) * (2 * n + 5) / 18.0);
    const double s = static_cast<double>(s_);
    return s > 0 ? (s - 1) / sd : s < 0 ? (s + 1) / sd : 0.0;
  }

 private:
  static int Sign(double d) { return (d > 0) - (d < 0); }

  std::size_t capacity_;
  std::deque<double> window_;
  std::int64_t s_ = 0;
};

}  // namespace tstat::rules::run
