// Result comparison for the conformance suite (compare.h).
#include "tests/support/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <sstream>

namespace tstat::testing {
namespace {

// 2^-1072: four times the smallest subnormal double.
const double kUnderflowUnit = std::ldexp(1.0, -1072);

std::string Fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::uint64_t Bits(double v) {
  std::uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

// Collects mismatches, keeps the first few in the message.
class Mismatches {
 public:
  void Add(const std::string& what) {
    if (count_ < 12) out_ << "\n  " << what;
    ++count_;
  }
  template <class T>
  void Count(const std::string& name, T got, T want) {
    if (got != want) {
      std::ostringstream s;
      s << name << ": got " << got << ", want " << want;
      Add(s.str());
    }
  }
  void Exact(const std::string& name, double got, double want) {
    if (!SameValue(got, want)) Add(name + ": got " + Fmt(got) + ", want " + Fmt(want));
  }
  void Near(const std::string& name, double got, double want, double scale, double allowance,
            const Tolerance& tol) {
    if (std::isnan(want) || std::isnan(got) || got == want) {  // also equal infinities
      Exact(name, got, want);
      return;
    }
    const double bound = tol.atol + tol.rtol * std::fmax(std::fabs(want), scale) + allowance;
    const double err = std::fabs(got - want);
    if (!(err <= bound)) {
      Add(name + ": got " + Fmt(got) + ", want " + Fmt(want) + " (error " + Fmt(err) +
          " > bound " + Fmt(bound) + ")");
    }
  }
  bool ok() const { return count_ == 0; }
  ::testing::AssertionResult Result() const {
    if (ok()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << count_ << " mismatch(es)" << out_.str()
                                         << (count_ > 12 ? "\n  ..." : "");
  }

 private:
  int count_ = 0;
  std::ostringstream out_;
};

void CompareStats(Mismatches& m, const std::string& where, const TensorStats& got,
                  const TensorStats& want, const Tolerance& tol) {
  const auto name = [&](const char* field) { return where + field; };
  m.Count(name("count"), got.count, want.count);
  m.Count(name("finite_count"), got.finite_count, want.finite_count);
  m.Count(name("nan_count"), got.nan_count, want.nan_count);
  m.Count(name("pos_inf_count"), got.pos_inf_count, want.pos_inf_count);
  m.Count(name("neg_inf_count"), got.neg_inf_count, want.neg_inf_count);
  m.Count(name("zero_count"), got.zero_count, want.zero_count);
  m.Count(name("neg_count"), got.neg_count, want.neg_count);
  m.Count(name("subnormal_count"), got.subnormal_count, want.subnormal_count);
  m.Count(name("band_lo_count"), got.band_lo_count, want.band_lo_count);
  m.Count(name("band_hi_count"), got.band_hi_count, want.band_hi_count);
  m.Count(name("small_count"), got.small_count, want.small_count);
  m.Exact(name("min"), got.min, want.min);
  m.Exact(name("max"), got.max, want.max);
  m.Exact(name("amax"), got.amax, want.amax);
  const double n = static_cast<double>(want.finite_count);
  const double amax = std::isfinite(want.amax) ? want.amax : 0.0;
  const double allowance = n * kUnderflowUnit;
  m.Near(name("sum"), got.sum, want.sum, want.l1, allowance, tol);
  m.Near(name("mean"), got.mean, want.mean, n > 0 ? want.l1 / n : 0.0, allowance, tol);
  m.Near(name("m2"), got.m2, want.m2, n * amax * amax, allowance, tol);
  m.Near(name("l1"), got.l1, want.l1, want.l1, allowance, tol);
  m.Near(name("l2"), got.l2, want.l2, std::sqrt(n) * amax, std::sqrt(allowance), tol);
}

}  // namespace

bool SameValue(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

std::string DescribeStats(const TensorStats& s) {
  std::ostringstream o;
  o << "count=" << s.count << " finite=" << s.finite_count << " nan=" << s.nan_count
    << " +inf=" << s.pos_inf_count << " -inf=" << s.neg_inf_count << " zero=" << s.zero_count
    << " neg=" << s.neg_count << " sub=" << s.subnormal_count << " lo=" << s.band_lo_count
    << " hi=" << s.band_hi_count << " small=" << s.small_count << " min=" << Fmt(s.min)
    << " max=" << Fmt(s.max) << " sum=" << Fmt(s.sum) << " mean=" << Fmt(s.mean)
    << " m2=" << Fmt(s.m2) << " l1=" << Fmt(s.l1) << " l2=" << Fmt(s.l2)
    << " amax=" << Fmt(s.amax);
  return o.str();
}

::testing::AssertionResult StatsMatch(const TensorStats& got, const TensorStats& want,
                                      const Tolerance& tol) {
  Mismatches m;
  CompareStats(m, "", got, want, tol);
  return m.Result();
}

::testing::AssertionResult ResultMatches(const ReductionResult& got, const ReductionResult& want,
                                         const Tolerance& tol) {
  Mismatches m;
  if (!got.status.ok()) m.Add("status: " + got.status.ToString());
  if (!want.status.ok()) m.Add("reference status: " + want.status.ToString());
  if (!m.ok()) return m.Result();
  CompareStats(m, "stats.", got.stats, want.stats, tol);

  m.Count("has exponent_histogram", got.exponent_histogram.has_value(),
          want.exponent_histogram.has_value());
  if (got.exponent_histogram && want.exponent_histogram) {
    for (int b = 0; b < kExpHistBins; ++b) {
      const auto g = got.exponent_histogram->counts[static_cast<std::size_t>(b)];
      const auto w = want.exponent_histogram->counts[static_cast<std::size_t>(b)];
      if (g != w) {
        m.Add("exponent_histogram bin " + std::to_string(b) + " (2^" +
              std::to_string(ExponentHistogram::BinExponent(b)) + "): got " + std::to_string(g) +
              ", want " + std::to_string(w));
      }
    }
  }

  m.Count("has linear_histogram", got.linear_histogram.has_value(),
          want.linear_histogram.has_value());
  if (got.linear_histogram && want.linear_histogram) {
    const LinearHistogram& g = *got.linear_histogram;
    const LinearHistogram& w = *want.linear_histogram;
    m.Exact("linear_histogram.lo", g.lo, w.lo);
    m.Exact("linear_histogram.hi", g.hi, w.hi);
    m.Count("linear_histogram.below", g.below, w.below);
    m.Count("linear_histogram.above", g.above, w.above);
    m.Count("linear_histogram.bins", g.counts.size(), w.counts.size());
    if (g.counts.size() == w.counts.size()) {
      for (std::size_t i = 0; i < g.counts.size(); ++i) {
        if (g.counts[i] != w.counts[i]) {
          m.Add("linear_histogram bucket " + std::to_string(i) + ": got " +
                std::to_string(g.counts[i]) + ", want " + std::to_string(w.counts[i]));
        }
      }
    }
  }

  m.Count("has per_channel", got.per_channel.has_value(), want.per_channel.has_value());
  if (got.per_channel && want.per_channel) {
    m.Count("per_channel.axis", got.per_channel->axis, want.per_channel->axis);
    m.Count("per_channel.channels", got.per_channel->channels.size(),
            want.per_channel->channels.size());
    if (got.per_channel->channels.size() == want.per_channel->channels.size()) {
      for (std::size_t c = 0; c < got.per_channel->channels.size(); ++c) {
        CompareStats(m, "channel " + std::to_string(c) + ".", got.per_channel->channels[c],
                     want.per_channel->channels[c], tol);
      }
    }
  }

  m.Count("has label_counts", got.label_counts.has_value(), want.label_counts.has_value());
  if (got.label_counts && want.label_counts) {
    m.Count("label_counts.out_of_range", got.label_counts->out_of_range,
            want.label_counts->out_of_range);
    m.Count("label_counts.classes", got.label_counts->counts.size(),
            want.label_counts->counts.size());
    if (got.label_counts->counts.size() == want.label_counts->counts.size()) {
      for (std::size_t i = 0; i < got.label_counts->counts.size(); ++i) {
        if (got.label_counts->counts[i] != want.label_counts->counts[i]) {
          m.Add("label_counts[" + std::to_string(i) + "]: got " +
                std::to_string(got.label_counts->counts[i]) + ", want " +
                std::to_string(want.label_counts->counts[i]));
        }
      }
    }
  }

  m.Count("has sample", got.sample.has_value(), want.sample.has_value());
  if (got.sample && want.sample) {
    m.Count("sample.positions.size", got.sample->positions.size(), want.sample->positions.size());
    m.Count("sample.values.size", got.sample->values.size(), want.sample->values.size());
    const std::size_t k = std::min(got.sample->positions.size(), want.sample->positions.size());
    for (std::size_t j = 0; j < k; ++j) {
      if (got.sample->positions[j] != want.sample->positions[j]) {
        m.Add("sample.positions[" + std::to_string(j) + "]: got " +
              std::to_string(got.sample->positions[j]) + ", want " +
              std::to_string(want.sample->positions[j]));
      }
    }
    const std::size_t kv = std::min(got.sample->values.size(), want.sample->values.size());
    for (std::size_t j = 0; j < kv; ++j) {
      if (!SameValue(got.sample->values[j], want.sample->values[j])) {
        m.Add("sample.values[" + std::to_string(j) + "]: got " + Fmt(got.sample->values[j]) +
              ", want " + Fmt(want.sample->values[j]));
      }
    }
  }
  return m.Result();
}

::testing::AssertionResult ResultsBitwiseEqual(const ReductionResult& a,
                                               const ReductionResult& b) {
  Mismatches m;
  if (a.status.code() != b.status.code() || a.status.message() != b.status.message()) {
    m.Add("status: " + a.status.ToString() + " vs " + b.status.ToString());
  }
  const auto stats_equal = [&](const std::string& where, const TensorStats& x,
                               const TensorStats& y) {
    const std::uint64_t cx[] = {x.count, x.finite_count, x.nan_count, x.pos_inf_count,
                                x.neg_inf_count, x.zero_count, x.neg_count, x.subnormal_count,
                                x.band_lo_count, x.band_hi_count, x.small_count};
    const std::uint64_t cy[] = {y.count, y.finite_count, y.nan_count, y.pos_inf_count,
                                y.neg_inf_count, y.zero_count, y.neg_count, y.subnormal_count,
                                y.band_lo_count, y.band_hi_count, y.small_count};
    const double fx[] = {x.min, x.max, x.sum, x.mean, x.m2, x.l1, x.l2, x.amax};
    const double fy[] = {y.min, y.max, y.sum, y.mean, y.m2, y.l1, y.l2, y.amax};
    static const char* kFloatNames[] = {"min", "max", "sum", "mean", "m2", "l1", "l2", "amax"};
    for (std::size_t i = 0; i < std::size(cx); ++i) {
      if (cx[i] != cy[i]) m.Add(where + "count field " + std::to_string(i) + " differs");
    }
    for (std::size_t i = 0; i < std::size(fx); ++i) {
      if (Bits(fx[i]) != Bits(fy[i])) {
        m.Add(where + kFloatNames[i] + ": " + Fmt(fx[i]) + " vs " + Fmt(fy[i]));
      }
    }
  };
  stats_equal("stats.", a.stats, b.stats);
  if (a.exponent_histogram.has_value() != b.exponent_histogram.has_value() ||
      (a.exponent_histogram && a.exponent_histogram->counts != b.exponent_histogram->counts)) {
    m.Add("exponent_histogram differs");
  }
  if (a.linear_histogram.has_value() != b.linear_histogram.has_value()) {
    m.Add("linear_histogram presence differs");
  } else if (a.linear_histogram) {
    const LinearHistogram& x = *a.linear_histogram;
    const LinearHistogram& y = *b.linear_histogram;
    if (Bits(x.lo) != Bits(y.lo) || Bits(x.hi) != Bits(y.hi) || x.counts != y.counts ||
        x.below != y.below || x.above != y.above) {
      m.Add("linear_histogram differs");
    }
  }
  if (a.per_channel.has_value() != b.per_channel.has_value()) {
    m.Add("per_channel presence differs");
  } else if (a.per_channel) {
    if (a.per_channel->axis != b.per_channel->axis ||
        a.per_channel->channels.size() != b.per_channel->channels.size()) {
      m.Add("per_channel shape differs");
    } else {
      for (std::size_t c = 0; c < a.per_channel->channels.size(); ++c) {
        stats_equal("channel " + std::to_string(c) + ".", a.per_channel->channels[c],
                    b.per_channel->channels[c]);
      }
    }
  }
  if (a.label_counts.has_value() != b.label_counts.has_value() ||
      (a.label_counts && (a.label_counts->counts != b.label_counts->counts ||
                          a.label_counts->out_of_range != b.label_counts->out_of_range))) {
    m.Add("label_counts differ");
  }
  if (a.sample.has_value() != b.sample.has_value()) {
    m.Add("sample presence differs");
  } else if (a.sample) {
    bool same = a.sample->positions == b.sample->positions &&
                a.sample->values.size() == b.sample->values.size();
    for (std::size_t j = 0; same && j < a.sample->values.size(); ++j) {
      same = Bits(a.sample->values[j]) == Bits(b.sample->values[j]);
    }
    if (!same) m.Add("sample differs");
  }
  return m.Result();
}

}  // namespace tstat::testing
